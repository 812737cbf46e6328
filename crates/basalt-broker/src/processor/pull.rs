//! PULL_MESSAGE / LITE_PULL_MESSAGE with long polling (docs/protocol.md#pull).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use basalt_common::constants::perm;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use basalt_remoting::header::{CommandHeader, PullMessageRequestHeader, PullMessageResponseHeader};
use basalt_remoting::protocol::MessageModel;
use basalt_store::{GetMessageRequest, GetMessageResult, GetMessageStatus, MessageFilter};
use bytes::{Bytes, BytesMut};

use super::error;
use super::paths::PullPath;
use crate::filter::{FilterError, SubscriptionFilter};

/// PullSysFlag bits.
pub mod pull_flag {
    pub const COMMIT_OFFSET: i32 = 0x1;
    pub const SUSPEND: i32 = 0x2;
    pub const SUBSCRIPTION: i32 = 0x4;
}

/// The checked parts of a pull request.
struct PullPlan {
    h: PullMessageRequestHeader,
    filter: Arc<SubscriptionFilter>,
    which_broker_when_slow: i64,
    group_broker_id: i64,
}

/// The filter of the subscription the consumer registered with its
/// heartbeat (a pull without the SUBSCRIPTION flag), checked as Java does.
fn registered_filter(
    p: &PullPath,
    h: &PullMessageRequestHeader,
    broadcast_enabled: bool,
) -> Result<Arc<SubscriptionFilter>, RemotingCommand> {
    let Some((model, sub)) = p.clients.pull_view(&h.consumer_group, &h.topic) else {
        return Err(error(
            response::SUBSCRIPTION_NOT_EXIST,
            format!(
                "the consumer's group info not exist, group: {}",
                h.consumer_group
            ),
        ));
    };
    if !broadcast_enabled && model == MessageModel::Broadcasting {
        return Err(error(
            response::NO_PERMISSION,
            format!(
                "the consumer group[{}] can not consume by broadcast way",
                h.consumer_group
            ),
        ));
    }
    let Some(sub) = sub else {
        return Err(error(
            response::SUBSCRIPTION_NOT_EXIST,
            format!(
                "the consumer's subscription not exist, group: {}",
                h.consumer_group
            ),
        ));
    };
    if sub.version < h.sub_version {
        return Err(error(
            response::SUBSCRIPTION_NOT_LATEST,
            "the consumer's subscription not latest",
        ));
    }
    sub.filter.map_err(|e| parse_failed(&sub.expression, &e))
}

fn plan_pull(p: &PullPath, req: &RemotingCommand) -> Result<PullPlan, RemotingCommand> {
    let h = PullMessageRequestHeader::from_ext(&req.ext_fields).map_err(super::bad_header)?;
    super::checks::group(&h.consumer_group)?;
    super::checks::any_topic(&h.topic)?;
    if !perm::is_readable(p.live.broker_permission()) {
        return Err(error(
            response::NO_PERMISSION,
            format!(
                "the p[{}] pulling message is forbidden",
                p.config.broker_addr()
            ),
        ));
    }
    let g = p
        .groups
        .get_or_create(&h.consumer_group, p.live.auto_create_subscription_group())
        .map_err(|e| error(response::SUBSCRIPTION_GROUP_NOT_EXIST, e.to_string()))?;
    if !g.consume_enable {
        return Err(error(
            response::NO_PERMISSION,
            format!("subscription group no permission, {}", h.consumer_group),
        ));
    }
    let Some(t) = p
        .topics
        .get(&h.topic)
        .or_else(|| super::checks::replicated_topic(&p.store, &p.replication, &h.topic))
    else {
        return Err(error(
            response::TOPIC_NOT_EXIST,
            format!("topic[{}] not exist, apply first please!", h.topic),
        ));
    };

    if !perm::is_readable(t.perm) {
        return Err(error(
            response::NO_PERMISSION,
            format!("the topic[{}] pulling message is forbidden", h.topic),
        ));
    }
    if h.queue_id < 0 || h.queue_id >= t.read_queue_nums {
        return Err(error(
            response::SYSTEM_ERROR,
            format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[{}]",
                h.queue_id, h.topic, t.read_queue_nums, h.consumer_group
            ),
        ));
    }
    let filter = if h.sys_flag & pull_flag::SUBSCRIPTION != 0 {
        own_filter(p, &h)?
    } else {
        registered_filter(p, &h, g.consume_broadcast_enable)?
    };
    if filter.is_property_filter() && !p.config.enable_property_filter {
        return Err(error(
            response::SYSTEM_ERROR,
            "The broker does not support consumer to filter message by SQL92",
        ));
    }
    Ok(PullPlan {
        which_broker_when_slow: g.which_broker_when_consume_slowly,
        group_broker_id: g.broker_id,
        h,
        filter,
    })
}

