//! The Telemetry stream: a client sends its Settings first and gets the
//! broker's back (the settings sync the SDKs wait for at start); the broker
//! sends transaction check-backs to producers over it
//! (RecoverOrphanedTransactionCommand).

use std::sync::Arc;
use std::time::Duration;

use basalt_common::record::RecordView;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::request;
use basalt_remoting::header::{CheckTransactionStateRequestHeader, CommandHeader};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::access::{self, Caller};
use crate::clients::Session;
use crate::convert::{self, Delivery};
use crate::pb::{self, TelemetryCommand, settings::PubSub, telemetry_command::Command};
use crate::service::Messaging;
use crate::status::{self, status};
use crate::transactions::{HalfPlace, OpenTransactions};

/// Frames queued toward one client before the sender waits.
const OUTBOUND: usize = 64;

/// A producer's send retries as the proxy issues them (ProxyConfig's
/// `grpcClientProducerMaxAttempts` 3, backoff 10 ms doubling up to 1 s).
/// Every SDK takes it; the Node.js SDK sends none of its own and fails on
/// settings without one.
fn producer_backoff() -> pb::RetryPolicy {
    pb::RetryPolicy {
        max_attempts: 3,
        strategy: Some(pb::retry_policy::Strategy::ExponentialBackoff(
            pb::ExponentialBackoff {
                initial: Some(convert::pb_duration(Duration::from_millis(10))),
                max: Some(convert::pb_duration(Duration::from_secs(1))),
                multiplier: 2.0,
            },
        )),
    }
}

/// `retryMaxTimes` of a group the broker does not know (RocketMQ's
/// SubscriptionGroupConfig default).
const DEFAULT_RETRY_MAX_TIMES: i32 = 16;

impl Messaging {
    /// The settings the broker answers a client's with: the client's own,
    /// with what the broker decides (body size limit, a consumer group's
    /// attempts and order), as RocketMQ's proxy merges them.
    fn answer_settings(&self, mut s: pb::Settings) -> pb::Settings {
        match s.pub_sub.as_mut() {
            Some(PubSub::Publishing(p)) => {
                p.max_body_size =
                    i32::try_from(self.broker.live_max_message_size()).unwrap_or(i32::MAX);
                p.validate_message_type = false;
                s.backoff_policy = Some(producer_backoff());
            }
            Some(PubSub::Subscription(sub)) => {
                let group = sub
                    .group
                    .as_ref()
                    .map(|g| g.name.clone())
                    .unwrap_or_default();
                let view = self.broker.group_view(&group);
                let orderly = view.is_some_and(|v| v.orderly);
                sub.fifo = Some(sub.fifo.unwrap_or(false) || orderly);
                sub.receive_batch_size = Some(32);
                sub.long_polling_timeout = Some(convert::pb_duration(Duration::from_secs(20)));
                let retry_max_times = view.map_or(DEFAULT_RETRY_MAX_TIMES, |v| v.retry_max_times);
                s.backoff_policy = Some(self.consumer_backoff(retry_max_times));
            }
            None => {}
        }
        s.metric = Some(pb::Metric {
            on: false,
            endpoints: None,
        });
        s
    }

    /// A consumer group's retry policy as the proxy issues it: attempts
    /// from the group's `retryMaxTimes` (+1 for the first delivery), and
    /// the waits between them from the broker's delay levels (the proxy's
    /// default CustomizedRetryPolicy is the same 1s 5s 10s ... 2h ladder).
    /// The Java PushConsumer refuses settings without a strategy.
    fn consumer_backoff(&self, retry_max_times: i32) -> pb::RetryPolicy {
        let next = self
            .broker
            .config()
            .delay_levels()
            .0
            .iter()
            .map(|&ms| convert::pb_duration(Duration::from_millis(ms.max(0) as u64)))
            .collect();
        pb::RetryPolicy {
            max_attempts: retry_max_times.saturating_add(1),
            strategy: Some(pb::retry_policy::Strategy::CustomizedBackoff(
                pb::CustomizedBackoff { next },
            )),
        }
    }

