//! Request processors: one entry point that routes each request code to its
//! handler. Every handler answers bad input with an error response; none
//! panics on what a client sends.

// Validation helpers return the error response itself as their `Err`; it is
// built once per rejected request, so its size does not matter.
#![allow(clippy::result_large_err)]

mod admin;
mod assignment;
mod auth_admin;
mod batch_body;
mod checks;
mod client;
mod config_admin;
mod connections_admin;
mod ledger_admin;
mod offsets_admin;
pub mod paths;
mod pop;
mod pull;
mod queue_admin;
mod reply;
mod send;
mod send_properties;
mod stats_admin;
mod transaction;

use std::sync::Arc;

use basalt_remoting::code::{request, response};
use basalt_remoting::{Channel, HeaderError, RemotingCommand, RequestProcessor};
use basalt_store::PutMessageStatus;

use self::paths::{AdminPath, ClientPath, PullPath, ReplyPath, SendPath};
use crate::broker::Broker;
use crate::transaction::Transactions;

/// The broker's [`RequestProcessor`]: routes each request code to its
/// handler, giving each handler only its path's handle.
pub struct BrokerProcessor {
    send: SendPath,
    pull: PullPath,
    clients: ClientPath,
    admin: AdminPath,
    replies: ReplyPath,
    transactions: Arc<Transactions>,
    pop: Arc<crate::pop::PopService>,
    auth: Arc<basalt_auth::AuthGate>,
}

impl BrokerProcessor {
    pub fn new(broker: &Broker) -> Self {
        BrokerProcessor {
            send: broker.send_path(),
            pull: broker.pull_path(),
            clients: broker.client_path(),
            admin: broker.admin_path(),
            replies: broker.reply_path(),
            transactions: Arc::clone(broker.transactions()),
            pop: Arc::clone(broker.pop_service()),
            auth: Arc::clone(&broker.auth),
        }
    }
}

/// An error response.
pub(crate) fn error(code: i32, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response(code, Some(remark.into()))
}

/// The response code for a store result (SendMessageProcessor's mapping).
pub(crate) fn code_for_put(status: PutMessageStatus) -> i32 {
    match status {
        PutMessageStatus::PutOk => response::SUCCESS,
        PutMessageStatus::FlushDiskTimeout => response::FLUSH_DISK_TIMEOUT,
        PutMessageStatus::FlushSlaveTimeout => response::FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus::SlaveNotAvailable => response::SLAVE_NOT_AVAILABLE,
        PutMessageStatus::ServiceNotAvailable => response::SERVICE_NOT_AVAILABLE,
        PutMessageStatus::CreateMappedFileFailed => response::SYSTEM_ERROR,
        PutMessageStatus::MessageIllegal | PutMessageStatus::PropertiesSizeExceeded => {
            response::MESSAGE_ILLEGAL
        }
        PutMessageStatus::OsPageCacheBusy => response::SYSTEM_BUSY,
        PutMessageStatus::UnknownError => response::SYSTEM_ERROR,
    }
}

/// The response to a request whose header does not parse.
pub(crate) fn bad_header(e: HeaderError) -> RemotingCommand {
    error(response::SYSTEM_ERROR, format!("bad request header: {e}"))
}

impl RequestProcessor for BrokerProcessor {
    async fn process(&self, channel: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        let metrics = &self.send.stats.metrics;
        let started = metrics.is_enabled().then(std::time::Instant::now);
        let code = req.code;
        if let Some(refusal) = auth_admin::refused(&self.auth, channel, &req, metrics) {
            return Some(refusal);
        }
        let resp = self.handle_request(channel, req).await;
        if let Some(t) = started {
            metrics.record_rpc(code, resp.code, t.elapsed());
        }
        Some(resp)
    }

    fn on_channel_closed(&self, channel: &Channel) {
        for group in self.clients.clients.channel_closed(channel.id()) {
            self.clients.notify_consumer_ids_changed(&group);
        }
    }
}

