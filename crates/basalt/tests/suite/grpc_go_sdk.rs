//! The RocketMQ 5 gRPC SDK for Go (`github.com/apache/rocketmq-clients/
//! golang/v5` v5.1.2, built by `interop/go-grpc-sdk/prepare.sh`) against
//! `basalt standalone`'s gRPC MessagingService. Each case is one run of
//! `gogrpcsdk`, which checks itself (every message exactly once, printed
//! as sent and received, counted) and ends with ALL PASSED:
//! * `normal`: 20 messages, each received and acked once by a
//!   SimpleConsumer, with the tag, keys, user property and born time sent;
//! * `filter`: a tag consumer (`tagA || tagB`) and a SQL92 consumer
//!   (`index >= 5`) of one topic each get exactly their messages;
//! * `shared`: two SimpleConsumers of one group receiving at once get 30
//!   messages, together each exactly once;
//! * `any-queue`: a receive right after start (before the SDK sent its
//!   settings) is empty, not DEADLINE_EXCEEDED; then eight times one
//!   message sent, one receive returns it (whichever queue the SDK names
//!   and the message is on);
//! * `fifo`: three message groups of five, each group in send order;
//! * `orderly`: an orderly group (`consumeMessageOrderly`, set here by a
//!   remoting request): while the first of a message group is received and
//!   not acked, a receive gets nothing; after its ack the rest, in order;
//! * `delay`: three messages with a delivery time 3 s ahead, none early
//!   nor more than 8 s late, each carrying that time;
//! * `transaction`: one committed, one rolled back, three resolved by the
//!   producer's transaction checker on the broker's check-back (one
//!   committed, one rolled back, one UNKNOWN then committed on the next
//!   check): exactly the three committed arrive;
//! * `bad-input`: sends to an unknown topic and over the size limit are
//!   refused, and a good send after them is taken;
//! * `invisible`: a message not acked comes back after its 10 s invisible
//!   time with delivery attempt 2, and not after its ack;
//! * `change-invisible`: 60 s invisible changed to 2 s: back within 30 s,
//!   attempt 2, and not after its ack.
//!
//! After the cases passed, `/metrics` must count their calls by RPC and
//! answer code (`basalt_grpc_requests_total`, at least what the cases made)
//! and time each call once ([`crate::grpc_ops::check_grpc_metrics`]).
//!
//! The SDK always dials TLS; the harness swaps in plain text (docs/grpc.md,
//! "Go SDK").

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};

use crate::interop::{Finished, family_dir, run_bounded};
use crate::raw::Raw;
use crate::standalone::Standalone;

const FAMILY: &str = "go-grpc-sdk";
/// One case's run (each waits at most 90 s for its messages, then settles).
const CASE_DEADLINE: Duration = Duration::from_secs(180);

/// Transaction check-backs within about a second (the `transaction` case);
/// SQL92 filters (the `filter` case).
const BROKER_SETS: &[&str] = &[
    "transactionCheckInterval=1000",
    "transactionTimeOut=1000",
    "enablePropertyFilter=true",
];