/// The filter of a pull that carries its own expression (lite pull, pull
/// consumers): TAG expressions are parsed on the spot, SQL92 selectors come
/// from the broker's cache of compiled ones.
fn own_filter(
    p: &PullPath,
    h: &PullMessageRequestHeader,
) -> Result<Arc<SubscriptionFilter>, RemotingCommand> {
    let expr_type = h.expression_type.as_deref().unwrap_or(crate::filter::TAG);
    let expression = h.subscription.as_deref().unwrap_or("*");
    let compiled = if expr_type == crate::filter::SQL92 {
        p.filter_cache.sql92(expression)
    } else {
        SubscriptionFilter::compile(expr_type, expression).map(Arc::new)
    };
    compiled.map_err(|e| parse_failed(expression, &e))
}

/// SUBSCRIPTION_PARSE_FAILED naming what is wrong and where.
fn parse_failed(expression: &str, e: &FilterError) -> RemotingCommand {
    tracing::debug!(expression, error = %e, "pull refused: subscription does not compile");
    error(
        response::SUBSCRIPTION_PARSE_FAILED,
        format!("parse the consumer's subscription failed: {e}"),
    )
}

/// Handles a pull: answers at once when there is something to say, or holds
/// the request until a message arrives or the suspend time passes.
pub async fn pull(p: &PullPath, req: &RemotingCommand) -> RemotingCommand {
    let mut plan = match plan_pull(p, req) {
        Ok(plan) => plan,
        Err(resp) => return resp,
    };
    let h = &plan.h;
    let may_commit = p.replication.is_writable();
    if h.sys_flag & pull_flag::COMMIT_OFFSET != 0 && may_commit && h.commit_offset >= 0 {
        p.offsets
            .commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
    }
    let suspend = h.sys_flag & pull_flag::SUSPEND != 0;
    let hold = if p.live.long_polling_enable() {
        // A client may ask to be held for as long as it likes; the broker
        // holds no longer than its own limit.
        Duration::from_millis(h.suspend_timeout_millis.max(0) as u64)
            .min(p.live.max_long_polling_suspend())
    } else {
        p.live.short_polling_time()
    };
    let deadline = Instant::now() + hold;
    let notify = p.waiters.notify_for(&h.topic, h.queue_id);
    let queue_offset = h.queue_offset;
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let started = Instant::now();
        let result = get(p, &plan);
        let waiting_helps = result.status == GetMessageStatus::OffsetOverflowOne
            || result.status == GetMessageStatus::OffsetFoundNull
            || (result.status == GetMessageStatus::NoMessageInQueue && queue_offset == 0)
            || (result.status == GetMessageStatus::NoMatchedLogicQueue && queue_offset == 0);
        let now = Instant::now();
        if suspend && waiting_helps && now < deadline && !p.shutting_down.load(Ordering::Acquire) {
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep(deadline - now) => {}
            }
            // A held pull is planned again when it wakes, as Java runs the
            // request again: the group's subscription (its filter) may have
            // changed while it was held.
            plan = match plan_pull(p, req) {
                Ok(plan) => plan,
                Err(resp) => return resp,
            };
            if Instant::now() < deadline {
                continue;
            }
            // Time is up: one last look, then answer whatever it says.
            let started = Instant::now();
            let result = get(p, &plan);
            return respond(p, &plan, result, started);
        }
        return respond(p, &plan, result, started);
    }
}

