//! Retention in ledger mode: every member deletes its own expired ledger
//! data and index files, and the ConsumeQueue and index files that pointed
//! into them, by the rules classic mode applies to the CommitLog
//! (`fileReservedTime`, `deleteWhen`, `diskMaxUsedSpaceRatio`,
//! `diskSpaceCleanForciblyRatio`; see `basalt_store::services::clean_once`).
//!
//! What may go is bounded by what this member has committed **and**
//! dispatched: a file holding an entry at or past the next entry to
//! dispatch stays whatever its age, so no committed message disappears
//! before its ConsumeQueue unit is written. The newest file always stays.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use basalt_store::MessageStore;
use basalt_store::services::is_delete_hour;

use super::LedgerMode;

/// One data file as retention sees it: where it ends and how long ago it
/// was last written (`None`: unknown, which never counts as expired).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AgedFile {
    pub end: i64,
    pub age: Option<Duration>,
}

/// What a round may do, from the clock, the disk and the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RoundRules {
    /// `fileReservedTime`.
    pub reserved: Duration,
    /// Expired files may go: it is a `deleteWhen` hour, or the disk is above
    /// `diskMaxUsedSpaceRatio`.
    pub expired_may_go: bool,
    /// The disk is above `diskSpaceCleanForciblyRatio` (with
    /// `cleanFileForciblyEnable`): the oldest file may go even unexpired.
    pub forced: bool,
    /// `deleteFilesBatchMax`: most files one round deletes.
    pub max_files: usize,
}

/// The position to purge before (every file ending at or below it goes) and
/// how many files that deletes, or `None` when nothing may go. `files` are
/// oldest first; `bound` is the first position that must stay (the entry
/// next to dispatch, or the committed end).
pub(crate) fn plan_purge(
    files: &[AgedFile],
    bound: i64,
    rules: RoundRules,
) -> Option<(i64, usize)> {
    let mut before = None;
    let mut n = 0;
    // Never the newest file: the writer is in it (or next to it).
    for f in files.iter().take(files.len().saturating_sub(1)) {
        if n >= rules.max_files || f.end > bound {
            break;
        }
        let expired = f.age.is_some_and(|a| a >= rules.reserved);
        // Under pressure only the single oldest file goes unexpired per
        // round; the next round samples the disk again first.
        let forced_now = rules.forced && n == 0;
        if (expired && rules.expired_may_go) || forced_now {
            before = Some(f.end);
            n += 1;
            if !expired {
                break;
            }
        } else {
            break;
        }
    }
    before.map(|b| (b, n))
}

impl LedgerMode {
    /// Runs cleanup rounds until shutdown: the disk is sampled every
    /// `diskCheckInterval`; a round runs every `cleanResourceInterval`, or
    /// at once while the disk is above `diskSpaceCleanForciblyRatio`.
    pub(super) async fn retention_loop(self: Arc<Self>, store: Arc<MessageStore>) {
        let cfg = store.config().clone();
        let tick = cfg.disk_check_interval.min(cfg.clean_resource_interval);
        let mut timer = tokio::time::interval(tick);
        timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_round = Instant::now();
        loop {
            timer.tick().await;
            if self.stopped.load(Ordering::Acquire) {
                return;
            }
            let disk_store = Arc::clone(&store);
            let pressure = tokio::task::spawn_blocking(move || {
                let disk = disk_store.commit_log().disk();
                disk.sample();
                disk_store.config().clean_file_forcibly_enable && disk.wants_forced_cleanup()
            })
            .await
            .unwrap_or(false);
            if !pressure && last_round.elapsed() < cfg.clean_resource_interval {
                continue;
            }
            last_round = Instant::now();
            if let Err(e) = self.retention_round(&store, pressure).await {
                tracing::error!(member = %self.self_id, error = %e, "ledger cleanup failed");
            }
        }
    }

    /// The first position retention must keep: the entry next to dispatch,
    /// as last recorded after the queues were fsynced (or the committed end
    /// when everything committed is dispatched).
    /// `None` when that entry cannot be located (nothing may go).
    pub(crate) fn retention_bound(&self) -> Option<i64> {
        let reader = self.handle.reader();
        let next = self
            .dispatched_durable
            .load(Ordering::Acquire)
            .min(self.dispatched_index());
        if next > reader.committed_index() {
            return Some(reader.committed_pos());
        }
        reader.pos_of(next)
    }