/// A free loopback port for the gRPC server.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A standalone broker with its gRPC server on a free port and topic
/// `go-CASE` (4 queues) for each case; its endpoint and `/metrics` port.
fn broker(tmp: &Path, cases: &[&str]) -> (Standalone, String, u16) {
    let port = free_port();
    let grpc = format!("grpcServerPort={port}");
    let metrics_port = free_port();
    let metrics = format!("metricsPromExporterPort={metrics_port}");
    let mut sets: Vec<&str> = BROKER_SETS.to_vec();
    sets.extend([
        grpc.as_str(),
        "metricsExporterType=PROM",
        "metricsPromExporterHost=127.0.0.1",
        metrics.as_str(),
    ]);
    let b = Standalone::start(&tmp.join("data"), &sets);
    let ns = b.namesrv_addr();
    for case in cases {
        let topic = format!("go-{case}");
        let o = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["admin", "--namesrv", &ns, "topic", "create"])
            .args(["-t", &topic, "--queues", "4"])
            .output()
            .expect("run basalt admin");
        assert!(
            o.status.success(),
            "create {topic}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    // The `orderly` case's group consumes in order (no CLI flag sets it).
    let body = r#"{"groupName":"gg-orderly","consumeEnable":true,"consumeMessageOrderly":true}"#;
    let r = Raw::connect(&b.broker_addr()).call(
        RemotingCommand::request(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(body.as_bytes().to_vec()),
    );
    assert_eq!(
        r.code,
        response::SUCCESS,
        "create gg-orderly: {:?}",
        r.remark
    );
    (b, format!("127.0.0.1:{port}"), metrics_port)
}

/// The least each (RPC, answer code) was called by `cases`.
fn expected_calls(cases: &[&str]) -> Vec<(&'static str, &'static str, f64)> {
    let mut want = vec![
        ("QueryRoute", "OK", 1.0),
        ("Heartbeat", "OK", 1.0),
        ("Telemetry", "OK", 1.0),
        ("SendMessage", "OK", 1.0),
    ];
    let has = |c: &str| cases.contains(&c);
    if has("normal") {
        want.extend([
            ("SendMessage", "OK", 20.0),
            ("ReceiveMessage", "OK", 1.0),
            ("AckMessage", "OK", 20.0),
        ]);
    }
    if has("any-queue") {
        // Its first receive is empty.
        want.push(("ReceiveMessage", "MESSAGE_NOT_FOUND", 1.0));
    }
    if has("bad-input") {
        want.push(("QueryRoute", "TOPIC_NOT_FOUND", 1.0));
    }
    if has("change-invisible") {
        want.push(("ChangeInvisibleDuration", "OK", 1.0));
    }
    if has("transaction") {
        want.push(("EndTransaction", "OK", 2.0));
    }
    want
}

/// Runs one case of the harness against `endpoint`, its SDK log kept under
/// `logs/CASE` in `tmp`.
fn run_case(bin: &Path, tmp: &Path, endpoint: &str, case: &str, tls: bool) -> Finished {
    let logs = tmp.join("logs").join(case);
    std::fs::create_dir_all(&logs).expect("log dir");
    let mut cmd = Command::new(bin);
    if tls {
        cmd.arg("-tls");
    }
    cmd.args(["-endpoint", endpoint, case])
        // The SDK's file log goes to $rocketmq.client.logRoot, else to
        // /logs/rocketmqlogs; keep it (and HOME) in the temp dir.
        .env("rocketmq.client.logRoot", &logs)
        .env("HOME", tmp);
    run_bounded(&mut cmd, CASE_DEADLINE)
}

/// The SDK's log of `case`, for a failure report.
fn sdk_log(tmp: &Path, case: &str) -> String {
    let path = tmp.join("logs").join(case).join("rocketmq_client_go.log");
    let log = std::fs::read_to_string(&path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Runs `cases` in parallel (one process each) against one broker, with
/// the SDK's own TLS or in plain text; panics with every failed case's
/// output and SDK log unless each ended with ALL PASSED.
fn run_all(cases: &[&str], tls: bool) {
    let Some(dir) = family_dir(FAMILY) else {
        return;
    };
    let bin: PathBuf = dir.join("bin").join("gogrpcsdk");
    let tmp = tempfile::tempdir().expect("temp dir");
    let (b, endpoint, metrics_port) = broker(tmp.path(), cases);
    let runs: Vec<(&str, Finished)> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|case| {
                let (bin, tmp, endpoint) = (&bin, tmp.path(), &endpoint);
                (
                    *case,
                    s.spawn(move || run_case(bin, tmp, endpoint, case, tls)),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(case, h)| (case, h.join().expect("case thread")))
            .collect()
    });
    let mut failed = Vec::new();
    for (case, run) in &runs {
        let what = format!("gogrpcsdk {case}");
        let passed = run.success() && run.stdout.lines().last() == Some("ALL PASSED");
        println!("{}", run.report(&what));
        if !passed {
            failed.push(format!(
                "{}\n--- SDK log (last lines) ---\n{}",
                run.report(&what),
                sdk_log(tmp.path(), case)
            ));
        }
    }
    if failed.is_empty() {
        crate::grpc_ops::check_grpc_metrics(metrics_port, &expected_calls(cases));
    }
    drop(b);
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn producers_and_simple_consumers() {
    run_all(
        &[
            "normal",
            "filter",
            "shared",
            "any-queue",
            "fifo",
            "orderly",
            "delay",
            "transaction",
            "bad-input",
        ],
        false,
    );
}

#[test]
fn invisible_time_and_change_invisible_duration() {
    run_all(&["invisible", "change-invisible"], false);
}

/// The SDK unchanged (it always dials TLS) against the gRPC port's default,
/// permissive TLS with its made-up certificate.
#[test]
fn sdk_default_tls() {
    run_all(&["normal", "fifo", "transaction"], true);
}
