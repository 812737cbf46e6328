//! The RocketMQ 5 gRPC SDK for Python (`rocketmq-python-client` 5.1.2 from
//! PyPI, installed with its pinned dependencies into a virtual environment
//! by `interop/python-grpc-sdk/prepare.sh`) against `basalt standalone`'s
//! gRPC MessagingService. Each case is one run of `cases.py`, which checks
//! itself (every message exactly once, printed as sent and received,
//! counted) and ends with ALL PASSED:
//! * `normal`: 20 messages, each received and acked once by a
//!   SimpleConsumer, with the tag, both keys, user property and born time
//!   sent;
//! * `filter`: a tag consumer (`tagA || tagB`) and a SQL92 consumer
//!   (`index >= 5`) of one topic each get exactly their messages;
//! * `fifo`: three message groups of five, sent interleaved, each group in
//!   send order and carrying its group;
//! * `delay`: three messages with a delivery time 3 to 4 s ahead (whole
//!   seconds, as the SDK sends it), none early nor more than 8 s late, each
//!   carrying that time;
//! * `transaction`: one committed, one rolled back, three resolved by the
//!   producer's transaction checker on the broker's check-back (one
//!   committed, one rolled back, one left unresolved and committed on the
//!   next check): exactly the three committed arrive, only the open ones
//!   are checked;
//! * `bad-input`: sends to an unknown topic and over 4 MiB are refused, and
//!   a good send after them is taken and received once;
//! * `invisible`: a message not acked comes back after its 10 s invisible
//!   time with delivery attempt 2, and not after its ack;
//! * `change-invisible`: 60 s invisible changed to 2 s: back within 30 s
//!   with attempt 2 (an ack with the replaced receipt handle does not keep
//!   it away), and not after an ack with the new one;
//! * `digest`: bodies whose CRC32 has a leading zero hex digit are not
//!   marked corrupted by the SDK (Basalt sends MD5, as the proxy does);
//! * `wire`: malformed messages, an unknown RPC and dropped streams and
//!   connections below the SDK each get a clear status, then the broker
//!   serves a send and a receive.
//!
//! The SDK's default is plain text (`tls_enable=False`); `sdk_tls` runs it
//! with `tls_enable=True`, trusting the certificate the port serves
//! (docs/grpc.md, "Python SDK").

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::interop::{Finished, family_dir, run_bounded};
use crate::standalone::Standalone;

const FAMILY: &str = "python-grpc-sdk";
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
/// `py-CASE` (4 queues) for each case.
fn broker(tmp: &Path, cases: &[&str]) -> (Standalone, String) {
    let port = free_port();
    let grpc = format!("grpcServerPort={port}");
    let mut sets: Vec<&str> = BROKER_SETS.to_vec();
    sets.push(&grpc);
    let b = Standalone::start(&tmp.join("data"), &sets);
    let ns = b.namesrv_addr();
    for case in cases {
        let topic = format!("py-{case}");
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
    (b, format!("127.0.0.1:{port}"))
}

/// Runs one case of the harness in `dir` against `endpoint` with the
/// `--tls` mode given, its SDK log kept under `logs/CASE` in `tmp`.
fn run_case(dir: &Path, tmp: &Path, endpoint: &str, case: &str, tls: &str) -> Finished {
    let logs = tmp.join("logs").join(case);
    std::fs::create_dir_all(&logs).expect("log dir");
    let mut cmd = Command::new(dir.join("venv").join("bin").join("python"));
    cmd.arg(dir.join("harness").join("cases.py"))
        .args(["--endpoint", endpoint, "--tls", tls, case])
        // The SDK logs to $HOME/logs/rocketmq_python/: one home per case.
        .env("HOME", &logs)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1");
    run_bounded(&mut cmd, CASE_DEADLINE)
}

/// The SDK's log of `case`, for a failure report.
fn sdk_log(tmp: &Path, case: &str) -> String {
    let path = tmp
        .join("logs")
        .join(case)
        .join("logs")
        .join("rocketmq_python")
        .join("rocketmq_client.log");
    let log = std::fs::read_to_string(&path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Runs `cases` in parallel (one process each) against one broker, with
/// the `--tls` mode given; panics with every failed case's output and SDK
/// log unless each ended with ALL PASSED.
fn run_all(cases: &[&str], tls: &str) {
    let Some(dir) = family_dir(FAMILY) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let (b, endpoint) = broker(tmp.path(), cases);
    let runs: Vec<(&str, Finished)> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|case| {
                let (dir, tmp, endpoint) = (&dir, tmp.path(), &endpoint);
                (
                    *case,
                    s.spawn(move || run_case(dir, tmp, endpoint, case, tls)),
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
        let what = format!("cases.py --tls {tls} {case}");
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
    drop(b);
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// The SDK as it comes: no TLS setting, which is plain text in this SDK.
#[test]
fn producers_and_simple_consumers() {
    run_all(
        &[
            "normal",
            "filter",
            "fifo",
            "delay",
            "transaction",
            "bad-input",
        ],
        "sdk-default",
    );
}

#[test]
fn invisible_time_and_change_invisible_duration() {
    run_all(&["invisible", "change-invisible"], "sdk-default");
}

/// `tls_enable=True` against the gRPC port's default, permissive TLS with
/// its made-up certificate, which the harness fetches and makes gRPC's
/// root (the SDK verifies the server's certificate).
#[test]
fn sdk_tls() {
    run_all(&["normal", "fifo", "transaction"], "on");
}

/// The body digests the broker sends, checked as this SDK checks them:
/// Basalt's MD5, as the proxy's, marks no body corrupted (its CRC32 did,
/// for one body in 16: docs/grpc.md, "Python SDK").
#[test]
fn body_digest() {
    run_all(&["digest"], "sdk-default");
}

/// Hostile input below the SDK, with grpcio itself (`wire.py`): bytes
/// that are no protobuf message and an unknown RPC each get a clear status
/// (INTERNAL with the decode error, UNIMPLEMENTED); a cancelled Telemetry
/// stream, a channel closed under an open one and a connection that speaks
/// no HTTP/2 are dropped; then a normal send and receive work.
#[test]
fn hostile_wire_input() {
    run_all(&["wire"], "sdk-default");
}
