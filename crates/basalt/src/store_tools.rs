//! `basalt store check` and `basalt store dump`, over a store root in either
//! mode (see [`basalt_broker::store_check`]).

use std::process::ExitCode;

use basalt_broker::store_check::{check_store_root, dump_store_root};

use crate::cli::StoreCommand;

pub fn run(cmd: StoreCommand) -> Result<ExitCode, String> {
    match cmd {
        StoreCommand::Check { dir, file_size } => {
            let report = check_store_root(&dir, file_size)?;
            println!("{report}");
            Ok(if report.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
        StoreCommand::Dump {
            dir,
            from,
            limit,
            file_size,
        } => {
            println!(
                "{:>14} {:>7} {:<24} {:<4} {:<11} {:<17} {:<25} body",
                "offset", "size", "topic", "q", "queue-off", "tags", "keys"
            );
            let n = dump_store_root(&dir, file_size, from, limit, |l| println!("{l}"))?;
            println!("{n} records");
            Ok(ExitCode::SUCCESS)
        }
    }
}
