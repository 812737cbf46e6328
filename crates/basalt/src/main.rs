//! `basalt`: one binary for the whole broker.
//!
//! * `basalt standalone` — NameServer and broker in one process;
//! * `basalt namesrv` / `basalt broker -c FILE` — the two roles apart;
//! * `basalt store check|dump DIR` — offline tools for a store directory.

mod admin_auth;
mod admin_cli;
mod admin_ops;
mod admin_output;
mod admin_verbs;
mod allocator;
mod bench;
mod bench_timers;
mod cli;
mod client_tools;
mod fd_limit;
mod histogram;
mod ledger_admin;
mod page_reporting;
mod progress;
mod serve;
mod serve_config;
mod serve_grpc;
mod serve_observe;
mod store_tools;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    // Servers log at info; the client tools only warn unless asked.
    let server = matches!(
        cli.command,
        cli::Command::Standalone(_) | cli::Command::Namesrv(_) | cli::Command::Broker(_)
    );
    init_logging(cli.verbose + u8::from(server));
    match cli.run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("basalt: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };

    let filter = EnvFilter::try_from_env("BASALT_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .compact()
        .init();
}
