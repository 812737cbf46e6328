//! A member over a real [`LedgerStore`] on its own [`SimDisk`]: what the
//! simulator does instead of [`super::MemLog`]'s crash model when
//! [`super::SimOptions::disk`] is set.
//!
//! The member's [`super::MemLog`] stays as the model of what must survive: it
//! mirrors every write, and a crash checks that what the real store recovered
//! from the surviving disk image is one of the outcomes the model allows
//! ([`super::MemLog::crash_to`]).
//!
//! A crash is a power loss of the member's disk (each unsynced sector kept,
//! lost or torn; each unsynced name change kept or lost), or a process kill that
//! keeps the page cache; then real recovery. Sometimes a bit of the surviving
//! image is flipped first:
//!
//! * inside the region the checkpoint says is durable (the checkpoint's last
//!   entry): recovery must refuse, naming the data file and the entry's offset;
//!   the flip is then undone and recovery must succeed;
//! * past the durable end: recovery must not refuse (it cuts the torn tail).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use basalt_disk::{Disk, SimDisk, SimFaults};

use super::MemLog;
use crate::core::{HardState, LogRead};
use crate::entry::{Entry, HEADER_SIZE};
use crate::store::{
    LedgerStore, LedgerStoreError, Recovered, StoreOptions, SyncJob, check_ledger_dir_on, meta,
};

/// Disk faults of a simulation run over real stores.
#[derive(Debug, Clone, Default)]
pub struct DiskOptions {
    /// A sync (of a segment, the checkpoint or the term file) fails with EIO,
    /// one in N (0: never).
    pub fsync_fail_one_in: u32,
    /// One crash in N flips a bit of the surviving image (0: never).
    pub flip_one_in: u32,
    /// One crash in N is a process kill that keeps the page cache (the rest
    /// lose power).
    pub process_kill_one_in: u32,
    /// Test switch: syncs of files whose path contains this make nothing
    /// durable ([`SimDisk::skip_syncs_of`]).
    pub skip_syncs_of: Option<String>,
    /// Test switch: resets leave the old checkpoint in place
    /// ([`LedgerStore::skip_reset_checkpoint`]).
    pub skip_reset_checkpoint: bool,
    pub index_file_size: i64,
}

/// One member's disk and the real store on it. See the module documentation.
pub(super) struct DiskMember {
    sim: Arc<SimDisk>,
    skip_reset_checkpoint: bool,
    opts: StoreOptions,
    pub(super) store: LedgerStore,
    /// What the last recovery reported.
    pub(super) recovered: Recovered,
    /// The sync the core asked for, prepared and not yet run (the core keeps
    /// at most one outstanding).
    pub(super) pending_sync: Option<SyncJob>,
    /// The core's durable index when the store was poisoned, in this life.
    pub(super) poisoned_at: Option<i64>,
}

/// How a crash went: the recovered log and hard state, and what flip was
/// checked.
pub(super) struct CrashOutcome {
    pub(super) entries: Vec<Entry>,
    pub(super) end_pos: i64,
    pub(super) hard_state: HardState,
    pub(super) committed_index: i64,
}

/// Where a crash flips a bit of the surviving image.
#[derive(Debug, Clone, Copy)]
pub(super) enum Flip {
    None,
    /// In the entry the checkpoint claims durable last.
    Durable {
        bit: u8,
        pick: u64,
    },
    /// At or past the model's durable end (`pick` chooses the byte).
    PastDurable {
        bit: u8,
        pick: u64,
    },
}

fn store_err(what: &str, e: LedgerStoreError) -> String {
    format!("{what}: {e}")
}

impl DiskMember {
    /// A fresh disk (its random choices from `seed`) with an empty store.
    pub(super) fn create(
        seed: u64,
        id: &str,
        data_file_size: i64,
        o: &DiskOptions,
    ) -> Result<DiskMember, String> {
        let sim = SimDisk::new(seed);
        if let Some(p) = &o.skip_syncs_of {
            sim.skip_syncs_of(p);
        }
        let opts = StoreOptions {
            dir: PathBuf::from(format!("/{id}")),
            data_file_size,
            index_file_size: o.index_file_size,
        };
        let (mut store, recovered) = LedgerStore::open_on(Disk::Sim(sim.handle()), opts.clone())
            .map_err(|e| store_err("open of a fresh store", e))?;
        if o.skip_reset_checkpoint {
            store.skip_reset_checkpoint();
        }
        sim.set_faults(SimFaults {
            fsync_fail_one_in: o.fsync_fail_one_in,
            ..SimFaults::default()
        });
        Ok(DiskMember {
            sim,
            skip_reset_checkpoint: o.skip_reset_checkpoint,
            opts,
            store,
            recovered,
            pending_sync: None,
            poisoned_at: None,
        })
    }

