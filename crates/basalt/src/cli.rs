//! Command-line arguments.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "basalt", version, about = "A RocketMQ-compatible message broker", long_about = None)]
pub struct Cli {
    /// More logging (-v, -vv, -vvv). BASALT_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Connect to NameServers and brokers with TLS (any server certificate
    /// is taken unless --tls-ca is given).
    #[arg(long, global = true, env = "BASALT_TLS")]
    pub tls: bool,
    /// Connect with TLS and check server certificates against the CA
    /// certificates in this PEM file (implies --tls).
    #[arg(long, global = true, value_name = "PEM", env = "BASALT_TLS_CA")]
    pub tls_ca: Option<PathBuf>,
    /// Sign every request as this user (ACL 2.0 user name or ACL 1.0
    /// accessKey), for brokers and NameServers with authentication on.
    #[arg(
        long,
        global = true,
        env = "BASALT_ACCESS_KEY",
        requires = "secret_key"
    )]
    pub access_key: Option<String>,
    /// The user's password (ACL 1.0 secretKey). Prefer the environment
    /// variable: a flag shows in the process list.
    #[arg(long, global = true, env = "BASALT_SECRET_KEY", hide_env_values = true)]
    pub secret_key: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// NameServer and broker in one process, data in ./basalt-data. Unlike a
    /// plain broker it allows SQL92 property filters by default
    /// (enablePropertyFilter=true; --set enablePropertyFilter=false to refuse).
    Standalone(StandaloneArgs),
    /// A NameServer alone.
    Namesrv(NamesrvArgs),
    /// A broker alone, configured by a broker.conf (.properties or .toml).
    Broker(BrokerArgs),
    /// Offline tools for a store directory.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Send messages (a count of generated ones, or one per line of stdin).
    Produce(ProduceArgs),
    /// Receive messages (push consumer, or pull from one queue with --queue).
    Consume(ConsumeArgs),
    /// Topics, cluster, brokers, consumer progress, message lookups.
    Admin(AdminArgs),
    /// Throughput and latency benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Args)]
