//! `basalt store check` and `basalt store dump`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::StoreCommand;

/// Ledger directories (`dledger-*`) of a store root.
fn ledger_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.is_dir()
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("dledger-"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

pub fn run(cmd: StoreCommand) -> Result<ExitCode, String> {
    match cmd {
        StoreCommand::Check { dir, file_size } => {
            let ledgers = ledger_dirs(&dir);
            if !dir.join("commitlog").is_dir() && ledgers.is_empty() {
                return Err(format!(
                    "{} has neither a commitlog/ nor a dledger-*/ directory",
                    dir.display()
                ));
            }
            let mut ok = true;
            if dir.join("commitlog").is_dir() {
                let report =
                    basalt_store::check::check_store(&dir, file_size).map_err(|e| e.to_string())?;
                println!("{report}");
                ok &= report.is_ok();
            }
            for l in ledgers {
                println!();
                println!("ledger      {}", l.display());
                let report = basalt_ledger::check_ledger_dir(&l).map_err(|e| e.to_string())?;
                println!("{report}");
                ok &= report.is_ok();
            }
            Ok(if ok {
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
