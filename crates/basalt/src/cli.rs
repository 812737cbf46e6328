//! Command-line arguments.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "basalt", version, about = "A RocketMQ-compatible message broker", long_about = None)]
pub struct Cli {
    /// More logging (-v debug, -vv trace). BASALT_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// NameServer and broker in one process, data in ./basalt-data.
    Standalone(StandaloneArgs),
    /// A NameServer alone.
    Namesrv(NamesrvArgs),
    /// A broker alone, configured by a broker.conf (.properties or .toml).
    Broker(BrokerArgs),
    /// Offline tools for a store directory.
    #[command(subcommand)]
    Store(StoreCommand),
}

/// Settings given as `key=value` on the command line override the file.
#[derive(Debug, Clone, Args)]
pub struct Overrides {
    /// A broker.conf setting, e.g. --set flushDiskType=SYNC_FLUSH (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

#[derive(Debug, Args)]
pub struct StandaloneArgs {
    /// Store root directory.
    #[arg(long, default_value = "./basalt-data")]
    pub data: PathBuf,
    /// NameServer port.
    #[arg(long, default_value_t = 9876)]
    pub namesrv_port: u16,
    /// Broker port.
    #[arg(long, default_value_t = 10911)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub listen: std::net::IpAddr,
    /// Address clients are told to use for the broker (brokerIP1).
    #[arg(long, default_value = "127.0.0.1")]
    pub advertise: std::net::IpAddr,
    /// A broker.conf file applied before --set.
    #[arg(short = 'c', long)]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: Overrides,
}

#[derive(Debug, Args)]
pub struct NamesrvArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 9876)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub listen: std::net::IpAddr,
}

#[derive(Debug, Args)]
pub struct BrokerArgs {
    /// broker.conf (.properties, or .toml).
    #[arg(short = 'c', long)]
    pub config: PathBuf,
    #[command(flatten)]
    pub overrides: Overrides,
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Validate every record and ConsumeQueue unit; exit 2 on corruption.
    Check {
        /// Store root directory (holding commitlog/).
        dir: PathBuf,
        /// CommitLog file size, if not the size of the files found.
        #[arg(long)]
        file_size: Option<usize>,
    },
    /// List records: offset, topic, queue, queue offset, tags, keys, body size.
    Dump {
        dir: PathBuf,
        /// First CommitLog offset to list.
        #[arg(long)]
        from: Option<i64>,
        /// At most this many records.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long)]
        file_size: Option<usize>,
    },
}

impl Cli {
    pub fn run(self) -> Result<ExitCode, String> {
        match self.command {
            Command::Standalone(a) => crate::serve::standalone(a),
            Command::Namesrv(a) => crate::serve::namesrv(a),
            Command::Broker(a) => crate::serve::broker(a),
            Command::Store(s) => crate::store_tools::run(s),
        }
    }
}