pub struct ProduceArgs {
    /// NameServer address(es), `;`-separated.
    #[arg(long, default_value = "127.0.0.1:9876", env = "NAMESRV_ADDR")]
    pub namesrv: String,
    #[arg(short, long)]
    pub topic: String,
    /// Producer group.
    #[arg(long, default_value = "basalt-cli-producer")]
    pub group: String,
    /// Messages to send (ignored with --stdin).
    #[arg(short = 'n', long, default_value_t = 1)]
    pub count: u64,
    /// Body size in bytes of generated messages.
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    /// A fixed body for every message.
    #[arg(long)]
    pub body: Option<String>,
    /// Read bodies from stdin, one message per line.
    #[arg(long)]
    pub stdin: bool,
    #[arg(long)]
    pub tags: Option<String>,
    /// Business key; `{i}` is replaced by the message number.
    #[arg(long)]
    pub keys: Option<String>,
    /// A user property KEY=VALUE (repeatable).
    #[arg(long)]
    pub property: Vec<String>,
    /// Delay level (1 = 1 s, 2 = 5 s, …).
    #[arg(long, default_value_t = 0)]
    pub delay_level: i32,
    /// Print one JSON summary instead of text (no per-message lines).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[arg(long, default_value = "127.0.0.1:9876", env = "NAMESRV_ADDR")]
    pub namesrv: String,
    #[arg(short, long)]
    pub topic: String,
    /// Consumer group.
    #[arg(short, long, default_value = "basalt-cli-consumer")]
    pub group: String,
    /// Subscription expression (`TagA || TagB`).
    #[arg(long)]
    pub tags: Option<String>,
    /// Where a new group starts: first or last.
    #[arg(long, default_value = "first")]
    pub from: String,
    /// Stop after this many messages (0: run until Ctrl-C or --timeout).
    #[arg(short = 'n', long, default_value_t = 0)]
    pub count: u64,
    /// Stop after this many seconds.
    #[arg(long)]
    pub timeout: Option<u64>,
    /// Only count, do not print messages.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print message metadata without bodies.
    #[arg(long)]
    pub no_body: bool,
    /// Pull one queue directly instead of subscribing.
    #[arg(long)]
    pub queue: Option<i32>,
    /// With --queue: the broker name (if the topic is on several brokers).
    #[arg(long)]
    pub broker: Option<String>,
    /// With --queue: the first offset to read.
    #[arg(long)]
    pub offset: Option<i64>,
    /// Print one JSON summary instead of text (implies --quiet).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AdminArgs {
    #[arg(
        long,
        default_value = "127.0.0.1:9876",
        env = "NAMESRV_ADDR",
        global = true
    )]
    pub namesrv: String,
    /// Print one JSON object instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    #[command(subcommand)]
    Topic(TopicCommand),
    /// Brokers of every cluster with their role, traffic and replication state.
    Cluster,
    /// Runtime information of one broker.
    Broker {
        /// Broker address (ip:port).
        addr: String,
    },
    /// Timer messages on every broker: how many wait, when the next is due,
    /// how far enqueueing and delivery are behind.
    Timers,
    /// A consumer group's offsets and lag.
    Progress {
        #[arg(short, long)]
        group: String,
        #[arg(short, long)]
        topic: Option<String>,
    },
    /// A consumer group's connections and subscriptions (expression type
    /// and expression of each topic).
    Consumer {
        #[arg(short, long)]
        group: String,
    },
    #[command(subcommand)]
    Message(MessageCommand),
    /// Take a broker group's write permission away in every topic (--off:
    /// drain it before a restart) or give it back (--on), at every NameServer.
    WritePerm {
        #[arg(short = 'b', long)]
        broker_name: String,
        #[arg(long, conflicts_with = "on", required_unless_present = "on")]
        off: bool,
        #[arg(long)]
        on: bool,
    },
    /// Move a consumer group's offsets on a topic to the first message
    /// stored at or after a time; online consumers are told and consume
    /// from there.
    ResetOffset {
        #[arg(short, long)]
        group: String,
        #[arg(short, long)]
        topic: String,
        /// Milliseconds since the epoch, `now`, or yyyy-MM-ddTHH:mm:ss[.SSS]
        /// in UTC.
        #[arg(long)]
        time: String,
        /// Only move queues back (by default a queue may move forward too,
        /// as `mqadmin resetOffsetByTime` does).
        #[arg(long)]
        no_force: bool,
    },
    /// Move a consumer group's offsets on a topic to the end: what has
    /// accumulated is skipped.
    SkipAccumulated {
        #[arg(short, long)]
        group: String,
        #[arg(short, long)]
        topic: String,
    },
    /// A producer group's connections (on the brokers of a topic it sends to).
    Producer {
        #[arg(short, long)]
        group: String,
        #[arg(short, long)]
        topic: String,
    },
    /// What each consumer of a group reports: its settings and, per queue,
    /// the offset it committed and the messages it holds.
    ConsumerStatus {
        #[arg(short, long)]
        group: String,
        /// Ask this client only.
        #[arg(long)]
        client_id: Option<String>,
    },
    /// Unresolved transactional (half) messages of every master of a
    /// cluster (or of one broker): age and checks so far.
    Transactions {
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
        /// Ask this broker address only.
        #[arg(short, long)]
        broker: Option<String>,
        /// Most transactions listed per broker.
        #[arg(long, default_value_t = 100)]
        max: i32,
    },
    /// POP consumption of every master of a cluster (or of one broker):
    /// messages popped and not yet acked, by group and topic read, and
    /// the revive lag (Basalt's own; docs/pop.md#operations).
    Pop {
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
        /// Ask this broker address only.
        #[arg(short, long)]
        broker: Option<String>,
        /// Show this consumer group only.
        #[arg(short, long)]
        group: Option<String>,
    },
    /// Ledger-mode (DLedger) groups: status, leadership transfer.
    #[command(subcommand)]
    Ledger(LedgerCommand),
    /// Subscription groups: create or update, delete, list.
    #[command(subcommand)]
    Group(GroupCommand),
    /// A broker's settings: all of them, or change the live ones.
    #[command(subcommand)]
    BrokerConfig(BrokerConfigCommand),
    /// ConsumeQueue units of one queue from a queue offset: where each
    /// message is in the CommitLog, its size and tag hash.
    ConsumeQueue {
        #[arg(short, long)]
        topic: String,
        /// The broker group holding the queue.
        #[arg(short = 'b', long)]
        broker_name: String,
        #[arg(short, long)]
        queue: i32,
        /// The first queue offset.
        #[arg(short, long)]
        index: i64,
        #[arg(long, default_value_t = 10)]
        count: i32,
        /// Show this consumer group's subscription of the topic.
        #[arg(short, long)]
        group: Option<String>,
    },
    /// Copy a consumer group's committed offsets on a topic to another group.
    CloneOffset {
        #[arg(long)]
        src: String,
        #[arg(long)]
        dest: String,
        #[arg(short, long)]
        topic: String,
        /// Copy even topics the online source group does not subscribe to.
        #[arg(long)]
        offline: bool,
    },
    /// The NameServers' KV config (ORDER_TOPIC_CONFIG and others).
    #[command(subcommand)]
    Kv(KvCommand),
    /// ACL 2.0 users: create, update, delete, get, list (mqadmin's
    /// createUser … listUser).
    #[command(subcommand)]
    User(crate::admin_auth::UserCommand),
    /// ACL 2.0 ACLs: create, update, delete, get, list (mqadmin's
    /// createAcl … listAcl).
    #[command(subcommand)]
    Acl(crate::admin_auth::AclCommand),
}

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Each ledger-mode broker group of a cluster: every member's role,
    /// term, leader, indexes, and (from the leader) its match index and lag.
    Status {
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
        /// This broker group only.
        #[arg(short = 'b', long)]
        broker_name: Option<String>,
    },
    /// Hand a group's leadership to another member (DLedger's leadership
    /// transfer): the leader stops taking sends, brings the member up to
    /// date and tells it to elect itself.
    Transfer {
        /// Member id (`dLegerSelfId`) that should lead, e.g. n1.
        #[arg(long)]
        to: String,
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
        /// The broker group (needed when the cluster has several).
        #[arg(short = 'b', long)]
        broker_name: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Create or update a subscription group on every master of a cluster
    /// (or one broker).
    Create {
        #[arg(short, long)]
        group: String,
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
        #[arg(short, long)]
        broker: Option<String>,
        #[arg(long, default_value_t = 1)]
        retry_queue_nums: i32,
        #[arg(long, default_value_t = 16)]
        retry_max_times: i32,
        /// The group may not consume.
        #[arg(long)]
        consume_disable: bool,
        /// Refuse broadcasting consumers.
        #[arg(long)]
        no_broadcast: bool,
        /// Consume in order (`consumeMessageOrderly`, mqadmin's `-o`): a
        /// FIFO group for gRPC and POP consumers.
        #[arg(long)]
        orderly: bool,
    },
    /// Delete a subscription group on every master of a cluster (or one broker).
    Delete {
        #[arg(short, long)]
        group: String,
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
        #[arg(short, long)]
        broker: Option<String>,
    },
    /// The subscription groups of every master of a cluster (or one broker).
    List {
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
        #[arg(short, long)]
        broker: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum BrokerConfigCommand {
    /// Every setting of one broker, as it runs now.
    Get {
        /// Broker address (ip:port).
        #[arg(short, long)]
        broker: String,
    },
    /// Change live settings (KEY=VALUE ...) on one broker or every broker
    /// of a cluster; settings fixed at start are refused.
    Set {
        #[arg(short, long, required_unless_present = "cluster")]
        broker: Option<String>,
        #[arg(short, long, conflicts_with = "broker")]
        cluster: Option<String>,
        #[arg(required = true, value_name = "KEY=VALUE")]
        settings: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum KvCommand {
    Get {
        #[arg(short, long)]
        namespace: String,
        #[arg(short, long)]
        key: String,
    },
    /// Set a value at every NameServer.
    Put {
        #[arg(short, long)]
        namespace: String,
        #[arg(short, long)]
        key: String,
        #[arg(long)]
        value: String,
    },
    /// Remove a key at every NameServer.
    Delete {
        #[arg(short, long)]
        namespace: String,
        #[arg(short, long)]
        key: String,
    },
    /// Every key of a namespace.
    List {
        #[arg(short, long)]
        namespace: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create or update a topic on every master of a cluster (or one broker).
    Create {
        #[arg(short, long)]
        topic: String,
        #[arg(short, long, default_value_t = 8)]
        queues: i32,
        #[arg(long, default_value_t = 6)]
        perm: i32,
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
        /// Create on this broker address only.
        #[arg(short, long)]
        broker: Option<String>,
    },
    List,
    Delete {
        #[arg(short, long)]
        topic: String,
        #[arg(short, long, default_value = "DefaultCluster")]
        cluster: String,
    },
    Route {
        #[arg(short, long)]
        topic: String,
    },
    /// Min and max offset of every queue.
    Stats {
        #[arg(short, long)]
        topic: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum MessageCommand {
    /// Messages of a topic with a key (KEYS) or unique key.
    Key {
        #[arg(short, long)]
        topic: String,
        #[arg(short, long)]
        key: String,
    },
    /// A message by its offset msgId.
    Id { id: String },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Send as fast as the window allows; report TPS and send latency.
    Produce(BenchProduceArgs),
    /// Consume a topic; report TPS and born-to-consumed latency.
    Consume(BenchConsumeArgs),
    /// Send timer messages due over a window; report delivery lateness.
    Timers(BenchTimersArgs),
}

/// `basalt bench timers` (crates/basalt/src/bench_timers.rs).
#[derive(Debug, Args)]
pub struct BenchTimersArgs {
    #[arg(long, default_value = "127.0.0.1:9876", env = "NAMESRV_ADDR")]
    pub namesrv: String,
    #[arg(short, long, default_value = "BenchTimers")]
    pub topic: String,
    /// Producer and consumer group.
    #[arg(short, long, default_value = "basalt-bench-timers")]
    pub group: String,
    /// Timer messages to send.
    #[arg(short = 'n', long, default_value_t = 1_000_000)]
    pub count: u64,
    /// Seconds from the start until the first timer is due.
    #[arg(long, default_value_t = 60)]
    pub start_secs: u64,
    /// Seconds over which the timers are due, evenly.
    #[arg(long, default_value_t = 600)]
    pub spread_secs: u64,
    /// Seconds to wait after the last is due before giving up.
    #[arg(long, default_value_t = 60)]
    pub grace_secs: u64,
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Sends in flight per task.
    #[arg(short, long, default_value_t = 64)]
    pub window: usize,
    /// Body size in bytes.
    #[arg(short, long, default_value_t = 64)]
    pub size: usize,
}

#[derive(Debug, Args)]
pub struct BenchProduceArgs {
    #[arg(long, default_value = "127.0.0.1:9876", env = "NAMESRV_ADDR")]
    pub namesrv: String,
    #[arg(short, long, default_value = "BenchmarkTest")]
    pub topic: String,
    #[arg(long, default_value = "basalt-bench-producer")]
    pub group: String,
    /// Concurrent sending tasks.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Sends in flight per task (1 = wait for each ack).
    #[arg(short, long, default_value_t = 64)]
    pub window: usize,
    /// Body size in bytes.
    #[arg(short, long, default_value_t = 1024)]
    pub size: usize,
    /// Seconds to run.
    #[arg(short, long, default_value_t = 10)]
    pub duration: u64,
    /// Messages per send (SEND_BATCH_MESSAGE when > 1).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    #[arg(long)]
    pub tags: Option<String>,
    /// No line per second; one JSON summary at the end.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchConsumeArgs {
    #[arg(long, default_value = "127.0.0.1:9876", env = "NAMESRV_ADDR")]
    pub namesrv: String,
    #[arg(short, long, default_value = "BenchmarkTest")]
    pub topic: String,
    #[arg(short, long, default_value = "basalt-bench-consumer")]
    pub group: String,
    #[arg(long)]
    pub tags: Option<String>,
    /// Start a new group at the first offset (default: the last).
    #[arg(long)]
    pub from_first: bool,
    /// Seconds to run at most.
    #[arg(short, long, default_value_t = 10)]
    pub duration: u64,
    /// Stop after this many messages (0: run for the duration).
    #[arg(short = 'n', long, default_value_t = 0)]
    pub count: u64,
    /// Consume on the tokio runtime (`register_async_listener`) instead of
    /// handing each batch to a blocking thread (`register_listener`, as
    /// Java's consume thread pool does).
    #[arg(long)]
    pub async_listener: bool,
    /// No line per second; one JSON summary at the end.
    #[arg(long)]
    pub json: bool,
}

/// Settings given as `key=value` on the command line override the file;
/// how unknown keys are treated; printing the result instead of starting.
#[derive(Debug, Clone, Args)]
pub struct Overrides {
    /// A broker.conf setting, e.g. --set flushDiskType=SYNC_FLUSH (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Refuse to start over an unknown key in the file or --set (by
    /// default it is reported with the closest known key and ignored, as
    /// RocketMQ ignores it).
    #[arg(long)]
    pub strict: bool,
    /// Print every setting, its value and where it came from (default,
    /// file, flag, --set), then exit without starting.
    #[arg(long)]
    pub print_config: bool,
}

/// `basalt standalone`. Every flag left out keeps the value of the
/// `-c` file, or the standalone default when the file does not give it.
#[derive(Debug, Args)]
pub struct StandaloneArgs {
    /// Store root directory (storePathRootDir) [default: ./basalt-data].
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// NameServer port [default: 9876].
    #[arg(long)]
    pub namesrv_port: Option<u16>,
    /// Broker port (listenPort) [default: 10911].
    #[arg(long)]
    pub port: Option<u16>,
    /// Address to listen on (listenAddr) [default: 0.0.0.0].
    #[arg(long)]
    pub listen: Option<std::net::IpAddr>,
    /// Address clients are told to use for the broker (brokerIP1 and
    /// brokerIP2) [default: 127.0.0.1].
    #[arg(long)]
    pub advertise: Option<std::net::IpAddr>,
    /// A broker.conf file, applied before the flags and --set.
    #[arg(short = 'c', long)]
    pub config: Option<PathBuf>,
    /// Routes carry each topic's ORDER_TOPIC_CONFIG value as
    /// orderTopicConf (the NameServer's orderMessageEnable).
    #[arg(long)]
    pub order_message_enable: bool,
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
    /// Connections open at once; more are closed as soon as they are accepted.
    #[arg(long, default_value_t = basalt_remoting::transport::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// The KV config file (default ~/namesrv/kvConfig.json).
    #[arg(long)]
    pub kv_config: Option<PathBuf>,
    /// Routes carry each topic's ORDER_TOPIC_CONFIG value as orderTopicConf.
    #[arg(long)]
    pub order_message_enable: bool,
    /// A namesrv.conf (.properties): its `tls.*` settings (docs/tls.md)
    /// and auth settings (`authenticationEnabled`, `initAuthenticationUser`,
    /// `innerClientAuthenticationCredentials`, docs/auth.md) are applied;
    /// other keys are left to the flags.
    #[arg(short = 'c', long)]
    pub config: Option<PathBuf>,
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
        /// Store root directory (holding commitlog/, or dledger-*/ in ledger mode).
        dir: PathBuf,
        /// CommitLog file size, if not the size of the files found.
        #[arg(long)]
        file_size: Option<usize>,
    },
    /// List records: offset, topic, queue, queue offset, tags, keys, body size.
    Dump {
        dir: PathBuf,
        /// First physical offset to list (in ledger mode, an entry's body position).
        #[arg(long)]
        from: Option<i64>,
        /// At most this many records.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long)]
        file_size: Option<usize>,
    },
    /// Cut a stopped store's CommitLog at OFFSET (keeping everything below
    /// it) and the ConsumeQueue units pointing past it, for a store refused
    /// for damage in the middle. Prints what it removes; changes nothing
    /// without --yes. See docs/repair.md.
    Repair {
        /// Store root directory (holding commitlog/).
        dir: PathBuf,
        /// The global CommitLog offset to cut at: the end of a valid record
        /// (the offset `basalt store check` reports as first bad).
        #[arg(long)]
        truncate_at: i64,
        /// Do it (without: a dry run that only prints the plan).
        #[arg(long)]
        yes: bool,
    },
    /// Make a cleanly stopped store readable by Apache RocketMQ 5 (to roll
    /// back to the Java broker): copies SRC to DEST (or rewrites SRC with
    /// --in-place), blanks the CRC trailers, writes RocketMQ's checkpoint,
    /// folds the topic journal, drops the timer files. See
    /// docs/storage-format.md#migrating-to-and-from-rocketmq.
    #[command(name = "export-rocketmq")]
    ExportRocketmq {
        /// Store root directory of the stopped Basalt broker.
        src: PathBuf,
        /// A new (or empty) directory for the exported store.
        #[arg(required_unless_present = "in_place", conflicts_with = "in_place")]
        dest: Option<PathBuf>,
        /// Rewrite SRC itself instead of a copy.
        #[arg(long)]
        in_place: bool,
    },
}

impl Cli {
    pub fn run(self) -> Result<ExitCode, String> {
        if let Some(ca) = &self.tls_ca {
            let tls = basalt_remoting::ClientTls::with_ca_file(ca)
                .map_err(|e| format!("--tls-ca: {e}"))?;
            basalt_client::config::set_default_tls(tls);
        } else if self.tls {
            basalt_client::config::set_default_tls(basalt_remoting::ClientTls::insecure());
        }
        if let (Some(access_key), Some(secret_key)) = (&self.access_key, &self.secret_key) {
            basalt_client::config::set_default_credentials(basalt_client::config::Credentials {
                access_key: access_key.clone(),
                secret_key: secret_key.clone(),
            });
        }
        match self.command {
            Command::Standalone(a) => crate::serve::standalone(a),
            Command::Namesrv(a) => crate::serve::namesrv(a),
            Command::Broker(a) => crate::serve::broker(a),
            Command::Store(s) => crate::store_tools::run(s),
            Command::Produce(a) => crate::client_tools::produce(a),
            Command::Consume(a) => crate::client_tools::consume(a),
            Command::Admin(a) => crate::admin_cli::admin(a.command, a.namesrv, a.json),
            Command::Bench(b) => crate::bench::run(b),
        }
    }
}
