//! END_TRANSACTION: a producer commits or rolls back a half message, on its
//! own or in answer to a check (RocketMQ's `EndTransactionProcessor`).

use std::sync::atomic::Ordering;

use basalt_common::constants::topic as reserved;
use basalt_common::record::RecordView;
use basalt_common::sysflag;
use basalt_common::time::now_millis;
use basalt_remoting::code::response;
use basalt_remoting::header::EndTransactionRequestHeader;

use super::Transactions;
use super::decisions::{Claim, Decision};
use super::messages::{HalfInfo, committed_properties, redraft, with_transaction_type};

/// Why an END_TRANSACTION was refused: the response code and remark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndRefused {
    pub code: i32,
    pub remark: String,
}

fn refused(code: i32, remark: impl Into<String>) -> EndRefused {
    EndRefused {
        code,
        remark: remark.into(),
    }
}

/// What an END_TRANSACTION did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndDone {
    /// The decision was applied now.
    Applied(Decision),
    /// The transaction had this decision already; nothing was stored again.
    AlreadyDecided(Decision),
    /// The producer does not know yet (`commitOrRollback` 0): the half
    /// stays, the check service will ask again.
    StillUnknown,
}

impl Transactions {
    /// Applies a producer's decision about the half message the header names.
    pub async fn end_transaction(
        &self,
        h: &EndTransactionRequestHeader,
    ) -> Result<EndDone, EndRefused> {
        let from_check = h.from_transaction_check.unwrap_or(false);
        let decision = match h.commit_or_rollback {
            sysflag::TRANSACTION_COMMIT_TYPE => Decision::Commit,
            sysflag::TRANSACTION_ROLLBACK_TYPE => Decision::Rollback,
            sysflag::TRANSACTION_NOT_TYPE => {
                tracing::debug!(msg_id = %h.msg_id, from_check, "producer does not know its transaction's state yet");
                return Ok(EndDone::StillUnknown);
            }
            other => {
                return Err(refused(
                    response::SYSTEM_ERROR,
                    format!("commitOrRollback {other} is none of 0, 8, 12"),
                ));
            }
        };
        if !self.writer.is_writable() {
            return Err(refused(
                response::SLAVE_NOT_AVAILABLE,
                "this broker does not take writes now; end the transaction on the master",
            ));
        }
        let Some(rec) = self.store.look_message_by_offset(h.commit_log_offset) else {
            return Err(refused(
                response::SYSTEM_ERROR,
                "Find prepared transaction message failed",
            ));
        };
        let v = RecordView::parse(&rec, false).map_err(|e| {
            refused(
                response::SYSTEM_ERROR,
                format!("the half message is unreadable: {e}"),
            )
        })?;
        let info = self.check_half(h, &v, from_check)?;
        let txid = info.transaction_id;
        match self.decisions.claim(txid).await {
            Claim::Decided(prev) => {
                // Resolve this copy too, so that the check leaves it alone.
                if let Err(e) = self.write_op(v.queue_id, v.queue_offset).await {
                    tracing::warn!(txid, error = %e, "cannot record a repeated transaction decision");
                }
                if prev == decision {
                    Ok(EndDone::AlreadyDecided(prev))
                } else {
                    Err(refused(
                        response::TRANSACTION_FAILED,
                        format!("transaction {txid} was {} already", prev.name()),
                    ))
                }
            }
            Claim::Mine(guard) => {
                let done = match decision {
                    Decision::Commit => self.commit(&v, &info, h.commit_log_offset).await?,
                    Decision::Rollback => self.rollback(&v).await?,
                };
                guard.decided(decision);
                Ok(done)
            }
        }
    }