    fn disk(&self) -> Disk {
        Disk::Sim(self.sim.handle())
    }

    /// Stops the random disk faults (the heal).
    pub(super) fn stop_faults(&self) {
        self.sim.set_faults(SimFaults::default());
    }

    /// Writes the term file, as the runtime's I/O thread does.
    pub(super) fn persist(&self, state: &HardState) -> Result<(), LedgerStoreError> {
        meta::store_hard_state(&self.disk(), &self.opts.dir, state)
    }

    /// Checks the store's end against the model's after a write.
    pub(super) fn check_matches(&self, log: &MemLog) -> Result<(), String> {
        let (s, m) = (&self.store, log);
        if s.end_index() != m.end_index() || s.end_pos() != m.end_pos() {
            return Err(format!(
                "store end {}@{} differs from the model's {}@{}",
                s.end_index(),
                s.end_pos(),
                m.end_index(),
                m.end_pos()
            ));
        }
        Ok(())
    }

    /// Every entry of the store, read back through the store's own reads.
    pub(super) fn entries(&self) -> Result<Vec<Entry>, String> {
        let s = &self.store;
        if s.end_index() < 0 {
            return Ok(Vec::new());
        }
        (s.begin_index()..=s.end_index())
            .map(|i| {
                s.entry(i)
                    .map_err(|e| format!("reading entry {i} back: {e}"))?
                    .ok_or_else(|| format!("entry {i} missing inside the store's bounds"))
            })
            .collect()
    }

    /// A crash (power loss unless `power` is false), an optional flip, and
    /// real recovery. The flips' checks are made here; what recovery kept is
    /// returned for the model's check.
    pub(super) fn crash(
        &mut self,
        power: bool,
        flip: Flip,
        model: &MemLog,
    ) -> Result<CrashOutcome, String> {
        let handle = if power {
            self.sim.power_loss()
        } else {
            self.sim.handle()
        };
        let disk = Disk::Sim(handle);
        match flip {
            Flip::None => {}
            Flip::Durable { bit, pick } => self.check_durable_flip(&disk, bit, pick, model)?,
            Flip::PastDurable { bit, pick } => self.flip_past_durable(bit, pick, model),
        }
        let (mut store, recovered) = self.recover(&disk).map_err(|e| {
            format!(
                "recovery refused a log whose damage lies past its durable end ({}): {e}",
                if power { "power loss" } else { "process kill" }
            )
        })?;
        if self.skip_reset_checkpoint {
            store.skip_reset_checkpoint();
        }
        // The old store (and its mappings of the dead page cache) goes now.
        self.store = store;
        self.pending_sync = None;
        self.poisoned_at = None;
        self.check_agrees_with_recovery(&disk, &recovered)?;
        let entries = self.entries()?;
        let out = CrashOutcome {
            end_pos: self.store.end_pos(),
            hard_state: recovered.hard_state.clone(),
            committed_index: recovered.committed_index,
            entries,
        };
        self.recovered = recovered;
        Ok(out)
    }

    /// The offline checker, run on the recovered directory, sees what recovery
    /// kept: no damage, the same bounds, every index unit right, the same
    /// checkpoint and term file.
    fn check_agrees_with_recovery(&self, disk: &Disk, rec: &Recovered) -> Result<(), String> {
        let r = check_ledger_dir_on(disk, &self.opts.dir)
            .map_err(|e| format!("the checker failed on a recovered directory: {e}"))?;
        let s = &self.store;
        let bounds = (s.begin_index(), s.end_index(), s.end_pos());
        let seen = (r.first_index, r.last_index, r.end_pos);
        let disagree = if let Some(b) = &r.first_bad {
            Some(format!(
                "damage at {:?} offset {}: {}",
                b.path, b.offset, b.reason
            ))
        } else if seen != bounds {
            Some(format!(
                "log {}..={} ending at {} (recovery: {}..={} ending at {})",
                seen.0, seen.1, seen.2, bounds.0, bounds.1, bounds.2
            ))
        } else if r.index_mismatches != 0 {
            Some(format!("{} index units do not match", r.index_mismatches))
        } else if r.checkpoint != rec.checkpoint {
            Some(format!(
                "checkpoint {:?} (recovery read {:?})",
                r.checkpoint, rec.checkpoint
            ))
        } else if r.hard_state.clone().unwrap_or_default() != rec.hard_state {
            Some(format!(
                "term file {:?} (recovery read {:?})",
                r.hard_state, rec.hard_state
            ))
        } else {
            None
        };
        match disagree {
            Some(d) => Err(format!("the checker disagrees with recovery: {d}")),
            None => Ok(()),
        }
    }

