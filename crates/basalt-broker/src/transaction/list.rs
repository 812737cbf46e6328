//! The unresolved transactions of this broker, for `basalt admin
//! transactions` (Basalt's LIST_TRANSACTIONS): the halves past the check's
//! progress that no op resolved, one entry per transaction (its latest copy).

use std::collections::HashMap;
use std::time::Duration;

use basalt_common::constants::topic as reserved;
use basalt_common::record::RecordView;
use basalt_remoting::protocol::{PendingTransaction, TransactionList};

use super::messages::HalfInfo;
use super::ops::OpIndex;
use super::{HalfAt, Transactions};

/// Most op messages one listing reads per queue.
const MAX_OPS_READ: usize = 1_000_000;
/// Most half messages one listing looks at per queue.
const MAX_HALVES_READ: i64 = 200_000;
/// Longest a listing waits for the log written so far to reach the queues.
const DISPATCH_WAIT: Duration = Duration::from_secs(1);

impl Transactions {
    /// Lists at most `max` unresolved transactions, oldest first. Reads the
    /// half and op queues; blocking (call it off the async workers).
    pub fn list_pending(&self, max: usize) -> TransactionList {
        // A half stored a moment ago is in the log but maybe not yet in its
        // queue: let the dispatch catch up so that the listing shows every
        // acknowledged send (a ledger follower may not get there; then the
        // listing shows what is dispatched).
        let written = self.store.log().max_offset();
        if !self.store.wait_dispatched(written, DISPATCH_WAIT) {
            tracing::debug!(
                written,
                "listing transactions before the dispatch caught up"
            );
        }
        let mut out = TransactionList::default();
        let mut pending: Vec<PendingTransaction> = Vec::new();
        let mut by_txid: HashMap<String, usize> = HashMap::new();
        for queue_id in 0..self.half_queues() {
            let half_start = self.progress(reserved::TRANS_HALF_TOPIC, queue_id);
            let op_start = self.progress(reserved::TRANS_OP_HALF_TOPIC, queue_id);
            let half_max = self
                .store
                .max_offset_in_queue(reserved::TRANS_HALF_TOPIC, queue_id);
            if queue_id == 0 {
                out.half_progress = half_start;
                out.op_progress = op_start;
                out.half_max_offset = half_max;
            }
            let mut ops = OpIndex::new(&self.store, queue_id, op_start, half_start);
            let mut read = 0;
            while read < MAX_OPS_READ {
                let n = ops.read_more(&self.store, 4096);
                if n == 0 {
                    break;
                }
                read += n;
            }
            let end = half_max.min(half_start.saturating_add(MAX_HALVES_READ));
            if end < half_max || ops.has_unread(&self.store) {
                out.truncated = true;
            }
            for offset in half_start..end {
                if ops.take(offset) {
                    continue;
                }
                let HalfAt::Record(rec) = self.half_at(queue_id, offset) else {
                    continue;
                };
                let Ok(v) = RecordView::parse(&rec, false) else {
                    continue;
                };
                let Some(info) = HalfInfo::read(&v) else {
                    continue;
                };
                if self.decisions.get(info.transaction_id).is_some() {
                    continue;
                }
                let entry = PendingTransaction {
                    transaction_id: info.transaction_id.to_string(),
                    producer_group: info.producer_group.to_string(),
                    topic: info.real_topic.to_string(),
                    queue_id: info.real_queue_id,
                    half_queue_offset: offset,
                    commit_log_offset: v.physical_offset,
                    born_timestamp: v.born_timestamp,
                    check_times: info.check_times.unwrap_or(0),
                };
                match by_txid.get(info.transaction_id) {
                    Some(&i) => pending[i] = entry,
                    None => {
                        by_txid.insert(entry.transaction_id.clone(), pending.len());
                        pending.push(entry);
                    }
                }
            }
        }
        pending.sort_by_key(|p| (p.born_timestamp, p.half_queue_offset));
        if pending.len() > max {
            pending.truncate(max);
            out.truncated = true;
        }
        out.transactions = pending;
        out
    }
}