    /// Handles one command a client sent on its stream.
    async fn on_client_command(
        &self,
        session: &Arc<Session>,
        caller: &Caller,
        cmd: TelemetryCommand,
    ) {
        match cmd.command {
            Some(Command::Settings(s)) => {
                let answer = match self.authorize_caller("Telemetry", caller, access::settings(&s))
                {
                    Ok(id) => {
                        *session.settings.lock() = Some(s.clone());
                        self.clients.register_producer(session, &id).await;
                        TelemetryCommand {
                            status: Some(status::ok()),
                            command: Some(Command::Settings(self.answer_settings(s))),
                        }
                    }
                    // Refused: nothing registered, and the status says
                    // why; the settings still come back (a publisher's with
                    // the size limit, a subscriber's as sent, without the
                    // group's), so the SDK's start does not hang waiting
                    // for them and each later call meets its own check.
                    Err(st) => {
                        let back = match s.pub_sub {
                            Some(PubSub::Publishing(_)) => self.answer_settings(s),
                            _ => s,
                        };
                        TelemetryCommand {
                            status: Some(st),
                            command: Some(Command::Settings(back)),
                        }
                    }
                };
                let tx = session.telemetry.lock().clone();
                if let Some(tx) = tx {
                    let _ = tx.send(Ok(answer)).await;
                }
            }
            Some(Command::ThreadStackTrace(t)) => {
                tracing::info!(client = %session.client_id, nonce = %t.nonce, "thread stack trace from a gRPC client:\n{}", t.thread_stack_trace.unwrap_or_default());
            }
            Some(Command::VerifyMessageResult(r)) => {
                tracing::info!(client = %session.client_id, nonce = %r.nonce, status = ?cmd.status, "message verification result");
            }
            other => {
                tracing::debug!(client = %session.client_id, command = ?other.map(|_| ()), "telemetry command ignored");
            }
        }
    }

    /// Telemetry: reads the client's commands until its stream ends; the
    /// returned receiver is what the broker sends it.
    pub fn telemetry(
        &self,
        session: Arc<Session>,
        caller: Caller,
        mut inbound: tonic::Streaming<TelemetryCommand>,
    ) -> mpsc::Receiver<Result<TelemetryCommand, tonic::Status>> {
        let (tx, rx) = mpsc::channel(OUTBOUND);
        *session.telemetry.lock() = Some(tx);
        let me = self.clone();
        tokio::spawn(async move {
            while let Some(next) = inbound.next().await {
                match next {
                    Ok(cmd) => {
                        session.touch();
                        me.on_client_command(&session, &caller, cmd).await;
                    }
                    Err(e) => {
                        tracing::debug!(client = %session.client_id, error = %e, "telemetry stream failed");
                        break;
                    }
                }
            }
            session.telemetry.lock().take();
        });
        rx
    }
}

/// A command the broker sent to a client's channel: a transaction
/// check-back goes to the producer as a RecoverOrphanedTransactionCommand
/// on its telemetry stream; anything else is dropped (5.x clients have no
/// use for remoting notifications).
pub fn on_broker_command(
    txs: &Arc<OpenTransactions>,
    session: Arc<Session>,
    cmd: RemotingCommand,
    body_limit: usize,
) {
    if cmd.code != request::CHECK_TRANSACTION_STATE {
        return;
    }
    let Some(tx) = session.telemetry.lock().clone() else {
        tracing::warn!(client = %session.client_id, "transaction check-back for a gRPC producer without a telemetry stream");
        return;
    };
    let h = match CheckTransactionStateRequestHeader::from_ext(&cmd.ext_fields) {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(error = %e, "unreadable transaction check-back");
            return;
        }
    };
    let body: Vec<u8> = if cmd.body_parts.is_empty() {
        cmd.body.to_vec()
    } else {
        std::iter::once(&cmd.body)
            .chain(cmd.body_parts.iter())
            .flat_map(|b| b.iter().copied())
            .collect()
    };
    let view = match RecordView::parse(&body, false) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "unreadable transaction check-back body");
            return;
        }
    };
    let stored = view.to_message();
    let txid = h.transaction_id.clone().unwrap_or_default();
    let producer_group = stored
        .property(basalt_common::constants::property::PGROUP)
        .unwrap_or_else(|| stored.topic.clone());
    txs.put(
        txid.clone(),
        HalfPlace {
            producer_group,
            commit_log_offset: h.commit_log_offset,
            tran_state_table_offset: h.tran_state_table_offset,
        },
    );
    let message = convert::to_pb(
        &stored,
        &Delivery {
            topic: &stored.topic,
            receipt_handle: "",
            delivery_attempt: 1,
            invisible: None,
            body_limit,
        },
    );
    let command = TelemetryCommand {
        status: Some(status(pb::Code::Ok, "OK")),
        command: Some(Command::RecoverOrphanedTransactionCommand(
            pb::RecoverOrphanedTransactionCommand {
                message: Some(message),
                transaction_id: txid,
            },
        )),
    };
    tokio::spawn(async move {
        if tx.send(Ok(command)).await.is_err() {
            tracing::debug!(client = %session.client_id, "telemetry stream closed before a check-back");
        }
    });
}
