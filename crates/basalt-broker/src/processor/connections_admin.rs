//! What operators ask about connected clients: GET_PRODUCER_CONNECTION_LIST
//! (204) and GET_CONSUMER_RUNNING_INFO (307), which the broker forwards to
//! the consumer and answers with the consumer's reply
//! (docs/protocol.md#operations).

use std::time::Duration;

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, GetConsumerRunningInfoRequestHeader, GetProducerConnectionListRequestHeader,
};
use basalt_remoting::{RemotingCommand, RemotingError};

use super::paths::AdminPath;
use super::{bad_header, checks, error};

/// How long a consumer may take to answer a forwarded request (Java: 5 s).
const CALL_CONSUMER_TIMEOUT: Duration = Duration::from_secs(5);

/// GET_PRODUCER_CONNECTION_LIST: the group's producer connections
/// (`ProducerConnection`), or SYSTEM_ERROR when none is online.
pub fn producer_connections(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match GetProducerConnectionListRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::group(&h.producer_group) {
        return resp;
    }
    let members = a.clients.producer_members(&h.producer_group);
    if members.is_empty() {
        return error(
            response::SYSTEM_ERROR,
            format!("the producer group[{}] not exist", h.producer_group),
        );
    }
    let connections: Vec<serde_json::Value> = members
        .iter()
        .map(|m| {
            serde_json::json!({
                "clientAddr": m.channel.remote_addr().to_string(),
                "clientId": m.client_id,
                "language": "JAVA",
                "version": 0,
            })
        })
        .collect();
    let body = serde_json::json!({ "connectionSet": connections });
    RemotingCommand::response(response::SUCCESS, None)
        .with_body(serde_json::to_vec(&body).unwrap_or_default())
}

/// GET_CONSUMER_RUNNING_INFO: forwards the request to the consumer named by
/// `clientId` in `consumerGroup` and answers with what it answers (Java
/// `AdminBrokerProcessor.callConsumer`).
pub async fn consumer_running_info(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match GetConsumerRunningInfoRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    if let Err(resp) = checks::group(&h.consumer_group) {
        return resp;
    }
    let channel = a.clients.consumer_group(&h.consumer_group).and_then(|g| {
        g.members
            .into_values()
            .find(|m| m.client_id == h.client_id && !m.channel.is_closed())
            .map(|m| m.channel)
    });
    let Some(channel) = channel else {
        return error(
            response::SYSTEM_ERROR,
            format!(
                "The Consumer <{}> <{}> not online",
                h.consumer_group, h.client_id
            ),
        );
    };
    let forward = RemotingCommand::request(request::GET_CONSUMER_RUNNING_INFO)
        .with_ext(h.to_ext())
        .with_body(req.body.clone());
    match channel.request(forward, CALL_CONSUMER_TIMEOUT).await {
        Ok(mut resp) => {
            // The consumer's answer goes back as this request's answer.
            resp.opaque = req.opaque;
            resp
        }
        Err(e @ RemotingError::Timeout { .. }) => error(
            response::CONSUME_MSG_TIMEOUT,
            format!(
                "consumer <{}> <{}> Timeout: {e}",
                h.consumer_group, h.client_id
            ),
        ),
        Err(e) => error(
            response::SYSTEM_ERROR,
            format!(
                "invoke consumer <{}> <{}> Exception: {e}",
                h.consumer_group, h.client_id
            ),
        ),
    }
}
