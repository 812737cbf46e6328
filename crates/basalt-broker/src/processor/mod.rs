//! Request processors: one entry point that routes each request code to its
//! handler. Every handler answers bad input with an error response; none
//! panics on what a client sends.

// Validation helpers return the error response itself as their `Err`; it is
// built once per rejected request, so its size does not matter.
#![allow(clippy::result_large_err)]

mod admin;
mod checks;
mod client;
mod pull;
mod send;

use std::sync::Arc;

use basalt_remoting::code::{request, response};
use basalt_remoting::{Channel, HeaderError, RemotingCommand, RequestProcessor};

use crate::broker::Broker;

/// The broker's [`RequestProcessor`].
pub struct BrokerProcessor {
    broker: Arc<Broker>,
}

impl BrokerProcessor {
    pub fn new(broker: Arc<Broker>) -> Self {
        BrokerProcessor { broker }
    }
}

/// An error response.
pub(crate) fn error(code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

/// The response to a request whose header does not parse.
pub(crate) fn bad_header(e: HeaderError) -> RemotingCommand {
    error(response::SYSTEM_ERROR, format!("bad request header: {e}"))
}

impl RequestProcessor for BrokerProcessor {
    async fn process(&self, channel: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        let b = &self.broker;
        let resp = match req.code {
            request::SEND_MESSAGE
            | request::SEND_MESSAGE_V2
            | request::SEND_BATCH_MESSAGE
            | request::SEND_REPLY_MESSAGE
            | request::SEND_REPLY_MESSAGE_V2 => send::send(b, channel, &req).await,
            request::CONSUMER_SEND_MSG_BACK => send::send_back(b, channel, &req).await,
            request::PULL_MESSAGE | request::LITE_PULL_MESSAGE => pull::pull(b, &req).await,
            request::HEART_BEAT => client::heartbeat(b, channel, &req).await,
            request::UNREGISTER_CLIENT => client::unregister_client(b, channel, &req),
            request::GET_CONSUMER_LIST_BY_GROUP => client::consumer_list(b, &req),
            request::QUERY_CONSUMER_OFFSET => client::query_consumer_offset(b, &req),
            request::UPDATE_CONSUMER_OFFSET => client::update_consumer_offset(b, &req),
            request::GET_MAX_OFFSET => client::max_offset(b, &req),
            request::GET_MIN_OFFSET => client::min_offset(b, &req),
            request::GET_EARLIEST_MSG_STORETIME => client::earliest_msg_storetime(b, &req),
            request::SEARCH_OFFSET_BY_TIMESTAMP => client::search_offset(b, &req),
            request::LOCK_BATCH_MQ => client::lock_batch(b, &req),
            request::UNLOCK_BATCH_MQ => client::unlock_batch(b, &req),
            request::END_TRANSACTION => error(
                response::NO_PERMISSION,
                "transactional messages are not supported by this broker",
            ),
            request::UPDATE_AND_CREATE_TOPIC => admin::create_topic(b, &req).await,
            request::DELETE_TOPIC_IN_BROKER => admin::delete_topic(b, &req),
            request::GET_ALL_TOPIC_CONFIG => admin::all_topic_config(b),
            request::GET_TOPIC_CONFIG => admin::topic_config(b, &req),
            request::GET_BROKER_RUNTIME_INFO => admin::runtime_info(b),
            request::GET_BROKER_CONFIG => admin::broker_config(b),
            request::GET_TOPIC_STATS_INFO => admin::topic_stats(b, &req),
            request::GET_CONSUME_STATS => admin::consume_stats(b, &req),
            request::GET_CONSUMER_CONNECTION_LIST => admin::consumer_connections(b, &req),
            request::QUERY_MESSAGE => admin::query_message(b, &req),
            request::VIEW_MESSAGE_BY_ID => admin::view_message(b, &req),
            request::GET_ALL_CONSUMER_OFFSET => admin::all_consumer_offsets(b),
            request::GET_ALL_DELAY_OFFSET => admin::all_delay_offsets(b),
            request::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => admin::all_subscription_groups(b),
            request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
                admin::create_subscription_group(b, &req).await
            }
            request::DELETE_SUBSCRIPTIONGROUP => admin::delete_subscription_group(b, &req),
            _ => RemotingCommand::not_supported(&req),
        };
        Some(resp)
    }

    fn on_channel_closed(&self, channel: &Channel) {
        let b = &self.broker;
        for group in b.clients.channel_closed(channel.id()) {
            b.notify_consumer_ids_changed(&group);
        }
    }
}
