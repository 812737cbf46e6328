//! The table of every ConsumeQueue of a store, by topic and queue id. A
//! queue is added when its first unit is dispatched (its directory and
//! first file are made then, not when its topic is created), or found on
//! disk at start.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::RwLock;

use crate::consume_queue::ConsumeQueue;
use crate::error::{Result, StoreError};
use crate::names::{check_queue_address, is_plain_file_name};

/// The ConsumeQueue syncs crash recovery leaves to the first flush round
/// (docs/storage-format.md#recovery). While `deferring` (recovery runs, on
/// its own threads, before any service starts), a queue's cut makes its
/// zeroed tail durable no more at once but `owed`; recovery also owes the
/// names of the queues it found. The ConsumeQueue flush pays the debt with
/// one sync of the queues' file system before it flushes anything, and the
/// checkpoint's ConsumeQueue time only advances after a flush round: so the
/// checkpoint never claims a queue position whose cut or name a crash
/// could undo, and a crash before the payment recovers from the same
/// checkpoint again (the CommitLog is the truth; the queues are rebuilt).
#[derive(Debug, Default)]
pub struct SyncDebt {
    deferring: AtomicBool,
    owed: AtomicBool,
}

impl SyncDebt {
    /// Whether cuts leave their sync to the debt now (recovery runs).
    pub fn is_deferring(&self) -> bool {
        self.deferring.load(Ordering::Acquire)
    }

    /// Notes something the next payment must make durable.
    pub fn owe(&self) {
        self.owed.store(true, Ordering::Release);
    }

    /// Whether a payment is due.
    pub fn is_owed(&self) -> bool {
        self.owed.load(Ordering::Acquire)
    }
}

/// Ends the deferral of cut syncs when dropped (see
/// [`ConsumeQueueTable::defer_syncs`]).
#[derive(Debug)]
pub struct DeferSyncs<'a>(&'a SyncDebt);

impl Drop for DeferSyncs<'_> {
    fn drop(&mut self) {
        self.0.deferring.store(false, Ordering::Release);
    }
}

/// All ConsumeQueues, by topic and queue id, and the syncs recovery left
/// owing ([`SyncDebt`]).
#[derive(Debug)]
pub struct ConsumeQueueTable {
    disk: basalt_disk::Disk,
    root: PathBuf,
    file_size: usize,
    queues: RwLock<HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>>,
    debt: Arc<SyncDebt>,
}

impl ConsumeQueueTable {
    pub fn new(root: PathBuf, file_size: usize) -> Self {
        ConsumeQueueTable {
            disk: basalt_disk::Disk::Real,
            root,
            file_size,
            queues: RwLock::new(HashMap::new()),
            debt: Arc::new(SyncDebt::default()),
        }
    }

    /// Queue files live on `disk` (default: the real one).
    pub fn with_disk(mut self, disk: basalt_disk::Disk) -> Self {
        self.disk = disk;
        self
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Maps every queue directory under the root: `{topic}/{queueId}/`.
    /// Topic directories are opened by a few threads at once: with many
    /// topics the cost is the per-directory and per-file system calls.
    pub fn load(&self) -> Result<()> {
        self.disk.create_dir_all_durable(&self.root)?;
        let topics: Vec<_> = self
            .disk
            .list_dir(&self.root)?
            .into_iter()
            .filter(|t| t.is_dir)
            .collect();
        let workers = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 4);
        let chunk = topics.len().div_ceil(workers).max(1);
        let loaded = std::thread::scope(|s| {
            let handles: Vec<_> = topics
                .chunks(chunk)
                .map(|part| s.spawn(move || self.load_topics(part)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().map_err(|_| {
                        StoreError::Config("ConsumeQueue load thread panicked".into())
                    })?
                })
                .collect::<Result<Vec<_>>>()
        })?;
        let mut table: HashMap<String, HashMap<i32, Arc<ConsumeQueue>>> = HashMap::new();
        for (topic, qid, cq) in loaded.into_iter().flatten() {
            table.entry(topic).or_default().insert(qid, cq);
        }
        *self.queues.write() = table;
        Ok(())
    }

