//! The TimerLog under power loss: the real `TimerLog` and `TimerCheckpoint`
//! on a `SimDisk`, driven as the broker's enqueue task drives them. Entries
//! are appended, the log is flushed and the checkpoint written after each
//! flush that succeeded (the broker's order); at a power loss every unsynced
//! sector is lost, kept or torn. After each restart every entry below the
//! checkpoint's position must be there, intact; the tail past it is cut, as
//! timer recovery does.

use std::path::Path;

use basalt_disk::{Disk, SimDisk, SimFaults};
use basalt_store::timer::{ENTRY_SIZE, TimerCheckpoint, TimerEntry, TimerLog, TimerLogScanStop};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::world::Violation;

const DIR: &str = "/sim/timer/timerlog";
const CHECKPOINT: &str = "/sim/timer/config/timercheck";
/// Eight entries a segment: rolls happen within a few dozen appends.
const SEGMENT: usize = ENTRY_SIZE * 8;

fn entry(q: i64) -> TimerEntry {
    TimerEntry {
        slot_ms: 1_700_000_000_000 + q * 1000,
        phys: q * 300,
        size: 300,
        queue_offset: q,
        prev: q - 1,
    }
}

fn open(disk: &std::sync::Arc<SimDisk>) -> Result<TimerLog, Violation> {
    let log = TimerLog::new(DIR.into(), SEGMENT).with_disk(Disk::Sim(disk.handle()));
    log.load()
        .map_err(|e| format!("TimerLog refused after a power loss: {e}"))?;
    Ok(log)
}

/// Runs one seed of the TimerLog simulation; `Err` names the violation.
/// `skip_log_sync` is the test switch that makes TimerLog syncs do nothing.
pub fn run_timer(seed: u64, skip_log_sync: bool) -> Result<(), Violation> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7173_5e11);
    let disk = SimDisk::new(seed);
    if skip_log_sync {
        disk.skip_syncs_of("/timerlog/");
    }
    let faults = SimFaults {
        fsync_fail_one_in: [0, 0, 25][rng.random_range(0..3)],
        ..SimFaults::default()
    };
    // Entries are numbered by queue offset; entry q sits at q × 48.
    for _round in 0..6 {
        disk.set_faults(SimFaults::default());
        let log = open(&disk)?;
        let ck = TimerCheckpoint::load_on(&Disk::Sim(disk.handle()), Path::new(CHECKPOINT))
            .map_err(|e| format!("timer checkpoint unreadable after a power loss: {e}"))?;
        let durable = ck.map_or(0, |c| c.log_end);
        check_prefix(&log, durable)?;
        log.truncate(durable)
            .map_err(|e| format!("cut of the TimerLog at {durable} failed: {e}"))?;
        let mut next_q = durable / ENTRY_SIZE as i64;
        disk.set_faults(faults);
        drive(&mut rng, &disk, &log, &mut next_q);
        let _ = disk.power_loss();
        log.shutdown();
    }
    Ok(())
}

/// Every entry below `durable` is there and is the one written.
fn check_prefix(log: &TimerLog, durable: i64) -> Result<(), Violation> {
    if log.end() < durable {
        return Err(format!(
            "TimerLog ends at {} below its checkpoint {durable}",
            log.end()
        ));
    }
    let mut bad = None;
    let stop = log.scan(0, durable, |pos, e| {
        if bad.is_none() && *e != entry(pos / ENTRY_SIZE as i64) {
            bad = Some(format!(
                "entry at {pos} differs from what was written: {e:?}"
            ));
        }
    });
    if let Some(b) = bad {
        return Err(b);
    }
    match stop {
        TimerLogScanStop::Limit => Ok(()),
        other => Err(format!(
            "entries below the checkpoint {durable} are missing or damaged: {other:?}"
        )),
    }
}

/// Appends and flushes until a flush fails (the broker stops there) or the
/// steps run out. A flush that succeeded is followed by the checkpoint.
fn drive(rng: &mut StdRng, disk: &std::sync::Arc<SimDisk>, log: &TimerLog, next_q: &mut i64) {
    for _ in 0..rng.random_range(1..40) {
        if rng.random_range(0..4) == 0 {
            let Ok(end) = log.flush() else { return };
            let ck = TimerCheckpoint {
                log_end: end,
                enqueue_next: end / ENTRY_SIZE as i64,
                read_ms: 0,
            };
            if ck
                .save_on(&Disk::Sim(disk.handle()), Path::new(CHECKPOINT))
                .is_err()
            {
                return;
            }
        } else {
            if log.room().is_err() {
                return;
            }
            match log.append(&entry(*next_q)) {
                Ok(pos) => debug_assert_eq!(pos, *next_q * ENTRY_SIZE as i64),
                Err(_) => return,
            }
            *next_q += 1;
        }
    }
}
