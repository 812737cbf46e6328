//! [`LedgerHandle`], the broker's side of a running member: each call becomes a
//! `Control` message to the runtime task and waits for its reply.

use std::sync::Arc;

use bytes::BytesMut;
use tokio::sync::{mpsc, oneshot, watch};

use super::{LedgerError, LedgerStatus, Reply, Stamp, StampSlot};
use crate::config::LedgerConfig;
use crate::core::AppendReceipt;
use crate::protocol::NodeId;
use crate::store::LedgerReader;

/// A request from a [`LedgerHandle`] to the runtime task, with the channel its
/// answer goes back on.
pub(super) enum Control {
    Append {
        bodies: Vec<BytesMut>,
        stamp: Stamp,
        reply: Reply<AppendReceipt>,
    },
    Transfer {
        to: NodeId,
        reply: Reply<()>,
    },
    Purge {
        before_pos: i64,
        reply: Reply<i64>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
}

/// A handle on a running member. Cheap to clone.
///
/// The broker's use: `append` CommitLog records as entry bodies (the stamp
/// rewrites each record's PHYSICALOFFSET to `slot.pos + 48` before it is written);
/// dispatch committed entries in order with [`LedgerHandle::wait_committed`] and
/// [`LedgerReader::entries`] (skipping [`EntryKind::Noop`](crate::entry::EntryKind::Noop) entries); serve pulls
/// with [`LedgerReader::read`]; register as master while [`LedgerStatus::role`] is
/// leader and `leader_ready`.
#[derive(Clone)]
pub struct LedgerHandle {
    pub(super) control: mpsc::Sender<Control>,
    pub(super) status: watch::Receiver<LedgerStatus>,
    pub(super) reader: LedgerReader,
    pub(super) config: Arc<LedgerConfig>,
}

impl LedgerHandle {
    /// Appends `bodies` as consecutive entries and resolves once they are
    /// committed (on a majority of durable logs, in durable ack mode). `stamp` runs
    /// on the leader's single append path, after the entries got their final index
    /// and position and before they are written; it may rewrite the bodies in place
    /// (their length is fixed).
    pub async fn append(
        &self,
        bodies: Vec<BytesMut>,
        stamp: impl FnOnce(&mut [StampSlot<'_>]) + Send + 'static,
    ) -> Result<AppendReceipt, LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.control
            .send(Control::Append {
                bodies,
                stamp: Box::new(stamp),
                reply,
            })
            .await
            .map_err(|_| LedgerError::Shutdown)?;
        rx.await.map_err(|_| LedgerError::Shutdown)?
    }

    /// The current status.
    pub fn status(&self) -> LedgerStatus {
        self.status.borrow().clone()
    }

    /// A watch of the status (changes after every step that changes it).
    pub fn watch(&self) -> watch::Receiver<LedgerStatus> {
        self.status.clone()
    }

    /// Zero-copy reads of committed entries and bytes.
    pub fn reader(&self) -> &LedgerReader {
        &self.reader
    }

    pub fn config(&self) -> &LedgerConfig {
        &self.config
    }

    /// Waits until the committed index reaches `index`; returns it.
    pub async fn wait_committed(&self, index: i64) -> Result<i64, LedgerError> {
        let mut w = self.status.clone();
        let s = w
            .wait_for(|s| s.committed_index >= index)
            .await
            .map_err(|_| LedgerError::Shutdown)?;
        Ok(s.committed_index)
    }

    /// Asks this member, the leader, to hand leadership to `to` (it stops
    /// accepting appends, brings `to` up to date and tells it to elect itself).
    /// Resolves when this member has stepped down.
    pub async fn transfer_leadership(&self, to: NodeId) -> Result<(), LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.control
            .send(Control::Transfer { to, reply })
            .await
            .map_err(|_| LedgerError::Shutdown)?;
        rx.await.map_err(|_| LedgerError::Shutdown)?
    }

    /// Deletes the data files entirely before `pos` (and before the committed
    /// position); returns the new first index.
    pub async fn purge_before(&self, pos: i64) -> Result<i64, LedgerError> {
        let (reply, rx) = oneshot::channel();
        self.control
            .send(Control::Purge {
                before_pos: pos,
                reply,
            })
            .await
            .map_err(|_| LedgerError::Shutdown)?;
        rx.await.map_err(|_| LedgerError::Shutdown)?
    }

    /// Stops the member: pending appends fail with `Shutdown`, everything written
    /// is synced and a checkpoint written.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self.control.send(Control::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}
