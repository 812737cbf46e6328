//! The `/metrics` text: RocketMQ 5's metric names and labels (so boards
//! built for its exporter work), then Basalt's own (`basalt_*`): fsync
//! latency and group-commit size, disk use, replication, the poisoned flag.

use basalt_store::MessageStore;

use super::registry::BrokerMetrics;
use super::snapshot::BrokerSnapshot;
use super::text::{Exposition, Kind};

/// Everything `/metrics` answers, from one snapshot and the registry.
pub fn render(s: &BrokerSnapshot, m: &BrokerMetrics, store: &MessageStore) -> String {
    let node_id = s.broker_name.clone();
    let mut e = Exposition::new(&[
        ("cluster", &s.cluster),
        ("node_type", "broker"),
        ("node_id", &node_id),
    ]);
    traffic(&mut e, s, m);
    consumers(&mut e, s);
    rpc(&mut e, m);
    grpc(&mut e, m.grpc());
    pop(&mut e, s);
    storage(&mut e, s, store);
    replication(&mut e, s);
    auth(&mut e, m);
    e.finish()
}

fn auth(e: &mut Exposition, m: &BrokerMetrics) {
    e.family(
        "basalt_auth_failures_total",
        Kind::Counter,
        "Requests refused by authentication or authorization, by reason.",
    );
    for (reason, n) in m.auth_failures() {
        e.sample(
            "basalt_auth_failures_total",
            &[("reason", reason)],
            n as f64,
        );
    }
}

fn traffic(e: &mut Exposition, s: &BrokerSnapshot, m: &BrokerMetrics) {
    let mut ins = m.topics_in();
    ins.sort_by(|a, b| a.0.cmp(&b.0));
    e.family(
        "rocketmq_messages_in_total",
        Kind::Counter,
        "Messages stored, by topic.",
    );
    for (t, c) in &ins {
        let v = c.messages;
        e.sample("rocketmq_messages_in_total", &[("topic", t)], v as f64);
    }
    e.family(
        "rocketmq_throughput_in_total",
        Kind::Counter,
        "Bytes stored, by topic.",
    );
    for (t, c) in &ins {
        let v = c.bytes;
        e.sample("rocketmq_throughput_in_total", &[("topic", t)], v as f64);
    }
    e.family(
        "rocketmq_message_size",
        Kind::Histogram,
        "Stored message sizes, bytes, by topic.",
    );
    for (t, c) in &ins {
        e.histogram("rocketmq_message_size", &[("topic", t)], &c.sizes, 1.0);
    }
    e.family(
        "rocketmq_messages_out_total",
        Kind::Counter,
        "Messages pulled, by topic and consumer group.",
    );
    for g in &s.groups {
        for t in g.topics.iter().filter(|t| t.messages_out > 0) {
            let l = [("topic", t.topic.as_str()), ("consumer_group", &g.name)];
            e.sample("rocketmq_messages_out_total", &l, t.messages_out as f64);
        }
    }
    e.family(
        "rocketmq_throughput_out_total",
        Kind::Counter,
        "Bytes pulled, by topic and consumer group.",
    );
    for g in &s.groups {
        for t in g.topics.iter().filter(|t| t.messages_out > 0) {
            let l = [("topic", t.topic.as_str()), ("consumer_group", &g.name)];
            e.sample("rocketmq_throughput_out_total", &l, t.bytes_out as f64);
        }
    }
}

