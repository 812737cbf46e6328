//! Slave metadata sync (RocketMQ's SlaveSynchronize): topics, consumer
//! offsets, delay offsets, subscription groups, and (Basalt) users and ACLs
//! are copied from the master over remoting every `slaveSyncInterval`; HA
//! carries only the CommitLog. Every request is signed with the broker's
//! own credentials, so a master with authentication on answers them.

use std::sync::Arc;
use std::time::Duration;

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::request;
use basalt_remoting::protocol::TopicConfigSerializeWrapper;

use crate::broker::Broker;
use crate::metadata::formats::GroupsFile;
use crate::metadata::formats::TopicsFile;
use crate::metadata::formats::parse_offset_table;
use crate::replication::auth_sync::{FailureLog, copy_users, sign_as_broker};

/// One round of copying the master's metadata. Errors are logged; the next
/// round tries again.
pub(crate) async fn sync_once(broker: &Arc<Broker>, master: &str, auth_log: &mut FailureLog) {
    let call = |code: i32| {
        let client = broker.registrar.client();
        let mut cmd = RemotingCommand::request(code);
        sign_as_broker(broker, &mut cmd);
        async move {
            client
                .invoke(master, cmd, Duration::from_secs(5))
                .await
                .ok()
                .filter(|r| r.code == 0)
        }
    };
    if let Some(r) = call(request::GET_ALL_TOPIC_CONFIG).await {
        match basalt_remoting::fastjson::from_slice::<TopicConfigSerializeWrapper>(&r.body) {
            Ok(w) => {
                let w = TopicsFile::from_wire(&w);
                if w.data_version != broker.topics.data_version() {
                    broker.topics.replace_all(w);
                }
            }
            Err(e) => tracing::warn!(error = %e, "bad topic config from the master"),
        }
    }
    if let Some(r) = call(request::GET_ALL_CONSUMER_OFFSET).await {
        match parse_offset_table(&String::from_utf8_lossy(&r.body)) {
            Ok(t) => {
                broker.offsets.replace_all(t);
                broker.offsets.persist();
            }
            Err(e) => tracing::warn!(error = %e, "bad consumer offsets from the master"),
        }
    }
    if let Some(r) = call(request::GET_ALL_DELAY_OFFSET).await {
        broker
            .delay_offsets
            .replace_from_json(&String::from_utf8_lossy(&r.body));
    }
    if let Some(r) = call(request::GET_ALL_SUBSCRIPTIONGROUP_CONFIG).await {
        match basalt_remoting::fastjson::from_slice::<GroupsFile>(&r.body) {
            Ok(w) => broker.groups.replace_all(w),
            Err(e) => tracing::warn!(error = %e, "bad subscription groups from the master"),
        }
    }
    copy_users(broker, master, auth_log).await;
}