    /// Until the guard drops, cuts of the queues owe their sync instead of
    /// making it (see [`SyncDebt`]). Recovery only: nothing else may run.
    pub fn defer_syncs(&self) -> DeferSyncs<'_> {
        self.debt.deferring.store(true, Ordering::Release);
        DeferSyncs(&self.debt)
    }

    /// Owes the names of every queue found at start: the root, each topic
    /// directory and each queue directory. A queue's names are synced with
    /// its flush, and a run whose sync failed (or that crashed first)
    /// leaves them unsynced; the next run took them for durable and never
    /// synced them again, so a power loss many flushes later could still
    /// drop a queue directory, and a recovery whose scan began after the
    /// queue's records did not rebuild it (the soak found it once store
    /// times came from the simulated clock, seed 8523). Abnormal recovery
    /// calls it; the debt's payment makes them durable before the
    /// checkpoint moves (it was one directory fsync per topic and per queue
    /// during recovery: 100,000 at 50,000 topics).
    pub fn owe_names(&self) {
        self.debt.owe();
    }

    /// The syncs recovery left owing.
    pub fn sync_debt(&self) -> &SyncDebt {
        &self.debt
    }

    /// Pays the debt, if any: one [`basalt_disk::Disk::sync_tree`] of the
    /// queue root makes every queue file and name durable at once (50,000
    /// queues' worth of page writes in one file-system sync, where a sync
    /// per file waits for a journal commit and a device flush each). True
    /// when it paid. On failure the debt stays owed and the error is the
    /// caller's to treat as a failed fsync (poison the store).
    pub fn pay_sync_debt(&self) -> Result<bool> {
        if !self.debt.owed.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        let started = std::time::Instant::now();
        if let Err(e) = self.disk.sync_tree(&self.root) {
            self.debt.owe();
            return Err(e.into());
        }
        tracing::info!(
            root = %self.root.display(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "ConsumeQueue changes of the crash recovery made durable"
        );
        Ok(true)
    }

    /// Opens the queues of the topic directories in `part`.
    #[allow(clippy::type_complexity)]
    fn load_topics(
        &self,
        part: &[basalt_disk::DirEntry],
    ) -> Result<Vec<(String, i32, Arc<ConsumeQueue>)>> {
        let mut out = Vec::new();
        for t in part {
            for q in self.disk.list_dir(&t.path)? {
                let Some(qid) = q.name.parse::<i32>().ok() else {
                    continue;
                };
                let cq = ConsumeQueue::new_on(&self.disk, &self.root, &t.name, qid, self.file_size)
                    .sharing_debt(Arc::clone(&self.debt));
                cq.load()?;
                out.push((t.name.clone(), qid, Arc::new(cq)));
            }
        }
        Ok(out)
    }

    pub fn get(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues.read().get(topic)?.get(&queue_id).cloned()
    }

    /// The queue, created empty if it does not exist yet. Refuses an address
    /// that cannot name a queue directory (see [`crate::names`]).
    pub fn get_or_create(&self, topic: &str, queue_id: i32) -> Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.get(topic, queue_id) {
            return Ok(q);
        }
        check_queue_address(topic, queue_id).map_err(|e| StoreError::Layout {
            path: self.root.clone(),
            reason: e.to_string(),
        })?;
        let mut w = self.queues.write();
        Ok(Arc::clone(
            w.entry(topic.to_string())
                .or_default()
                .entry(queue_id)
                .or_insert_with(|| {
                    Arc::new(
                        ConsumeQueue::new_on(
                            &self.disk,
                            &self.root,
                            topic,
                            queue_id,
                            self.file_size,
                        )
                        .sharing_debt(Arc::clone(&self.debt)),
                    )
                }),
        ))
    }

    /// Every queue (snapshot), by topic and queue id: flush rounds and
    /// recovery then visit them in one order, not in the per-process order
    /// of a hash map, so a failed fsync hits the same queue on every run of
    /// a power-loss simulator seed.
    pub fn all(&self) -> Vec<Arc<ConsumeQueue>> {
        let mut v: Vec<_> = self
            .queues
            .read()
            .values()
            .flat_map(|m| m.values().cloned())
            .collect();
        v.sort_by(|a, b| (a.topic(), a.queue_id()).cmp(&(b.topic(), b.queue_id())));
        v
    }

    /// Queues of one topic, by queue id.
    pub fn topic_queues(&self, topic: &str) -> Vec<Arc<ConsumeQueue>> {
        let mut v: Vec<_> = self
            .queues
            .read()
            .get(topic)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default();
        v.sort_by_key(|q| q.queue_id());
        v
    }

    pub fn topics(&self) -> Vec<String> {
        self.queues.read().keys().cloned().collect()
    }

    /// Removes a topic's queues and files. Only a topic that is one plain
    /// file name is removed: nothing outside the queue root is ever touched.
    pub fn remove_topic(&self, topic: &str) -> Result<()> {
        if !is_plain_file_name(topic) {
            return Err(StoreError::Layout {
                path: self.root.clone(),
                reason: format!("refusing to remove {topic:?}: not one plain file name"),
            });
        }
        let removed = self.queues.write().remove(topic);
        if let Some(qs) = removed {
            for q in qs.values() {
                q.destroy()?;
            }
            let dir = self.root.join(topic);
            let _ = self.disk.remove_dir(&dir, true);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consume_queue::CqUnit;

    /// Regression (soak seed 8523): a queue directory whose name was never
    /// synced (its run failed the sync, or crashed first) stayed unsynced
    /// in every later run; abnormal recovery now makes the names durable.
    #[test]
    fn names_found_at_start_are_made_durable() {
        let sim = basalt_disk::SimDisk::new(8523);
        let disk = basalt_disk::Disk::Sim(sim.handle());
        let root = PathBuf::from("/s/consumequeue");
        let table = ConsumeQueueTable::new(root.clone(), 16 * 20).with_disk(disk.clone());
        table.load().unwrap();
        let unit = CqUnit {
            physical_offset: 1169,
            size: 100,
            tags_code: 0,
        };
        table
            .get_or_create("SimB", 0)
            .unwrap()
            .put_unit(0, unit)
            .unwrap();
        assert!(sim.unsynced_names().iter().any(|p| p.ends_with("SimB/0")));
        // The next run finds the queue and owes its names; the payment
        // (the first flush round) makes them durable.
        let next = ConsumeQueueTable::new(root, 16 * 20).with_disk(disk);
        next.load().unwrap();
        next.owe_names();
        assert!(next.pay_sync_debt().unwrap());
        assert!(!next.pay_sync_debt().unwrap(), "paid once");
        assert_eq!(sim.unsynced_names(), Vec::<PathBuf>::new());
        let after = basalt_disk::Disk::Sim(sim.power_loss());
        assert!(after.exists(Path::new("/s/consumequeue/SimB/0/00000000000000000000")));
    }
}
