//! Dispatch in ledger mode: every member follows its committed index and
//! writes committed entries, in index order, into its own ConsumeQueues and
//! index, recording how far it got in `config/ledgerDispatched`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use basalt_common::record::RecordView;
use basalt_ledger::EntryKind;
use basalt_ledger::store::ReadError;
use basalt_store::MessageStore;

use super::LedgerMode;

impl LedgerMode {
    /// Dispatches committed entries, in order, forever. An entry whose
    /// record cannot be placed is reported and passed over (as classic
    /// dispatch does); an I/O error stops the batch at that entry, which is
    /// retried after a pause, so no committed message is ever skipped.
    pub(super) async fn dispatch_loop(self: Arc<Self>, store: Arc<MessageStore>) {
        let reader = self.handle.reader().clone();
        let mut next = *self.dispatched.borrow();
        let mut last_persist = std::time::Instant::now();
        loop {
            if self.stopped.load(Ordering::Acquire) {
                return;
            }
            let begin = reader.begin_index();
            if begin > next {
                next = self.restart_dispatch_at(&store, next, begin).await;
                continue;
            }
            let wait =
                tokio::time::timeout(Duration::from_secs(1), self.handle.wait_committed(next))
                    .await;
            match wait {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    self.maybe_persist(&store, next, &mut last_persist).await;
                    continue;
                }
            }
            let entries = match reader.entries(next, 512, 4 << 20) {
                Ok(e) => e,
                // The ledger was reset under us (it started over at the
                // leader's first kept entry): the next round sees the begin.
                Err(ReadError::BeforeBegin(_)) if reader.begin_index() > next => continue,
                Err(e) => {
                    tracing::error!(index = next, error = %e, "cannot read committed ledger entries; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let (done, failed) = dispatch_entries(&store, &entries);
            if done > next {
                next = done;
                self.dispatched.send_replace(next);
            }
            if let Some((index, err)) = failed {
                tracing::error!(index, error = %err, "dispatch of a committed entry failed; retrying it in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            self.maybe_persist(&store, next, &mut last_persist).await;
        }
    }

    /// The ledger no longer holds entries from `next` on up to `begin`: this
    /// member was behind the leader's first kept entry and its log started
    /// over there (or it restarted with such a log). Every ConsumeQueue unit
    /// written so far points below `begin`'s entry, so the queues are
    /// emptied and dispatch goes on from `begin`: each queue then starts at
    /// the queue offset of its first record from there, as the leader's
    /// queues do after its own retention. Returns the new next index.
    async fn restart_dispatch_at(&self, store: &Arc<MessageStore>, next: i64, begin: i64) -> i64 {
        tracing::warn!(member = %self.self_id, dispatched = next, ledger_begin = begin,
            "ledger starts past what was dispatched (caught up from the leader's first kept entry); rebuilding the ConsumeQueues from there");
        let st = Arc::clone(store);
        let cleared = tokio::task::spawn_blocking(move || -> basalt_store::Result<()> {
            let queues = st.consume_queues();
            for topic in queues.topics() {
                queues.remove_topic(&topic)?;
            }
            Ok(())
        })
        .await;
        match cleared {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(member = %self.self_id, error = %e, "cannot empty the ConsumeQueues; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                return next;
            }
            Err(e) => {
                tracing::error!(member = %self.self_id, error = %e, "queue reset task failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                return next;
            }
        }
        if let Err(e) = self.delete_queue_files(store).await {
            tracing::warn!(member = %self.self_id, error = %e, "index files of the old log stay until the next cleanup");
        }
        self.dispatched.send_replace(begin);
        let st = Arc::clone(store);
        let me = self.progress_file.clone();
        let recorded = tokio::task::spawn_blocking(move || {
            st.flush_consume_queues()?;
            basalt_store::fs_util::atomic_write(&me, begin.to_string().as_bytes())
        })
        .await;
        if matches!(recorded, Ok(Ok(()))) {
            self.dispatched_durable.store(begin, Ordering::Release);
        }
        begin
    }

    /// Every second: fsync the queues, then record how far they go, so a
    /// restart resumes dispatch there (re-dispatching more is harmless).
    /// The fsyncs run on a blocking thread: on a runtime worker they stalled
    /// every task queued behind it for as long as the disk took.
    pub(super) async fn maybe_persist(
        self: &Arc<Self>,
        store: &Arc<MessageStore>,
        next: i64,
        last: &mut std::time::Instant,
    ) {
        if last.elapsed() < Duration::from_secs(1) {
            return;
        }
        *last = std::time::Instant::now();
        let (me, st) = (Arc::clone(self), Arc::clone(store));
        if let Err(e) = tokio::task::spawn_blocking(move || me.record_progress(&st, next)).await {
            tracing::warn!(member = %self.self_id, error = %e, "dispatch progress task failed; recorded at the next round");
        }
    }

    /// fsyncs the queues, then records `next` as the dispatch progress.
    pub(super) fn record_progress(&self, store: &MessageStore, next: i64) {
        if store.flush_consume_queues().is_ok()
            && basalt_store::fs_util::atomic_write(&self.progress_file, next.to_string().as_bytes())
                .is_ok()
        {
            self.dispatched_durable.store(next, Ordering::Release);
        }
    }
}

/// Dispatches `entries` (consecutive, committed) in order. Returns the
/// index after the last entry dispatched or passed over, and the entry and
/// error that stopped the run, if one did. Entries after a failed one are not
/// touched: the caller retries from the failed one.
fn dispatch_entries(
    store: &MessageStore,
    entries: &[basalt_ledger::LedgerEntry],
) -> (i64, Option<(i64, basalt_store::StoreError)>) {
    let mut next = entries.first().map(|e| e.index).unwrap_or(-1);
    for e in entries {
        debug_assert_eq!(e.index, next, "ledger entries are consecutive");
        if e.kind != EntryKind::Noop {
            match RecordView::parse(&e.body, false) {
                Ok(v) if v.physical_offset != e.body_pos() => {
                    tracing::error!(
                        index = e.index,
                        pos = e.body_pos(),
                        record = v.physical_offset,
                        "ledger entry holds a record stamped for another position; passing over it"
                    );
                }
                Ok(v) => {
                    if let Err(err) = store.dispatcher().dispatch_record(&v, true) {
                        return (e.index, Some((e.index, err)));
                    }
                }
                Err(err) => {
                    tracing::error!(index = e.index, error = %err, "ledger entry is not a record; passing over it")
                }
            }
        }
        next = e.index + 1;
    }
    (next, None)
}

pub(super) fn read_progress(p: &Path) -> i64 {
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_common::record::{self, RecordDraft};
    use basalt_ledger::LedgerEntry;
    use basalt_store::{MessageLog, MessageSource};
    use bytes::Bytes;

    /// A committed entry holding a record of `topic`, placed at `pos`.
    fn entry(index: i64, pos: i64, topic: &str, queue_offset: i64) -> LedgerEntry {
        let host = "127.0.0.1:10911".parse().unwrap();
        let draft = RecordDraft {
            topic,
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"body",
            properties: b"",
        };
        let mut body = Vec::new();
        draft.encode_into(&mut body).unwrap();
        let phys = pos + basalt_ledger::entry::HEADER_SIZE as i64;
        record::stamp(&mut body, queue_offset, phys, 1_700_000_000_000);
        LedgerEntry {
            index,
            term: 1,
            pos,
            kind: EntryKind::Normal,
            body: Bytes::from(body),
        }
    }

    /// The reported bug: an I/O error on one entry broke out of the batch
    /// and the whole batch was then counted as dispatched. Now the run stops
    /// at the failed entry, nothing after it is touched, and a retry from
    /// there dispatches everything; an unplaceable record is passed over.
    /// The test reads nothing back through the store's log.
    struct NoRecords;

    impl MessageLog for NoRecords {
        fn min_offset(&self) -> i64 {
            0
        }
        fn max_offset(&self) -> i64 {
            0
        }
        fn read_bytes(&self, _offset: i64, _size: usize) -> Option<Bytes> {
            None
        }
        fn roll_next_file(&self, offset: i64) -> i64 {
            offset + 1
        }
    }

    #[test]
    fn a_failed_entry_stops_the_run_and_is_retried() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = basalt_store::StoreConfig::for_tests(dir.path());
        let log = MessageSource::External(Arc::new(NoRecords));
        let store = MessageStore::open_with_source(cfg, Default::default(), log).unwrap();
        std::fs::create_dir_all(dir.path().join("consumequeue")).unwrap();
        let blocker = dir.path().join("consumequeue").join("Blocked");
        std::fs::write(&blocker, b"in the way").unwrap();
        let entries = vec![
            entry(10, 0, "A", 0),
            entry(11, 1000, "a/../b", 0),
            entry(12, 2000, "A", 1),
            entry(13, 3000, "Blocked", 0),
            entry(14, 4000, "A", 2),
        ];
        let (next, failed) = dispatch_entries(&store, &entries);
        assert_eq!(next, 13);
        assert_eq!(failed.map(|(i, _)| i), Some(13));
        let a = store.consume_queues().get("A", 0).unwrap();
        assert_eq!(a.max_offset(), 2, "entries after the failed one wait");
        assert_eq!(store.dispatcher().unplaceable_records(), 1);

        std::fs::remove_file(&blocker).unwrap();
        let (next, failed) = dispatch_entries(&store, &entries[3..]);
        assert!(failed.is_none());
        assert_eq!(next, 15);
        assert_eq!(a.max_offset(), 3);
        assert_eq!(
            store
                .consume_queues()
                .get("Blocked", 0)
                .unwrap()
                .max_offset(),
            1
        );
        assert!(!dir.path().join("b").exists());
        store.shutdown();
    }
}
