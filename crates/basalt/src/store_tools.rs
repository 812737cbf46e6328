//! `basalt store check` and `basalt store dump`, over a store root in either
//! mode (see [`basalt_broker::store_check`]), and `basalt store repair`
//! (classic stores only, see [`basalt_store::repair`]), and `basalt store
//! export-rocketmq` (see [`basalt_broker::store_export`]).

use std::path::Path;
use std::process::ExitCode;

use basalt_broker::store_check::{check_store_root, dump_store_root};
use basalt_broker::store_export::export_rocketmq;
use basalt_store::repair::StoreRepair;

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
        StoreCommand::Repair {
            dir,
            truncate_at,
            yes,
        } => repair(&dir, truncate_at, yes),
        StoreCommand::ExportRocketmq { src, dest, .. } => {
            let report = export_rocketmq(&src, dest.as_deref())?;
            println!("{report}");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Prints the plan; with `yes` carries it out and checks the result.
fn repair(dir: &Path, truncate_at: i64, yes: bool) -> Result<ExitCode, String> {
    let repair = StoreRepair::open(dir).map_err(|e| e.to_string())?;
    let plan = repair.plan(truncate_at).map_err(|e| e.to_string())?;
    println!("{plan}");
    if plan.is_empty() {
        println!("nothing to remove");
        return Ok(ExitCode::SUCCESS);
    }
    if !yes {
        println!("dry run: nothing changed; run again with --yes to remove the above");
        return Ok(ExitCode::SUCCESS);
    }
    repair.apply(&plan).map_err(|e| e.to_string())?;
    // Let go of the lock before checking (the check takes none).
    drop(repair);
    println!("repaired; checking the store:");
    let report = check_store_root(dir, None)?;
    println!("{report}");
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}
