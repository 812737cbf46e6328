//! ReceiveMessage, AckMessage, ChangeInvisibleDuration and
//! ForwardMessageToDeadLetterQueue over the broker's POP interface.
//!
//! The receipt handle a client gets is the broker's POP handle with the
//! message's commit-log offset after a `|` (RocketMQ's proxy appends the
//! same to its handles): forwarding to the DLQ needs the stored message.

use std::time::Duration;

use basalt_auth::grpc::GrpcIdentity;
use basalt_broker::pop::{PopRequest, PoppedMessage};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, ConsumerSendMsgBackRequestHeader};
use basalt_remoting::{RemotingCommand, RequestProcessor};

use crate::clients::Session;
use crate::convert::{self, Delivery};
use crate::pb::{self, Code};
use crate::service::Messaging;
use crate::status::{self, status};

/// Shortest and longest invisible time a receive may ask for (the proxy's
/// bounds).
const MIN_INVISIBLE: Duration = Duration::from_secs(10);
const MAX_INVISIBLE: Duration = Duration::from_secs(12 * 3600);
/// The invisible time of a receive with `auto_renew` (a PushConsumer's):
/// the proxy's `defaultInvisibleTimeMills`. Unlike the proxy, Basalt does
/// not renew it while the client consumes (docs/grpc.md).
const AUTO_RENEW_INVISIBLE: Duration = Duration::from_secs(60);
/// Longest long polling a receive may ask for.
const MAX_POLLING: Duration = Duration::from_secs(30);
/// How long before the call's deadline a long poll ends, for its answer
/// to travel back.
const REPLY_MARGIN: Duration = Duration::from_millis(500);
/// Long polling when the request names none and its call has no deadline.
const DEFAULT_POLLING: Duration = Duration::from_secs(20);
/// Bounds of the long polling derived from a call's deadline (the proxy's
/// `grpcClientConsumerMin/MaxLongPollingTimeoutMillis` defaults).
const MIN_DERIVED_POLLING: Duration = Duration::from_secs(5);
const MAX_DERIVED_POLLING: Duration = Duration::from_secs(20);
/// A client's request timeout until its settings say (the SDKs' default).
/// The Go SDK receives before it sends its settings (a second after it
/// starts); taking none would poll to the very end of the call.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// A client's receipt handle: the broker's, and the message's log offset.
pub fn client_handle(broker_handle: &str, commit_log_offset: i64) -> String {
    format!("{broker_handle}|{commit_log_offset}")
}

/// Splits a client's receipt handle (a bare broker handle, without the
/// offset, is taken too).
pub fn split_handle(h: &str) -> (&str, Option<i64>) {
    match h.rsplit_once('|') {
        Some((b, off)) => match off.parse() {
            Ok(o) => (b, Some(o)),
            Err(_) => (h, None),
        },
        None => (h, None),
    }
}

/// The time a call's `grpc-timeout` header gives it (gRPC's format: up to
/// eight digits and a unit, H M S m u n), when there is one.
pub fn grpc_timeout<T>(req: &tonic::Request<T>) -> Option<Duration> {
    let v = req.metadata().get("grpc-timeout")?.to_str().ok()?;
    parse_grpc_timeout(v)
}

fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The long polling of a receive that names none, as the proxy derives it:
/// the call's time left less half the client's request timeout (the
/// default one until its settings came), within 5..20 s and never past
/// the deadline (too little time left is ILLEGAL_POLLING_TIME). The Go SDK
/// sends no long polling time, only a deadline of its await duration plus
/// its request timeout.
fn derived_polling(
    session: Option<&Session>,
    deadline: Option<Duration>,
) -> Result<Duration, pb::Status> {
    let Some(left) = deadline else {
        return Ok(DEFAULT_POLLING);
    };
    let request_timeout = session
        .and_then(|s| {
            let settings = s.settings.lock();
            settings
                .as_ref()?
                .request_timeout
                .as_ref()
                .and_then(convert::duration)
        })
        .unwrap_or(DEFAULT_REQUEST_TIMEOUT);
    let poll = left
        .saturating_sub(request_timeout / 2)
        .clamp(MIN_DERIVED_POLLING, MAX_DERIVED_POLLING);
    if poll <= left {
        Ok(poll)
    } else if left >= MIN_DERIVED_POLLING {
        Ok(left)
    } else {
        Err(status(
            Code::IllegalPollingTime,
            format!(
                "the call's deadline leaves {} ms, less than the {} ms a receive polls at least",
                left.as_millis(),
                MIN_DERIVED_POLLING.as_millis()
            ),
        ))
    }
}