    /// One cleanup round: deletes what [`plan_purge`] allows, then the
    /// queue and index files that pointed into it.
    async fn retention_round(
        &self,
        store: &Arc<MessageStore>,
        pressure: bool,
    ) -> Result<(), String> {
        let Some(bound) = self.retention_bound() else {
            return Ok(());
        };
        let cfg = store.config();
        let files = self.handle.reader().data_files();
        let aged = tokio::task::spawn_blocking(move || {
            let now = SystemTime::now();
            files
                .iter()
                .map(|f| AgedFile {
                    end: f.end,
                    age: std::fs::metadata(&f.path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|m| now.duration_since(m).ok()),
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| e.to_string())?;
        let rules = RoundRules {
            reserved: cfg.file_reserved_time,
            expired_may_go: is_delete_hour(&cfg.delete_when)
                || store.commit_log().disk().over_max_used(),
            forced: pressure,
            max_files: cfg.delete_files_batch_max.max(1),
        };
        let Some((before, n)) = plan_purge(&aged, bound, rules) else {
            return Ok(());
        };
        let old_begin = self.handle.reader().begin_index();
        let begin = self
            .handle
            .purge_before(before)
            .await
            .map_err(|e| format!("purging ledger files before {before}: {e}"))?;
        let level = if pressure { "forced" } else { "expired" };
        tracing::info!(member = %self.self_id, files = n, before, old_begin, begin, why = level,
            used_percent = ?store.commit_log().disk().used_percent(),
            "deleted old ledger files");
        self.delete_queue_files(store).await
    }

    /// Deletes the ConsumeQueue and index files whose units all point below
    /// the ledger's first kept record.
    pub(super) async fn delete_queue_files(&self, store: &Arc<MessageStore>) -> Result<(), String> {
        let reader = self.handle.reader();
        let Ok(first) = reader.entry(reader.begin_index()) else {
            return Ok(());
        };
        let min = first.body_pos();
        let st = Arc::clone(store);
        let n = tokio::task::spawn_blocking(move || st.delete_queue_files_below(min))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("deleting queue files below {min}: {e}"))?;
        if n > 0 {
            tracing::info!(member = %self.self_id, files = n, min_offset = min,
                "deleted ConsumeQueue and index files of purged ledger files");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: Duration = Duration::from_secs(3600);

    fn files(ages_h: &[u64]) -> Vec<AgedFile> {
        ages_h
            .iter()
            .enumerate()
            .map(|(i, a)| AgedFile {
                end: (i as i64 + 1) * 100,
                age: Some(H * *a as u32),
            })
            .collect()
    }

    fn rules(expired_may_go: bool, forced: bool) -> RoundRules {
        RoundRules {
            reserved: H * 72,
            expired_may_go,
            forced,
            max_files: 10,
        }
    }

    #[test]
    fn expired_files_go_only_when_allowed_and_never_past_the_bound() {
        let f = files(&[100, 90, 80, 1, 0]);
        assert_eq!(plan_purge(&f, i64::MAX, rules(false, false)), None);
        assert_eq!(plan_purge(&f, i64::MAX, rules(true, false)), Some((300, 3)));
        // The entry next to dispatch is in the second file: only the first goes.
        assert_eq!(plan_purge(&f, 150, rules(true, false)), Some((100, 1)));
        assert_eq!(plan_purge(&f, 99, rules(true, false)), None);
        // A file ending exactly at the bound holds nothing at or past it.
        assert_eq!(plan_purge(&f, 200, rules(true, false)), Some((200, 2)));
    }

    #[test]
    fn the_newest_file_stays_and_the_batch_is_bounded() {
        let f = files(&[100, 100, 100]);
        assert_eq!(plan_purge(&f, i64::MAX, rules(true, false)), Some((200, 2)));
        let mut r = rules(true, false);
        r.max_files = 1;
        assert_eq!(plan_purge(&f, i64::MAX, r), Some((100, 1)));
        assert_eq!(
            plan_purge(&files(&[100]), i64::MAX, rules(true, true)),
            None
        );
    }

    #[test]
    fn pressure_takes_one_unexpired_file_per_round() {
        let f = files(&[1, 1, 0]);
        assert_eq!(plan_purge(&f, i64::MAX, rules(false, true)), Some((100, 1)));
        // Expired ones first, then one more only if none was expired.
        let f = files(&[100, 1, 0]);
        assert_eq!(plan_purge(&f, i64::MAX, rules(false, true)), Some((100, 1)));
        // Pressure never crosses the dispatch bound either.
        assert_eq!(plan_purge(&f, 50, rules(true, true)), None);
        // An unknown age is never expired.
        let f = vec![
            AgedFile {
                end: 100,
                age: None,
            },
            AgedFile {
                end: 200,
                age: None,
            },
        ];
        assert_eq!(plan_purge(&f, i64::MAX, rules(true, false)), None);
    }
}
