//! `basalt store check` and `basalt store dump`.

use std::process::ExitCode;

use crate::cli::StoreCommand;

pub fn run(cmd: StoreCommand) -> Result<ExitCode, String> {
    match cmd {
        StoreCommand::Check { dir, file_size } => {
            if !dir.join("commitlog").is_dir() {
                return Err(format!("{} has no commitlog/ directory", dir.display()));
            }
            let report =
                basalt_store::check::check_store(&dir, file_size).map_err(|e| e.to_string())?;
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
            let n =
                basalt_store::check::dump_store(&dir, file_size, from, limit, |l| println!("{l}"))
                    .map_err(|e| e.to_string())?;
            println!("{n} records");
            Ok(ExitCode::SUCCESS)
        }
    }
}