impl BrokerProcessor {
    /// An operator's write from inside the broker (the dashboard, when
    /// `dashboardAdminEnable` allows it): topic and group creation and
    /// offset reset, through the same handlers as remote admin requests;
    /// any other code is refused.
    pub(crate) async fn internal_admin(&self, req: RemotingCommand) -> RemotingCommand {
        let a = &self.admin;
        match req.code {
            request::UPDATE_AND_CREATE_TOPIC => admin::create_topic(a, &req).await,
            request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
                admin::create_subscription_group(a, &req).await
            }
            request::INVOKE_BROKER_TO_RESET_OFFSET => offsets_admin::reset_offset(a, &req),
            _ => RemotingCommand::not_supported(&req),
        }
    }

    /// The handler's response to one request.
    async fn handle_request(&self, channel: &Channel, req: RemotingCommand) -> RemotingCommand {
        let (s, c, a) = (&self.send, &self.clients, &self.admin);
        match req.code {
            request::SEND_MESSAGE | request::SEND_MESSAGE_V2 | request::SEND_BATCH_MESSAGE => {
                send::send(s, channel, &req).await
            }
            request::SEND_REPLY_MESSAGE | request::SEND_REPLY_MESSAGE_V2 => {
                reply::send_reply(&self.replies, channel, &req).await
            }
            request::CONSUMER_SEND_MSG_BACK => send::send_back(s, channel, &req).await,
            request::PULL_MESSAGE | request::LITE_PULL_MESSAGE => {
                pull::pull(&self.pull, &req).await
            }
            request::POP_MESSAGE => pop::pop(&self.pop, &req).await,
            request::ACK_MESSAGE => pop::ack(&self.pop, &req).await,
            request::BATCH_ACK_MESSAGE => pop::batch_ack(&self.pop, &req).await,
            request::CHANGE_MESSAGE_INVISIBLETIME => pop::change_invisible(&self.pop, &req).await,
            request::NOTIFICATION => pop::notification(&self.pop, &req).await,
            request::POLLING_INFO => pop::polling_info(&req),
            request::POP_STATUS => pop::status(&self.pop),
            request::HEART_BEAT => client::heartbeat(c, channel, &req).await,
            request::QUERY_ASSIGNMENT => assignment::query_assignment(c, &req).await,
            request::SET_MESSAGE_REQUEST_MODE => {
                assignment::set_message_request_mode(c, &req).await
            }
            request::UNREGISTER_CLIENT => client::unregister_client(c, channel, &req),
            request::CHECK_CLIENT_CONFIG => client::check_client_config(c, &req),
            request::GET_CONSUMER_LIST_BY_GROUP => client::consumer_list(c, &req),
            request::QUERY_CONSUMER_OFFSET => client::query_consumer_offset(c, &req),
            request::UPDATE_CONSUMER_OFFSET => client::update_consumer_offset(c, &req),
            request::GET_MAX_OFFSET => client::max_offset(c, &req),
            request::GET_MIN_OFFSET => client::min_offset(c, &req),
            request::GET_EARLIEST_MSG_STORETIME => client::earliest_msg_storetime(c, &req),
            request::SEARCH_OFFSET_BY_TIMESTAMP => client::search_offset(c, &req),
            request::LOCK_BATCH_MQ => client::lock_batch(c, &req),
            request::UNLOCK_BATCH_MQ => client::unlock_batch(c, &req),
            request::END_TRANSACTION => {
                transaction::end_transaction(&self.transactions, channel, &req).await
            }
            request::LIST_TRANSACTIONS => {
                transaction::list_transactions(&self.transactions, &req).await
            }
            request::LEDGER_STATUS => ledger_admin::ledger_status(a),
            request::LEDGER_TRANSFER => ledger_admin::ledger_transfer(a, &req).await,
            request::UPDATE_AND_CREATE_TOPIC => admin::create_topic(a, &req).await,
            request::DELETE_TOPIC_IN_BROKER => admin::delete_topic(a, &req),
            request::GET_ALL_TOPIC_CONFIG => admin::all_topic_config(a),
            request::GET_TOPIC_CONFIG => admin::topic_config(a, &req),
            request::GET_BROKER_RUNTIME_INFO => admin::runtime_info(a),
            request::CLEAN_EXPIRED_CONSUMEQUEUE => admin::clean_expired_consume_queues(a),
            request::GET_BROKER_CONFIG => config_admin::broker_config(a),
            request::UPDATE_BROKER_CONFIG => config_admin::update_broker_config(a, &req).await,
            request::GET_TOPIC_STATS_INFO => admin::topic_stats(a, &req),
            request::GET_CONSUME_STATS => admin::consume_stats(a, &req),
            request::GET_CONSUMER_CONNECTION_LIST => admin::consumer_connections(a, &req),
            request::QUERY_MESSAGE => admin::query_message(a, &req),
            request::VIEW_MESSAGE_BY_ID => admin::view_message(a, &req),
            request::GET_ALL_CONSUMER_OFFSET => admin::all_consumer_offsets(a),
            request::GET_ALL_DELAY_OFFSET => admin::all_delay_offsets(a),
            request::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => admin::all_subscription_groups(a),
            request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
                admin::create_subscription_group(a, &req).await
            }
            request::DELETE_SUBSCRIPTIONGROUP => admin::delete_subscription_group(a, &req),
            request::INVOKE_BROKER_TO_RESET_OFFSET => offsets_admin::reset_offset(a, &req),
            request::GET_PRODUCER_CONNECTION_LIST => {
                connections_admin::producer_connections(a, &req)
            }
            request::CLONE_GROUP_OFFSET => queue_admin::clone_group_offset(a, &req),
            request::VIEW_BROKER_STATS_DATA => stats_admin::view_broker_stats_data(a, &req),
            request::QUERY_CONSUME_QUEUE => queue_admin::query_consume_queue(a, &req),
            request::QUERY_TOPIC_CONSUME_BY_WHO => queue_admin::topic_consume_by_who(a, &req),
            3001..=3010 => auth_admin::handle(&self.auth, &req).await,
            request::AUTH_METADATA_SYNC => {
                auth_admin::sync_answer(&self.auth, channel, &req, &s.stats.metrics)
            }
            request::GET_CONSUMER_RUNNING_INFO => {
                connections_admin::consumer_running_info(a, &req).await
            }
            _ => RemotingCommand::not_supported(&req),
        }
    }
}