fn consumers(e: &mut Exposition, s: &BrokerSnapshot) {
    type Pick = fn(&super::snapshot::GroupTopicSnap) -> f64;
    let gauges: [(&str, &str, Pick); 3] = [
        (
            "rocketmq_consumer_lag_messages",
            "Messages stored and not yet committed, by group and topic.",
            |t| t.lag as f64,
        ),
        (
            "rocketmq_consumer_lag_latency",
            "Age of the oldest uncommitted message, ms.",
            |t| t.lag_latency_ms as f64,
        ),
        (
            "rocketmq_consumer_inflight_messages",
            "Messages pulled and not yet committed.",
            |t| t.inflight as f64,
        ),
    ];
    for (name, help, pick) in gauges {
        e.family(name, Kind::Gauge, help);
        for g in &s.groups {
            for t in &g.topics {
                let l = [("topic", t.topic.as_str()), ("consumer_group", &g.name)];
                e.sample(name, &l, pick(t));
            }
        }
    }
    e.family(
        "rocketmq_consumer_connections",
        Kind::Gauge,
        "Connected consumers, by group.",
    );
    for g in s.groups.iter().filter(|g| !g.consume_type.is_empty()) {
        let mode = if g.consume_type == "CONSUME_ACTIVELY" {
            "pull"
        } else {
            "push"
        };
        let l = [("consumer_group", g.name.as_str()), ("consume_mode", mode)];
        e.sample("rocketmq_consumer_connections", &l, g.members.len() as f64);
    }
    e.family(
        "rocketmq_producer_connections",
        Kind::Gauge,
        "Connected producers.",
    );
    let producers: usize = s.producers.values().sum();
    e.sample("rocketmq_producer_connections", &[], producers as f64);
    e.family(
        "rocketmq_topic_number",
        Kind::Gauge,
        "Topics on this broker.",
    );
    e.sample("rocketmq_topic_number", &[], s.topics.len() as f64);
    e.family(
        "rocketmq_consumer_group_number",
        Kind::Gauge,
        "Subscription groups on this broker.",
    );
    e.sample(
        "rocketmq_consumer_group_number",
        &[],
        s.subscription_groups as f64,
    );
}

fn rpc(e: &mut Exposition, m: &BrokerMetrics) {
    e.family(
        "rocketmq_rpc_latency",
        Kind::Histogram,
        "Request handling time, ms, by request and response code.",
    );
    for ((req, resp), h) in m.rpc_latency() {
        let (req, resp) = (req.to_string(), resp.to_string());
        let l = [
            ("protocol_type", "remoting"),
            ("request_code", req.as_str()),
            ("response_code", resp.as_str()),
        ];
        e.histogram("rocketmq_rpc_latency", &l, &h, 0.001);
    }
}

/// The gRPC MessagingService's calls (docs/metrics.md#grpc).
pub(crate) fn grpc(e: &mut Exposition, g: &super::grpc::GrpcMetrics) {
    let calls = g.calls();
    e.family(
        "basalt_grpc_requests_total",
        Kind::Counter,
        "gRPC MessagingService calls, by RPC and the apache.rocketmq.v2 Code of the answer (ReceiveMessage: its final status).",
    );
    for ((rpc, code), h) in &calls {
        let l = [("rpc", *rpc), ("code", *code)];
        e.sample("basalt_grpc_requests_total", &l, h.count as f64);
    }
    e.family(
        "basalt_grpc_request_duration_seconds",
        Kind::Histogram,
        "gRPC call durations, seconds, by RPC; ReceiveMessage includes its long polling, Telemetry is the opening of the stream only.",
    );
    for (rpc, h) in g.durations() {
        e.histogram(
            "basalt_grpc_request_duration_seconds",
            &[("rpc", rpc)],
            &h,
            1e-6,
        );
    }
}

fn pop(e: &mut Exposition, s: &BrokerSnapshot) {
    e.family(
        "basalt_pop_inflight_messages",
        Kind::Gauge,
        "Messages popped and neither acked nor put back yet, by consumer group and topic read (the topic or its POP retry topic).",
    );
    for (g, t, n) in &s.pop.by_group {
        let l = [("consumer_group", g.as_str()), ("topic", t.as_str())];
        e.sample("basalt_pop_inflight_messages", &l, *n as f64);
    }
    e.family(
        "basalt_pop_inflight_total",
        Kind::Gauge,
        "Messages popped and not acked, FIFO batches included.",
    );
    e.sample("basalt_pop_inflight_total", &[], s.pop.in_flight as f64);
    e.family(
        "basalt_pop_revive_lag_ms",
        Kind::Gauge,
        "How far the oldest unacked popped message is past its invisible time, ms (0 when none is).",
    );
    e.sample("basalt_pop_revive_lag_ms", &[], s.pop.revive_lag_ms as f64);
}