    /// Real recovery. A failed sync during it (EIO) fails the open; the
    /// operator starts the member again, and the second try runs without
    /// random faults.
    fn recover(&self, disk: &Disk) -> Result<(LedgerStore, Recovered), LedgerStoreError> {
        match LedgerStore::open_on(disk.clone(), self.opts.clone()) {
            Err(LedgerStoreError::Disk(e)) if !e.is_not_found() => {
                let faults = self.sim.faults();
                self.sim.set_faults(SimFaults::default());
                let r = LedgerStore::open_on(disk.clone(), self.opts.clone());
                self.sim.set_faults(faults);
                r
            }
            r => r,
        }
    }

    fn data_file(&self, pos: i64) -> (PathBuf, usize) {
        let size = self.opts.data_file_size;
        let start = pos - pos % size;
        (
            crate::store::mapped::file_name(&self.opts.dir.join("data"), start),
            (pos - start) as usize,
        )
    }

    /// Flips a bit of the checkpoint's last entry: recovery must refuse naming
    /// the file and the entry's offset; after the flip is undone it must not.
    fn check_durable_flip(
        &self,
        disk: &Disk,
        bit: u8,
        pick: u64,
        model: &MemLog,
    ) -> Result<(), String> {
        let Ok(Some(ck)) = meta::load_checkpoint(disk, &self.opts.dir) else {
            return Ok(());
        };
        let Some(e) = model.entries().iter().find(|e| e.index() == ck.end_index) else {
            return Ok(());
        };
        if model.truncation_pending() || e.header.end_pos() > model.durable_end_pos() {
            return Ok(());
        }
        let (path, entry_off) = self.data_file(e.pos());
        let byte = if e.body.is_empty() {
            8 + (pick % 8) as usize // the index field
        } else {
            HEADER_SIZE + (pick % e.body.len() as u64) as usize
        };
        if !self.sim.corrupt(&path, entry_off + byte, bit) {
            return Ok(());
        }
        let refused = match LedgerStore::open_on(disk.clone(), self.opts.clone()) {
            Ok(_) => {
                return Err(format!(
                    "recovery accepted a flipped bit in durable entry {} ({path:?} offset {})",
                    e.index(),
                    entry_off + byte
                ));
            }
            Err(e) => e,
        };
        match &refused {
            LedgerStoreError::Corrupt {
                path: p, offset, ..
            } if p == &path && *offset as usize == entry_off => {}
            other => {
                return Err(format!(
                    "damage at {path:?} offset {entry_off} was refused with the wrong place: {other}"
                ));
            }
        }
        // The offline checker must find the same damage first; a flipped index
        // field of the log's first entry has nothing to be checked against but
        // its index unit.
        let index_field = byte < HEADER_SIZE;
        match check_ledger_dir_on(disk, &self.opts.dir) {
            Ok(r)
                if r.first_bad
                    .as_ref()
                    .is_some_and(|b| b.path == path && b.offset as usize == entry_off) => {}
            Ok(r) if index_field && r.index_mismatches > 0 => {}
            other => {
                return Err(format!(
                    "recovery refused damage at {path:?} offset {entry_off}, the checker found {other:?}"
                ));
            }
        }
        // Undo the flip: the same bit again.
        self.sim.corrupt(&path, entry_off + byte, bit);
        Ok(())
    }

    /// Flips a bit of an entry at or past the model's durable end: in its
    /// body (covered by the body CRC) or its index field (checked for
    /// continuity, except on the first entry). The term, channel and chain-CRC fields of a header are
    /// covered by no check (DLedger's format has no header CRC), so a flip
    /// there is not aimed at.
    fn flip_past_durable(&self, bit: u8, pick: u64, model: &MemLog) {
        if model.truncation_pending() {
            return;
        }
        let from = model.durable_end_pos();
        let tail: Vec<&Entry> = model.entries().iter().filter(|e| e.pos() >= from).collect();
        if tail.is_empty() {
            return;
        }
        let e = tail[(pick % tail.len() as u64) as usize];
        let (path, entry_off) = self.data_file(e.pos());
        // The first entry's index has nothing to be checked against (a log
        // may begin anywhere after a purge or a reset): only its body.
        let first = model.entries().first().map(|f| f.index()) == Some(e.index());
        if first && e.body.is_empty() {
            return;
        }
        let byte = if !first && (e.body.is_empty() || pick.is_multiple_of(3)) {
            8 + ((pick >> 8) % 8) as usize
        } else {
            HEADER_SIZE + ((pick >> 8) % e.body.len() as u64) as usize
        };
        self.sim.corrupt(&path, entry_off + byte, bit);
    }

    /// The member's directory.
    pub(super) fn dir(&self) -> &Path {
        &self.opts.dir
    }
}
