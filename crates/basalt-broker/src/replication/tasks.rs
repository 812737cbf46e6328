//! The background tasks each replication mode needs beside its own
//! transport: following ledger roles, copying a master's metadata, logging a
//! master's slaves' lag.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::Replication;
use super::auth_sync::FailureLog;
use super::ha::sync::sync_once;
use crate::broker::Broker;

/// Starts the tasks of the broker's replication mode.
pub(crate) fn spawn(broker: &Arc<Broker>) -> Vec<JoinHandle<()>> {
    match broker.replication.as_ref() {
        Replication::Standalone => Vec::new(),
        Replication::HaMaster { .. } => vec![tokio::spawn(log_slave_lag(Arc::clone(broker)))],
        Replication::HaSlave(_) => vec![tokio::spawn(copy_metadata(Arc::clone(broker)))],
        Replication::Ledger(lm) => {
            // Re-register at once when this member becomes or stops being master.
            let registrar = Arc::clone(&broker.registrar);
            let roles = Arc::clone(lm).follow_roles(Arc::clone(&broker.store), move |_| {
                registrar.register_soon();
            });
            vec![
                tokio::spawn(roles),
                tokio::spawn(copy_metadata(Arc::clone(broker))),
            ]
        }
    }
}

/// A slave (or a ledger follower) copies its master's topics, groups,
/// offsets (as RocketMQ's SlaveSynchronize does), users and ACLs every
/// slaveSyncInterval.
async fn copy_metadata(b: Arc<Broker>) {
    let mut tick = tokio::time::interval(b.config.slave_sync_interval);
    let mut auth_log = FailureLog::default();
    loop {
        tick.tick().await;
        if b.replication.is_writable() {
            continue;
        }
        let master = b.registrar.master_addr();
        if let Some(m) = master.filter(|m| *m != b.broker_addr()) {
            sync_once(&b, &m, &mut auth_log).await;
        }
    }
}

/// Logs the slaves' lag every minute, as RocketMQ does.
async fn log_slave_lag(b: Arc<Broker>) {
    let Some(ha) = b.replication.ha_master().cloned() else {
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    tick.tick().await;
    loop {
        tick.tick().await;
        let max = b.store.commit_log().max_offset();
        for conn in ha.connections() {
            let acked = conn.acked.load(Ordering::Acquire);
            tracing::info!(slave = %conn.addr, behind_bytes = max - acked.max(0), "slave fall behind master");
        }
    }
}