fn storage(e: &mut Exposition, s: &BrokerSnapshot, store: &MessageStore) {
    let st = &s.store;
    let gauges = [
        (
            "rocketmq_storage_size",
            "Bytes of the files under the store root.",
            st.storage_size_bytes as f64,
        ),
        (
            "rocketmq_storage_flush_behind_bytes",
            "CommitLog bytes written and not yet fsynced.",
            st.flush_behind_bytes as f64,
        ),
        (
            "rocketmq_storage_dispatch_behind_bytes",
            "CommitLog bytes not yet dispatched to ConsumeQueues.",
            st.dispatch_behind_bytes as f64,
        ),
        (
            "basalt_store_poisoned",
            "1 once an fsync failed: the store refuses writes until restarted.",
            if st.poisoned { 1.0 } else { 0.0 },
        ),
        (
            "basalt_commitlog_max_offset",
            "End of the log records are read from, bytes.",
            st.commit_log_max_offset as f64,
        ),
        (
            "basalt_commitlog_min_offset",
            "Start of the log records are read from, bytes.",
            st.commit_log_min_offset as f64,
        ),
    ];
    for (name, help, v) in gauges {
        e.family(name, Kind::Gauge, help);
        e.sample(name, &[], v);
    }
    e.family(
        "basalt_scheduled_messages_dropped_total",
        Kind::Counter,
        "Scheduled messages (timers, delay levels, transaction halves) deleted by forced cleanup on a full disk before their time.",
    );
    e.sample(
        "basalt_scheduled_messages_dropped_total",
        &[],
        store.commit_log().retention().dropped() as f64,
    );
    e.family(
        "basalt_disk_used_ratio",
        Kind::Gauge,
        "Use of the store's disk, 0 to 1.",
    );
    if let Some(r) = st.disk_used_ratio {
        e.sample("basalt_disk_used_ratio", &[], r);
    }
    let fs = store.commit_log().flush_stats();
    e.family(
        "basalt_fsync_latency",
        Kind::Histogram,
        "CommitLog fsync durations, ms.",
    );
    e.histogram("basalt_fsync_latency", &[], &fs.fsync_micros(), 0.001);
    e.family(
        "basalt_group_commit_size",
        Kind::Histogram,
        "Messages made durable by each CommitLog fsync.",
    );
    e.histogram("basalt_group_commit_size", &[], &fs.group_size(), 1.0);
}