pub(crate) fn name(r: &Option<pb::Resource>) -> &str {
    r.as_ref().map_or("", |r| r.name.as_str())
}

/// The frames of one receive: each message, then the status (the SDKs read
/// them all before they look at the status).
pub type Frames = Vec<pb::ReceiveMessageResponse>;

pub(crate) fn frame_status(s: pb::Status) -> pb::ReceiveMessageResponse {
    pb::ReceiveMessageResponse {
        content: Some(pb::receive_message_response::Content::Status(s)),
    }
}

impl Messaging {
    /// Checks a receive and turns it into a POP request.
    fn pop_request(
        &self,
        session: Option<&Session>,
        req: &pb::ReceiveMessageRequest,
        deadline: Option<Duration>,
    ) -> Result<PopRequest, pb::Status> {
        let group = name(&req.group).to_string();
        if let Err(e) = basalt_common::topic::validate_group(&group) {
            return Err(status(Code::IllegalConsumerGroup, e.to_string()));
        }
        let mq = req.message_queue.as_ref();
        let topic = mq.map_or("", |q| name(&q.topic)).to_string();
        if let Err(e) = basalt_common::topic::validate_topic(&topic) {
            return Err(status(Code::IllegalTopic, e.to_string()));
        }
        // A PushConsumer asks the broker to keep its messages invisible
        // (auto_renew) and names no time: the proxy takes its default.
        let asked = match req.auto_renew {
            true => Some(AUTO_RENEW_INVISIBLE),
            false => req.invisible_duration.as_ref().and_then(convert::duration),
        };
        let invisible = match asked {
            Some(d) if (MIN_INVISIBLE..=MAX_INVISIBLE).contains(&d) => d,
            Some(d) => {
                return Err(status(
                    Code::IllegalInvisibleTime,
                    format!(
                        "the invisible time {} ms must be within [{}, {}] ms",
                        d.as_millis(),
                        MIN_INVISIBLE.as_millis(),
                        MAX_INVISIBLE.as_millis()
                    ),
                ));
            }
            None => {
                return Err(status(
                    Code::IllegalInvisibleTime,
                    "the invisible time is required",
                ));
            }
        };
        let poll = match req.long_polling_timeout.as_ref() {
            Some(d) => convert::duration(d).ok_or_else(|| {
                status(
                    Code::IllegalPollingTime,
                    "the long polling time cannot be negative",
                )
            })?,
            None => derived_polling(session, deadline)?,
        };
        // Never poll past the caller's deadline: what a late POP took would
        // stay invisible with nobody to read it. End a little before it, so
        // that an empty answer reaches the client before it gives up (the
        // Rust SDK's deadline is its long polling time itself; polling to
        // the very end made every empty receive a CANCELLED).
        let poll = match deadline {
            Some(left) => poll.min(left.saturating_sub(REPLY_MARGIN)),
            None => poll,
        };
        let (expression_type, expression) = match req.filter_expression.as_ref() {
            Some(f) if f.r#type == pb::FilterType::Sql as i32 => {
                ("SQL92".to_string(), f.expression.clone())
            }
            Some(f) if !f.expression.trim().is_empty() => ("TAG".to_string(), f.expression.clone()),
            _ => ("TAG".to_string(), "*".to_string()),
        };
        // The group's order decides, as in the proxy (whose settings merge
        // the group's consumeMessageOrderly in): the SDKs do not say fifo
        // themselves, and the Go SDK may receive before it sent settings.
        let fifo = session.is_some_and(Session::fifo)
            || self.broker.group_view(&group).is_some_and(|g| g.orderly);
        Ok(PopRequest {
            group,
            topic,
            // Every readable queue, whatever queue the request names: the
            // proxy keeps only the broker of the request's queue and pops
            // its "broker acting" queue (-1). The Go SDK names the next
            // queue of the route in each receive; popping only that one
            // left messages on the others waiting a poll per queue.
            queue_id: None,
            max_messages: req.batch_size.clamp(1, 32) as u32,
            invisible,
            poll_timeout: poll.min(MAX_POLLING),
            expression_type,
            expression,
            fifo,
            attempt_id: req.attempt_id.clone(),
        })
    }

    /// ReceiveMessage: pops up to the batch size, waiting up to the long
    /// polling time for the first message (and never past `deadline`, the
    /// time the caller gave the call: its `grpc-timeout`).
    pub async fn receive(
        &self,
        session: Option<&Session>,
        req: pb::ReceiveMessageRequest,
        deadline: Option<Duration>,
    ) -> Frames {
        let pop = match self.pop_request(session, &req, deadline) {
            Ok(p) => p,
            Err(s) => return vec![frame_status(s)],
        };
        if self.broker.topics().get(&pop.topic).is_none() {
            return vec![frame_status(status(
                Code::TopicNotFound,
                format!("topic {} not found", pop.topic),
            ))];
        }
        let invisible = pop.invisible;
        let topic = pop.topic.clone();
        let popped = match self.broker.pop(pop).await {
            Ok(m) => m,
            Err(e) => return vec![frame_status(status::from_pop(&e))],
        };
        if popped.is_empty() {
            return vec![frame_status(status(
                Code::MessageNotFound,
                "no new message",
            ))];
        }
        let mut frames = Vec::with_capacity(popped.len() + 2);
        frames.push(pb::ReceiveMessageResponse {
            content: Some(pb::receive_message_response::Content::DeliveryTimestamp(
                convert::timestamp(basalt_common::time::now_millis()),
            )),
        });
        for m in &popped {
            frames.push(pb::ReceiveMessageResponse {
                content: Some(pb::receive_message_response::Content::Message(
                    self.popped_to_pb(&topic, m, invisible),
                )),
            });
        }
        frames.push(frame_status(status::ok()));
        frames
    }

    fn popped_to_pb(&self, topic: &str, m: &PoppedMessage, invisible: Duration) -> pb::Message {
        let handle = client_handle(&m.receipt_handle, m.message.physical_offset);
        let origin = if m.origin_topic.is_empty() {
            topic
        } else {
            m.origin_topic.as_str()
        };
        convert::to_pb(
            &m.message,
            &Delivery {
                topic: origin,
                receipt_handle: &handle,
                delivery_attempt: m.delivery_attempt as i32,
                invisible: Some(invisible),
                body_limit: self.broker.config().max_message_size,
            },
        )
    }

    /// AckMessage: each entry in turn.
    pub async fn ack(&self, req: pb::AckMessageRequest) -> pb::AckMessageResponse {
        let group = name(&req.group).to_string();
        let topic = name(&req.topic).to_string();
        if req.entries.is_empty() {
            return pb::AckMessageResponse {
                status: Some(status(Code::BadRequest, "no entry to ack")),
                entries: Vec::new(),
            };
        }
        let mut entries = Vec::with_capacity(req.entries.len());
        for e in &req.entries {
            let (handle, _) = split_handle(&e.receipt_handle);
            let s = if handle.is_empty() {
                status(Code::InvalidReceiptHandle, "receipt handle cannot be empty")
            } else {
                match self.broker.ack(&group, &topic, handle).await {
                    Ok(()) => status::ok(),
                    Err(err) => status::from_pop(&err),
                }
            };
            entries.push(pb::AckMessageResultEntry {
                message_id: e.message_id.clone(),
                receipt_handle: e.receipt_handle.clone(),
                status: Some(s),
            });
        }
        let overall = status::overall(entries.iter().filter_map(|e| e.status.as_ref()));
        pb::AckMessageResponse {
            status: Some(overall),
            entries,
        }
    }

    /// ChangeInvisibleDuration: a new invisible time from now, and the new
    /// receipt handle.
    pub async fn change_invisible(
        &self,
        req: pb::ChangeInvisibleDurationRequest,
    ) -> pb::ChangeInvisibleDurationResponse {
        let failed = |s| pb::ChangeInvisibleDurationResponse {
            status: Some(s),
            receipt_handle: String::new(),
        };
        let Some(d) = req.invisible_duration.as_ref().and_then(convert::duration) else {
            return failed(status(
                Code::IllegalInvisibleTime,
                "the invisible duration is required",
            ));
        };
        if d > MAX_INVISIBLE {
            return failed(status(
                Code::IllegalInvisibleTime,
                format!(
                    "the invisible time must be at most {} ms",
                    MAX_INVISIBLE.as_millis()
                ),
            ));
        }
        let (handle, offset) = split_handle(&req.receipt_handle);
        if handle.is_empty() {
            return failed(status(
                Code::InvalidReceiptHandle,
                "receipt handle cannot be empty",
            ));
        }
        match self
            .broker
            .change_invisible(name(&req.group), name(&req.topic), handle, d)
            .await
        {
            Ok(new) => pb::ChangeInvisibleDurationResponse {
                status: Some(status::ok()),
                receipt_handle: match offset {
                    Some(o) => client_handle(&new, o),
                    None => new,
                },
            },
            Err(e) => failed(status::from_pop(&e)),
        }
    }

    /// ForwardMessageToDeadLetterQueue: the message goes to the group's
    /// DLQ (the broker's send-back with a negative delay level), then is
    /// acked.
    pub async fn forward_to_dlq(
        &self,
        session: &Session,
        id: &GrpcIdentity,
        req: pb::ForwardMessageToDeadLetterQueueRequest,
    ) -> pb::Status {
        let group = name(&req.group).to_string();
        let topic = name(&req.topic).to_string();
        let (handle, offset) = split_handle(&req.receipt_handle);
        let Some(offset) = offset else {
            return status(
                Code::InvalidReceiptHandle,
                "receipt handle does not name a stored message",
            );
        };
        let header = ConsumerSendMsgBackRequestHeader {
            offset,
            group: group.clone(),
            delay_level: -1,
            origin_msg_id: Some(req.message_id.clone()),
            origin_topic: Some(topic.clone()),
            unit_mode: None,
            max_reconsume_times: Some(req.max_delivery_attempts),
        };
        let mut cmd =
            RemotingCommand::request(request::CONSUMER_SEND_MSG_BACK).with_ext(header.to_ext());
        id.sign(&mut cmd);
        match self.processor.process(&session.channel, cmd).await {
            Some(r) if r.code == response::SUCCESS => {}
            Some(r) => return status::from_remoting(r.code, r.remark.as_deref()),
            None => return status(Code::InternalServerError, "the broker gave no answer"),
        }
        match self.broker.ack(&group, &topic, handle).await {
            Ok(()) => status::ok(),
            Err(e) => status::from_pop(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeouts_parse() {
        assert_eq!(
            parse_grpc_timeout("7999m"),
            Some(Duration::from_millis(7999))
        );
        assert_eq!(parse_grpc_timeout("8S"), Some(Duration::from_secs(8)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("250u"), Some(Duration::from_micros(250)));
        for bad in ["", "m", "5", "5x", "123456789S", "-5S", "5 S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn polling_derived_from_the_deadline() {
        // No deadline: the default.
        assert_eq!(derived_polling(None, None).ok(), Some(DEFAULT_POLLING));
        // The Go SDK's 5 s await + 3 s request timeout, before its
        // settings came: half the default request timeout is kept back.
        let left = Duration::from_secs(8);
        let poll = Duration::from_millis(6500);
        assert_eq!(derived_polling(None, Some(left)).ok(), Some(poll));
        // Little time left: the least polling, if the deadline allows it.
        let left = Duration::from_millis(5500);
        assert_eq!(
            derived_polling(None, Some(left)).ok(),
            Some(MIN_DERIVED_POLLING)
        );
        let long = Duration::from_secs(60);
        assert_eq!(
            derived_polling(None, Some(long)).ok(),
            Some(MAX_DERIVED_POLLING)
        );
        // Less than the least polling left: refused.
        let short = Duration::from_secs(2);
        let refused = derived_polling(None, Some(short)).err().map(|s| s.code);
        assert_eq!(refused, Some(Code::IllegalPollingTime as i32));
    }

    #[test]
    fn handles_split_back() {
        let h = client_handle("0 1700000000000 60000 0 0 broker-a 3 17", 4096);
        assert_eq!(
            split_handle(&h),
            ("0 1700000000000 60000 0 0 broker-a 3 17", Some(4096))
        );
        assert_eq!(split_handle("plain"), ("plain", None));
        assert_eq!(split_handle("a|b"), ("a|b", None));
    }
}
