//! One simulated run: a real `MessageStore` on a `SimDisk`, driven by a
//! seeded RNG, with the model of what it acknowledged and the checks made
//! after every restart. See docs/fault-model.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use basalt_common::config::FlushDiskType;
use basalt_disk::{Disk, FaultDraws, SimDisk, SimFaults, SimHandle};
use basalt_store::{MessageStore, PutMessageStatus, StoreConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::{Msg, body};

/// Where the store lives on the simulated disk.
pub const ROOT: &str = "/sim/store";
const TOPICS: [&str; 2] = ["SimA", "SimB"];

/// How a run went wrong: the invariant and what was seen.
pub type Violation = String;

/// A record the store accepted into its log (acknowledged or not).
#[derive(Debug, Clone)]
struct Rec {
    end: i64,
    topic: String,
    queue_id: i32,
    body: Vec<u8>,
}

/// What a run may vary.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Steps between the start and the end of the run.
    pub steps: usize,
    /// Test switch: syncs of CommitLog files make nothing durable.
    pub skip_commit_log_sync: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            steps: 40,
            skip_commit_log_sync: false,
        }
    }
}

struct World {
    seed: u64,
    rng: StdRng,
    disk: Arc<SimDisk>,
    flush: FlushDiskType,
    faults: SimFaults,
    store: Option<Arc<MessageStore>>,
    /// Records by CommitLog offset.
    log: BTreeMap<i64, Rec>,
    /// Every record ending at or below this must survive any crash.
    required_end: i64,
    /// The log's first offset after the last successful cleanup.
    cleaned_below: i64,
    /// A bit of durable data was flipped: the next open must refuse.
    flipped: Option<(PathBuf, usize)>,
    next_body: usize,
    /// The steps taken, for the failure message.
    trace: Vec<&'static str>,
}

pub fn config(flush: FlushDiskType, disk: SimHandle) -> StoreConfig {
    let hour = Duration::from_secs(3600);
    StoreConfig {
        disk: Disk::Sim(disk),
        flush_disk_type: flush,
        commit_log_file_size: 8192,
        consume_queue_units_per_file: 16,
        max_message_size: 2048,
        max_hash_slot_num: 32,
        max_index_num: 256,
        // Every flush, cleanup and checkpoint is driven by the simulator so
        // that a seed replays: the services' own timers never fire.
        flush_interval_commit_log: hour,
        flush_commit_log_least_pages: 1 << 20,
        flush_commit_log_thorough_interval: hour,
        flush_interval_consume_queue: hour,
        flush_consume_queue_thorough_interval: hour,
        clean_resource_interval: hour,
        disk_check_interval: hour,
        delete_commit_log_files_interval: Duration::ZERO,
        sync_flush_timeout: Duration::from_secs(10),
        ..StoreConfig::for_tests(ROOT)
    }
}

/// Runs seed `seed`; `Err` names the first invariant broken.
pub fn run(seed: u64, opts: RunOptions) -> Result<(), Violation> {
    let mut rng = StdRng::seed_from_u64(seed);
    let flush = if rng.random_bool(0.5) {
        FlushDiskType::SyncFlush
    } else {
        FlushDiskType::AsyncFlush
    };
    let faults = SimFaults {
        fsync_fail_one_in: [0, 0, 40, 150][rng.random_range(0..4)],
        no_space_one_in: [0, 0, 60][rng.random_range(0..3)],
        // A full disk under the ConsumeQueues makes dispatch retry after a
        // second of wall time; the CommitLog is where a
        // full disk decides what is acknowledged.
        no_space_in: "/sim/store/commitlog/",
        read_flip_one_in: 0,
    };
    let disk = SimDisk::new(seed);
    // The store's own threads (group commit, dispatch) sync at the same
    // time during a put: failed syncs decided per file replay whatever
    // their interleaving, one shared RNG stream did not (issue 12).
    disk.set_fault_draws(FaultDraws::PerFile);
    if opts.skip_commit_log_sync {
        disk.skip_syncs_of("/commitlog/");
    }
    let mut w = World {
        seed,
        rng,
        disk,
        flush,
        faults,
        store: None,
        log: BTreeMap::new(),
        required_end: 0,
        cleaned_below: 0,
        flipped: None,
        next_body: 0,
        trace: Vec::new(),
    };
    let result = w.steps(opts.steps);
    result.map_err(|v| {
        format!(
            "{v}\n  {:?}, faults {:?}\n  steps: {}",
            w.flush,
            w.faults,
            w.trace.join(" ")
        )
    })
}