fn replication(e: &mut Exposition, s: &BrokerSnapshot) {
    let r = &s.replication;
    e.family(
        "basalt_broker_writable",
        Kind::Gauge,
        "1 while this broker takes sends.",
    );
    e.sample(
        "basalt_broker_writable",
        &[],
        f64::from(u8::from(s.writable)),
    );
    e.family(
        "basalt_ha_slave_lag_bytes",
        Kind::Gauge,
        "HA: bytes a slave is behind its master (on the master per slave, on a slave its own).",
    );
    for sl in &r.slaves {
        let l = [("slave", sl.addr.as_str())];
        e.sample("basalt_ha_slave_lag_bytes", &l, sl.lag_bytes as f64);
    }
    if let Some(lag) = r.slave_lag_bytes {
        let l = [("slave", "self")];
        e.sample("basalt_ha_slave_lag_bytes", &l, lag as f64);
    }
    let Some(ledger) = &r.ledger else {
        return;
    };
    let g = [("ledger_group", ledger.group.as_str())];
    let roles = ["LEADER", "CANDIDATE", "PRECANDIDATE", "FOLLOWER"];
    e.family(
        "basalt_ledger_role",
        Kind::Gauge,
        "1 for the role this member has now.",
    );
    for role in roles {
        let l = [g[0], ("role", role)];
        e.sample(
            "basalt_ledger_role",
            &l,
            f64::from(u8::from(ledger.role == role)),
        );
    }
    let gauges = [
        ("basalt_ledger_term", "Current term.", ledger.term),
        (
            "basalt_ledger_commit_index",
            "Highest index known committed.",
            ledger.committed_index,
        ),
        (
            "basalt_ledger_end_index",
            "Last index in this member's ledger.",
            ledger.end_index,
        ),
        (
            "basalt_ledger_dispatched_index",
            "Next index dispatched to ConsumeQueues.",
            ledger.dispatched_index,
        ),
    ];
    for (name, help, v) in gauges {
        e.family(name, Kind::Gauge, help);
        e.sample(name, &g, v as f64);
    }
    e.family(
        "basalt_ledger_peer_match_index",
        Kind::Gauge,
        "On the leader: the highest index each member holds (-1 unknown).",
    );
    for p in &ledger.peers {
        let l = [g[0], ("peer", p.id.as_str())];
        e.sample("basalt_ledger_peer_match_index", &l, p.match_index as f64);
    }
    e.family(
        "basalt_ledger_peer_lag",
        Kind::Gauge,
        "On the leader: entries each member is behind (-1 unknown).",
    );
    for p in &ledger.peers {
        let l = [g[0], ("peer", p.id.as_str())];
        e.sample("basalt_ledger_peer_lag", &l, p.lag as f64);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::grpc::GrpcMetrics;
    use super::*;

    #[test]
    fn grpc_calls_render_as_counters_and_a_seconds_histogram() {
        let g = GrpcMetrics::new(true);
        g.record("AckMessage", "OK", Duration::from_millis(2));
        g.record(
            "AckMessage",
            "INVALID_RECEIPT_HANDLE",
            Duration::from_micros(400),
        );
        g.record(
            "ReceiveMessage",
            "MESSAGE_NOT_FOUND",
            Duration::from_secs(20),
        );
        let mut e = Exposition::new(&[("cluster", "c")]);
        grpc(&mut e, &g);
        let t = e.finish();
        for line in [
            "basalt_grpc_requests_total{cluster=\"c\",rpc=\"AckMessage\",code=\"INVALID_RECEIPT_HANDLE\"} 1\n",
            "basalt_grpc_requests_total{cluster=\"c\",rpc=\"AckMessage\",code=\"OK\"} 1\n",
            "basalt_grpc_requests_total{cluster=\"c\",rpc=\"ReceiveMessage\",code=\"MESSAGE_NOT_FOUND\"} 1\n",
            "basalt_grpc_request_duration_seconds_bucket{cluster=\"c\",rpc=\"AckMessage\",le=\"0.0005\"} 1\n",
            "basalt_grpc_request_duration_seconds_bucket{cluster=\"c\",rpc=\"AckMessage\",le=\"0.0025\"} 2\n",
            "basalt_grpc_request_duration_seconds_count{cluster=\"c\",rpc=\"AckMessage\"} 2\n",
            "basalt_grpc_request_duration_seconds_sum{cluster=\"c\",rpc=\"ReceiveMessage\"} 20\n",
            "basalt_grpc_request_duration_seconds_bucket{cluster=\"c\",rpc=\"ReceiveMessage\",le=\"10\"} 0\n",
            "basalt_grpc_request_duration_seconds_bucket{cluster=\"c\",rpc=\"ReceiveMessage\",le=\"20\"} 1\n",
        ] {
            assert!(t.contains(line), "missing {line:?} in\n{t}");
        }
    }
}
