//! The RocketMQ 5 gRPC SDK for Java's consumers beyond the SimpleConsumer
//! basics (`basalt.grpc.ConsumeCases`, run as in grpc_java_sdk.rs):
//! * `push`: a PushConsumer consumes 20 messages, each exactly once;
//! * `push-retry`: its listener fails each of 5 messages once; each comes
//!   back with delivery attempt 2 (after the group's first backoff) and is
//!   consumed then, attempts exactly [1, 2];
//! * `dlq`: a message never acked in a group with `retryMaxTimes=1` is
//!   delivered twice, then not again, and is found in `%DLQ%g-dlq`;
//! * `fifo-two`: two SimpleConsumers of one orderly group get three
//!   message groups of six, each group in send order across both;
//! * `restart-before` / `restart-after`: ten messages received with a 20 s
//!   invisible time, the even ones acked; the broker restarts while the odd
//!   ones are invisible; after it, exactly the five odd ones come back.

use std::time::{Duration, Instant};

use basalt_common::record::decode_all;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, PullMessageRequestHeader};

use crate::grpc_java_sdk::{basalt, broker_with, run_cases, setup, text};
use crate::raw::Raw;

/// Creates subscription group `group` with `args` (`--orderly`,
/// `--retry-max-times N`) through `basalt admin`.
fn create_group(ns: &str, group: &str, args: &[&str]) {
    let mut all = vec!["admin", "--namesrv", ns, "group", "create", "-g", group];
    all.extend_from_slice(args);
    let o = basalt(&all);
    assert!(
        o.status.success(),
        "group create {group}: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
}

#[test]
fn push_consumer_consumes_and_retries() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker_with(tmp.path(), &[], &[]);
    let home = tmp.path().join("home");
    run_cases(&dir, &home, &endpoints, &["push", "push-retry"], &[]);
    drop(b);
}

/// The bodies stored in queue 0 of `topic`, read with a raw pull.
fn pull_all(broker: &str, topic: &str) -> Option<Vec<String>> {
    let h = PullMessageRequestHeader {
        consumer_group: "dlq-reader".into(),
        topic: topic.into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
    };
    let r = Raw::connect(broker)
        .call(RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()));
    if r.code != response::SUCCESS {
        return None;
    }
    let records = decode_all(&r.body, true).expect("DLQ records decode");
    Some(
        records
            .iter()
            .map(|m| String::from_utf8_lossy(&m.body).into_owned())
            .collect(),
    )
}

#[test]
fn unacked_message_reaches_the_dlq() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker_with(tmp.path(), &[], &[]);
    create_group(&b.namesrv_addr(), "g-dlq", &["--retry-max-times", "1"]);
    run_cases(&dir, &tmp.path().join("home"), &endpoints, &["dlq"], &[]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let dlq = loop {
        if let Some(bodies) = pull_all(&b.broker_addr(), "%DLQ%g-dlq") {
            break bodies;
        }
        assert!(Instant::now() < deadline, "nothing reached %DLQ%g-dlq");
        std::thread::sleep(Duration::from_millis(200));
    };
    println!("%DLQ%g-dlq holds {dlq:?}");
    assert_eq!(dlq, vec!["doomed-1".to_string()]);
    drop(b);
}

#[test]
fn fifo_group_keeps_order_across_two_consumers() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker_with(tmp.path(), &[], &[]);
    create_group(&b.namesrv_addr(), "g-fifo-two", &["--orderly"]);
    run_cases(
        &dir,
        &tmp.path().join("home"),
        &endpoints,
        &["fifo-two"],
        &[],
    );
    drop(b);
}

#[test]
fn invisible_messages_survive_a_broker_restart() {
    let Some((dir, tmp)) = setup() else { return };
    let (mut b, endpoints) = broker_with(tmp.path(), &[], &[]);
    let home = tmp.path().join("home");
    run_cases(&dir, &home, &endpoints, &["restart-before"], &[]);
    b.stop();
    b.restart();
    run_cases(&dir, &home, &endpoints, &["restart-after"], &[]);
    drop(b);
}