impl World {
    fn steps(&mut self, steps: usize) -> Result<(), Violation> {
        if !self.restart()? {
            return Ok(());
        }
        for step in 0..steps {
            // Store time moves with the steps, not with the wall clock.
            self.disk.advance_clock(step_millis(self.seed, step));
            let roll = self.rng.random_range(0..100);
            let started = std::time::Instant::now();
            let (name, go_on) = match roll {
                0..=59 => ("put", self.put().map(|_| true)),
                60..=67 => ("flush", self.flush_commit_log().map(|_| true)),
                68..=74 => ("cq-flush", self.flush_queues().map(|_| true)),
                75..=77 => ("clean", self.clean().map(|_| true)),
                78..=92 => ("power-loss", self.power_loss()),
                _ => ("restart", self.clean_restart()),
            };
            self.trace.push(name);
            if std::env::var("BASALT_SIM_SLOW").is_ok() && started.elapsed().as_millis() > 50 {
                eprintln!("slow step {name}: {:?}", started.elapsed());
            }
            if std::env::var("BASALT_SIM_DEBUG").is_ok()
                && let Some(st) = &self.store
            {
                let cl = st.commit_log();
                let stats = self.disk.stats();
                eprintln!(
                    "{name}: max {} flushed {} durable {:?} poisoned {} syncs {} failed {}",
                    cl.max_offset(),
                    cl.flushed_offset(),
                    st.checkpoint().commit_log_durable_offset(),
                    st.health().is_poisoned(),
                    stats.syncs,
                    stats.failed_syncs
                );
            }
            if !go_on? {
                return Ok(());
            }
        }
        self.trace.push("power-loss");
        self.power_loss().map(|_| ())
    }
}