fn get(p: &PullPath, plan: &PullPlan) -> GetMessageResult {
    let h = &plan.h;
    let filter: Option<&dyn MessageFilter> = if plan.filter.matches_all() {
        None
    } else {
        Some(&*plan.filter)
    };
    p.store.get_message(
        &GetMessageRequest {
            topic: &h.topic,
            queue_id: h.queue_id,
            offset: h.queue_offset,
            max_msgs: h.max_msg_nums.clamp(1, 1024) as usize,
            max_bytes: h.max_msg_bytes.filter(|b| *b > 0).map(|b| b as usize),
            correct_offsets: p.replication.is_writable() || p.config.offset_check_in_slave,
        },
        filter,
    )
}

/// Answers a pull with what `get` found; `started` is when that read
/// began (the pull latency Java's GROUP_GET_LATENCY counts).
fn respond(
    p: &PullPath,
    plan: &PullPlan,
    r: GetMessageResult,
    started: Instant,
) -> RemotingCommand {
    let h = &plan.h;
    let mut code = match r.status {
        GetMessageStatus::Found => response::SUCCESS,
        GetMessageStatus::MessageWasRemoving | GetMessageStatus::NoMatchedMessage => {
            response::PULL_RETRY_IMMEDIATELY
        }
        GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => {
            if h.queue_offset != 0 {
                response::PULL_OFFSET_MOVED
            } else {
                response::PULL_NOT_FOUND
            }
        }
        GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => {
            response::PULL_NOT_FOUND
        }
        GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => {
            response::PULL_OFFSET_MOVED
        }
    };
    let mut suggest = if p.live.slave_read_enable() {
        if r.suggest_pulling_from_slave {
            plan.which_broker_when_slow
        } else {
            plan.group_broker_id
        }
    } else {
        0
    };
    // A slave serves pulls (consumers come to it when the master is gone or
    // suggests it), but does not move a consumer's offset on its own view.
    if !p.replication.is_writable()
        && code == response::PULL_OFFSET_MOVED
        && !p.config.offset_check_in_slave
    {
        code = response::PULL_RETRY_IMMEDIATELY;
    }
    if !p.replication.is_writable() && !p.live.slave_read_enable() {
        suggest = 0;
    }
    let header = PullMessageResponseHeader {
        suggest_which_broker_id: suggest,
        next_begin_offset: r.next_begin_offset,
        min_offset: r.min_offset,
        max_offset: r.max_offset,
        offset_delta: None,
        topic_sys_flag: None,
        group_sys_flag: None,
        forbidden_type: None,
    };
    let mut resp = RemotingCommand::response(code, Some(r.status.name().to_string()))
        .with_ext(header.to_ext());
    if code == response::SUCCESS {
        p.stats
            .get_messages
            .fetch_add(r.messages.len() as u64, Ordering::Relaxed);
        p.stats.items.record_get(
            &h.consumer_group,
            &h.topic,
            r.messages.len() as u64,
            r.buffer_total_size as u64,
            started.elapsed().as_millis() as u64,
        );
        p.stats
            .get_bytes
            .fetch_add(r.buffer_total_size as u64, Ordering::Relaxed);
        p.stats
            .metrics
            .record_pull(&h.consumer_group, &h.topic, h.queue_id, r.next_begin_offset);
        resp.body = join_records(p, &r.messages, r.buffer_total_size);
        resp.remark = None;
    } else {
        p.stats.get_misses.fetch_add(1, Ordering::Relaxed);
    }
    resp
}

/// The pull body: the stored records back to back, as they are on disk.
/// Records that sit next to each other in one CommitLog file are sent as one
/// zero-copy view of the mapping; otherwise they are copied once.
fn join_records(p: &PullPath, msgs: &[Bytes], total: usize) -> Bytes {
    match msgs {
        [] => Bytes::new(),
        [one] => one.clone(),
        [first, ..] => {
            let contiguous = msgs
                .windows(2)
                .all(|w| w[0].as_ptr().wrapping_add(w[0].len()) == w[1].as_ptr());
            if contiguous
                && let Ok(v) = basalt_common::record::RecordView::parse(first, false)
                && let Some(b) = p.store.log().read_bytes(v.physical_offset, total)
            {
                return b;
            }
            let mut out = BytesMut::with_capacity(total);
            for m in msgs {
                out.extend_from_slice(m);
            }
            out.freeze()
        }
    }
}
