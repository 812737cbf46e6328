//! The requests brokers send to a client on its own connections (Java
//! `ClientRemotingProcessor`): NOTIFY_CONSUMER_IDS_CHANGED,
//! RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_RUNNING_INFO and
//! CHECK_TRANSACTION_STATE.

use std::collections::BTreeMap;
use std::sync::Weak;

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    GetConsumerRunningInfoRequestHeader, NotifyConsumerIdsChangedRequestHeader,
};
use basalt_remoting::transport::BoxFuture;
use basalt_remoting::{Channel, ClientRequestHandler, RemotingCommand};

use super::ClientInstance;
use crate::message::TopicQueue;

/// Handles the requests brokers send to this client, on behalf of the
/// instance it holds weakly: it owns no state, never keeps the instance
/// alive, and answers nothing once the instance is gone.
pub(crate) struct ServerRequests(pub(crate) Weak<ClientInstance>);

impl ClientRequestHandler for ServerRequests {
    fn handle<'a>(
        &'a self,
        channel: &'a Channel,
        req: RemotingCommand,
    ) -> BoxFuture<'a, Option<RemotingCommand>> {
        Box::pin(async move {
            let me = self.0.upgrade()?;
            match req.code {
                request::NOTIFY_CONSUMER_IDS_CHANGED => {
                    let group = req
                        .decode_header::<NotifyConsumerIdsChangedRequestHeader>()
                        .map(|h| h.consumer_group)
                        .unwrap_or_default();
                    tracing::info!(group, broker = %channel.remote_addr(),
                        "consumer ids changed; rebalancing");
                    me.rebalance_now();
                    // Oneway: the transport sends nothing for a oneway request.
                    Some(RemotingCommand::response_to(&req))
                }
                request::GET_CONSUMER_RUNNING_INFO => Some(running_info_response(&me, &req)),
                request::RESET_CONSUMER_CLIENT_OFFSET => {
                    reset_offsets(&me, &req).await;
                    // Brokers send it oneway (no reply goes out then).
                    Some(RemotingCommand::response_to(&req))
                }
                request::CHECK_TRANSACTION_STATE => {
                    tracing::warn!(broker = %channel.remote_addr(),
                        "CHECK_TRANSACTION_STATE received, but this client sends no transactional messages");
                    None
                }
                _ => Some(RemotingCommand::not_supported(&req)),
            }
        })
    }
}

/// RESET_CONSUMER_CLIENT_OFFSET's body (`ResetOffsetBody`): MessageQueue
/// object keys, fastjson style.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResetOffsetBody {
    #[serde(
        default,
        deserialize_with = "basalt_remoting::fastjson::mq_map::deserialize"
    )]
    offset_table: Vec<(TopicQueue, i64)>,
}

/// An admin reset a group's offsets: the broker tells each consumer the
/// new offsets of the queues (Java `ClientRemotingProcessor.resetOffset`).
async fn reset_offsets(me: &ClientInstance, req: &RemotingCommand) {
    let (Some(topic), Some(group)) = (req.ext_fields.get("topic"), req.ext_fields.get("group"))
    else {
        tracing::warn!("RESET_CONSUMER_CLIENT_OFFSET without topic or group");
        return;
    };
    let table: BTreeMap<TopicQueue, i64> = if req.body.is_empty() {
        BTreeMap::new()
    } else {
        match basalt_remoting::fastjson::from_slice::<ResetOffsetBody>(&req.body) {
            Ok(b) => b.offset_table.into_iter().collect(),
            Err(e) => {
                tracing::warn!(error = %e, "undecodable RESET_CONSUMER_CLIENT_OFFSET body");
                return;
            }
        }
    };
    match me.registry.consumer(group) {
        Some(c) => {
            tracing::info!(
                group,
                topic,
                queues = table.len(),
                "resetting consumer offsets"
            );
            c.reset_offsets(topic.to_string(), table).await;
        }
        None => tracing::debug!(group, "offset reset for a group this client does not run"),
    }
}

/// GET_CONSUMER_RUNNING_INFO's answer: the consumer's running info with the
/// instance's NameServers and version added, or SYSTEM_ERROR.
fn running_info_response(me: &ClientInstance, req: &RemotingCommand) -> RemotingCommand {
    let header = match req.decode_header::<GetConsumerRunningInfoRequestHeader>() {
        Ok(h) => h,
        Err(e) => return system_error(req, e.to_string()),
    };
    match me.registry.consumer(&header.consumer_group) {
        Some(c) => {
            let mut extra = BTreeMap::new();
            let ns: String = me
                .namesrvs
                .addrs()
                .iter()
                .map(|a| format!("{a};"))
                .collect();
            extra.insert("PROP_NAMESERVER_ADDR".to_string(), ns);
            extra.insert(
                "PROP_CLIENT_VERSION".to_string(),
                format!("V{}", me.config.version),
            );
            RemotingCommand::response_to(req).with_body(c.running_info(extra))
        }
        None => system_error(
            req,
            format!(
                "The Consumer Group <{}> not exist in this consumer",
                header.consumer_group
            ),
        ),
    }
}

fn system_error(req: &RemotingCommand, remark: String) -> RemotingCommand {
    let mut r = RemotingCommand::response(response::SYSTEM_ERROR, Some(remark));
    r.opaque = req.opaque;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;
    use basalt_remoting::header::CommandHeader;

    #[test]
    fn running_info_of_an_unknown_group_is_a_system_error() {
        let me = ClientInstance::new(ClientConfig::new("127.0.0.1:9876"));
        let header = GetConsumerRunningInfoRequestHeader {
            consumer_group: "CG".into(),
            client_id: me.client_id().to_string(),
            jstack_enable: Some(false),
        };
        let mut req = me
            .request(request::GET_CONSUMER_RUNNING_INFO)
            .with_ext(header.to_ext());
        req.opaque = 42;
        let r = running_info_response(&me, &req);
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert_eq!(r.opaque, 42);
        assert_eq!(
            r.remark.as_deref(),
            Some("The Consumer Group <CG> not exist in this consumer")
        );
        // Without the header: SYSTEM_ERROR too, for the same request.
        let mut bare = me.request(request::GET_CONSUMER_RUNNING_INFO);
        bare.opaque = 43;
        let r = running_info_response(&me, &bare);
        assert_eq!((r.code, r.opaque), (response::SYSTEM_ERROR, 43));
    }

    #[test]
    fn the_reset_body_reads_message_queue_object_keys() {
        let body = br#"{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:17}}"#;
        let b: ResetOffsetBody = basalt_remoting::fastjson::from_slice(body).unwrap();
        assert_eq!(b.offset_table, [(TopicQueue::new("T", "broker-a", 1), 17)]);
    }
}