/// How far the simulated clock moves before step `step` of seed `seed`:
/// 1 to 400 ms, from a hash, so that the simulator's RNG stream (and what
/// every seed does) is not changed by it. Over a run that is several times
/// recovery's 3 s margin, so scans start from later files too.
fn step_millis(seed: u64, step: usize) -> i64 {
    let mut z = seed ^ (step as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    1 + ((z ^ (z >> 31)) % 400) as i64
}

impl World {
    fn store(&self) -> &Arc<MessageStore> {
        self.store.as_ref().expect("store open")
    }

    fn put(&mut self) -> Result<(), Violation> {
        let store = Arc::clone(self.store());
        let topic = TOPICS[self.rng.random_range(0..TOPICS.len())];
        let queue_id = self.rng.random_range(0..2);
        let len = self.rng.random_range(20..1200);
        let msg = Msg::new(topic, queue_id, body(self.next_body, len));
        self.next_body += 1;
        let poisoned_before = store.health().is_poisoned();
        let mut r = store.put_message(&msg.draft(store.store_host()));
        if self.flush == FlushDiskType::SyncFlush {
            store.wait_durable_blocking(&mut r, true);
        }
        let acked = r.status == PutMessageStatus::PutOk;
        if acked && poisoned_before {
            return Err("a put was acknowledged after a failed fsync poisoned the store".into());
        }
        if let Some(a) = &r.append {
            self.log.insert(
                a.wrote_offset,
                Rec {
                    end: a.end_offset(),
                    topic: msg.topic.clone(),
                    queue_id,
                    body: msg.body.clone(),
                },
            );
            if acked && self.flush == FlushDiskType::SyncFlush {
                self.required_end = self.required_end.max(a.end_offset());
            }
        }
        // Dispatch runs on the store's thread; the next step starts only
        // when it is idle, so runs do not depend on thread timing.
        let target = store.commit_log().max_offset();
        if r.append.is_some()
            && !store.wait_dispatched(target, Duration::from_secs(10))
            && std::env::var("BASALT_SIM_SLOW").is_ok()
        {
            eprintln!(
                "dispatch did not reach {target}: at {:?}, poisoned {}, put {:?}",
                store.dispatch_service().map(|d| d.dispatched()),
                store.health().is_poisoned(),
                r.status
            );
        }
        Ok(())
    }

    fn flush_commit_log(&mut self) -> Result<(), Violation> {
        let store = Arc::clone(self.store());
        let poisoned_before = store.health().is_poisoned();
        match store.flush_commit_log() {
            Ok(()) if poisoned_before => {}
            Ok(()) => {
                let flushed = store.commit_log().flushed_offset();
                self.required_end = self.required_end.max(flushed);
            }
            Err(_) if store.health().is_poisoned() => {}
            Err(e) => {
                return Err(format!(
                    "a failed CommitLog flush did not poison the store: {e}"
                ));
            }
        }
        Ok(())
    }

    fn flush_queues(&mut self) -> Result<(), Violation> {
        let _ = self.store().flush_queues_and_checkpoint();
        Ok(())
    }

    fn clean(&mut self) -> Result<(), Violation> {
        let store = Arc::clone(self.store());
        if store.health().is_poisoned() {
            return Ok(());
        }
        // Files cleanup took out of the log may be gone even when it then
        // failed (a directory fsync, say): deleted data is not owed.
        let _ = store.clean_now(true);
        self.cleaned_below = self.cleaned_below.max(store.commit_log().min_offset());
        Ok(())
    }

    /// Clean shutdown and reopen on the same disk.
    fn clean_restart(&mut self) -> Result<bool, Violation> {
        if let Some(store) = self.store.take() {
            store.shutdown();
            if std::env::var("BASALT_SIM_DEBUG").is_ok() {
                eprintln!("shut down: syncs {}", self.disk.stats().syncs);
            }
            if !store.health().is_poisoned() {
                // A clean shutdown flushed everything it had accepted.
                let end = self.log.values().map(|r| r.end).max().unwrap_or(0);
                self.required_end = self.required_end.max(end);
            }
        }
        self.restart()
    }

    /// Power loss at this step, then a restart.
    fn power_loss(&mut self) -> Result<bool, Violation> {
        if let Some(store) = self.store.take() {
            if self.flush == FlushDiskType::AsyncFlush && !store.health().is_poisoned() {
                self.required_end = self.required_end.max(store.commit_log().flushed_offset());
            }
            if std::env::var("BASALT_SIM_DEBUG").is_ok() {
                eprintln!(
                    "power loss; unsynced names {:?}",
                    self.disk.unsynced_names()
                );
            }
            let _fresh = self.disk.power_loss();
            // The dead process's last acts (its shutdown) all fail.
            store.shutdown();
        }
        if self.rng.random_range(0..8) == 0 {
            self.flip_durable_bit();
            if self.flipped.is_some() {
                self.trace.push("flip");
            }
        }
        self.restart()
    }

    /// Latent corruption of a record the checkpoint on the device counts as
    /// durable, in the newest CommitLog file.
    fn flip_durable_bit(&mut self) {
        let ck = Path::new(ROOT).join("checkpoint");
        let Some(raw) = self.disk.durable_contents(&ck) else {
            return;
        };
        let Ok(image) = basalt_store::checkpoint::decode(&raw) else {
            return;
        };
        let Some(durable) = image.commit_log_durable_offset else {
            return;
        };
        let file_size = 8192i64;
        let newest = (durable - 1).max(0) / file_size * file_size;
        let candidates: Vec<(i64, i64)> = self
            .log
            .range(newest.max(self.cleaned_below)..)
            .filter(|(_, r)| r.end <= durable)
            .map(|(p, r)| (*p, r.end))
            .collect();
        if candidates.is_empty() {
            return;
        }
        let (phys, end) = candidates[self.rng.random_range(0..candidates.len())];
        // Anywhere in the record, the key of its `__CRC32#` trailer
        // included: the checkpoint's CRC-trailer rule says the trailer was
        // written, so a record that lost it is damage.
        let at = self.rng.random_range(phys..end);
        let path = Path::new(ROOT)
            .join("commitlog")
            .join(format!("{newest:020}"));
        let bit = self.rng.random_range(0..8);
        if self.disk.corrupt(&path, (at - newest) as usize, bit) {
            if std::env::var("BASALT_SIM_DEBUG").is_ok() {
                let raw = self.disk.durable_contents(&path).unwrap_or_default();
                let rec = &raw[(phys - newest) as usize..(end - newest) as usize];
                eprintln!(
                    "flip {phys}..{end} at {at} bit {bit}: parse {:?}\n{:?}",
                    basalt_common::record::RecordView::parse(rec, true).map(|_| ()),
                    String::from_utf8_lossy(rec)
                );
                eprintln!(
                    "tail {:?} trailer {}",
                    &rec[rec.len().saturating_sub(40)..],
                    basalt_common::record::has_crc_trailer(rec)
                );
            }
            self.flipped = Some((path, (at - newest) as usize));
        }
    }

    /// Opens the store; `Ok(false)` when it was rightly refused (the run
    /// ends), `Err` when the refusal or what it recovered is wrong.
    fn restart(&mut self) -> Result<bool, Violation> {
        // Opening is not where the faults are aimed: recovery's own fsyncs
        // failing would only make the open fail.
        self.disk.set_faults(SimFaults::default());
        let opened = MessageStore::open(config(self.flush, self.disk.handle()));
        self.disk.set_faults(self.faults);
        let store = match opened {
            Ok(s) => s,
            Err(e) => return self.judge_refusal(&e.to_string()),
        };
        if std::env::var("BASALT_SIM_DEBUG").is_ok() {
            eprintln!(
                "opened: {:?}; flipped {:?}",
                store.recovery_report(),
                self.flipped
            );
        }
        if let Some((path, at)) = self.flipped.take() {
            // The flip may have hit a byte recovery need not read (the CRC
            // is over the whole record, so no: every byte is covered).
            return Err(format!(
                "recovery accepted a flipped bit in durable data at {} offset {at}",
                path.display()
            ));
        }
        self.store = Some(store);
        self.check_after_restart()?;
        Ok(true)
    }

    fn judge_refusal(&mut self, err: &str) -> Result<bool, Violation> {
        match self.flipped.take() {
            Some((path, _)) => {
                let named = err.contains(&path.display().to_string()) && err.contains("offset");
                if named {
                    Ok(false)
                } else {
                    Err(format!(
                        "refusal does not name {} and an offset: {err}",
                        path.display()
                    ))
                }
            }
            None => Err(format!(
                "recovery refused a store whose damage lies only past the durable point: {err}"
            )),
        }
    }
}

mod checks;