    /// RocketMQ's `checkPrepareMessage` and `rejectCommitOrRollback`: the
    /// record is a half message of this producer group at the queue offset
    /// the producer was told, and a producer's own late decision about a
    /// message with its own check time is refused once that time passed.
    fn check_half<'a>(
        &self,
        h: &EndTransactionRequestHeader,
        v: &RecordView<'a>,
        from_check: bool,
    ) -> Result<HalfInfo<'a>, EndRefused> {
        if v.topic != reserved::TRANS_HALF_TOPIC.as_bytes() {
            return Err(refused(
                response::SYSTEM_ERROR,
                "the message at commitLogOffset is not a half message",
            ));
        }
        let info = HalfInfo::read(v).ok_or_else(|| {
            refused(
                response::SYSTEM_ERROR,
                "the half message lacks its transaction properties",
            )
        })?;
        if info.producer_group != h.producer_group {
            return Err(refused(response::SYSTEM_ERROR, "The producer group wrong"));
        }
        if v.queue_offset != h.tran_state_table_offset {
            return Err(refused(
                response::SYSTEM_ERROR,
                "The transaction state table offset wrong",
            ));
        }
        let timeout = self.config.transaction_timeout.as_millis() as i64;
        if !from_check
            && info.immunity_secs.is_some()
            && now_millis() - v.born_timestamp > info.check_after_ms(timeout)
        {
            return Err(refused(
                response::ILLEGAL_OPERATION,
                "the message's own check time passed; the broker checks it back",
            ));
        }
        Ok(info)
    }

    /// Stores the message in its real topic and records the op. Already
    /// committed (found in the index, e.g. stored just before a crash that
    /// lost the op): records the op only.
    async fn commit(
        &self,
        v: &RecordView<'_>,
        info: &HalfInfo<'_>,
        half_log_offset: i64,
    ) -> Result<EndDone, EndRefused> {
        if self.committed_in_log(info).await {
            tracing::info!(
                txid = info.transaction_id,
                "transaction found committed in the log; not storing it again"
            );
            if let Err(e) = self.write_op(v.queue_id, v.queue_offset).await {
                tracing::warn!(txid = info.transaction_id, error = %e, "cannot record a transaction decision");
            }
            return Ok(EndDone::AlreadyDecided(Decision::Commit));
        }
        let props = committed_properties(v);
        let sys_flag = with_transaction_type(v.sys_flag, sysflag::TRANSACTION_COMMIT_TYPE);
        let mut draft = redraft(
            v,
            info.real_topic,
            info.real_queue_id,
            sys_flag,
            &props,
            self.store_host(),
        );
        draft.prepared_transaction_offset = half_log_offset;
        let r = self.put(draft).await;
        if !r.status.is_stored() {
            return Err(refused(
                crate::processor::code_for_put(r.status),
                format!("{}: {}", r.status, r.detail.unwrap_or_default()),
            ));
        }
        self.stats.commits.fetch_add(1, Ordering::Relaxed);
        // The commit is in the log; the op only spares the check a question
        // (which the index then answers), so its failure is not the producer's.
        if let Err(e) = self.write_op(v.queue_id, v.queue_offset).await {
            tracing::warn!(txid = info.transaction_id, error = %e, "committed, but cannot record the op");
        }
        Ok(EndDone::Applied(Decision::Commit))
    }

    /// Records the op; nothing else is stored.
    async fn rollback(&self, v: &RecordView<'_>) -> Result<EndDone, EndRefused> {
        self.write_op(v.queue_id, v.queue_offset)
            .await
            .map_err(|e| {
                refused(
                    response::SYSTEM_ERROR,
                    format!("cannot record the rollback: {e}"),
                )
            })?;
        self.stats.rollbacks.fetch_add(1, Ordering::Relaxed);
        Ok(EndDone::Applied(Decision::Rollback))
    }

    /// Whether the index holds a committed copy of the transaction in its
    /// real topic. False when the index is off.
    pub(crate) async fn committed_in_log(&self, info: &HalfInfo<'_>) -> bool {
        let store = std::sync::Arc::clone(&self.store);
        let topic = info.real_topic.to_string();
        let txid = info.transaction_id.to_string();
        let found = tokio::task::spawn_blocking(move || {
            store
                .query_message(&topic, &txid, 32, 0, i64::MAX)
                .messages
                .iter()
                .filter_map(|m| RecordView::parse(m, false).ok())
                .any(|m| sysflag::transaction_type(m.sys_flag) == sysflag::TRANSACTION_COMMIT_TYPE)
        })
        .await;
        found.unwrap_or(false)
    }
}
