//! The RocketMQ 5 gRPC SDK for Node.js (npm `rocketmq-client-nodejs`
//! 1.0.8, every dependency pinned by `interop/node-grpc-sdk/
//! package-lock.json`, installed by `interop/node-grpc-sdk/prepare.sh`)
//! against `basalt standalone`'s gRPC MessagingService. Each case is one
//! run of `node cases.js`, which checks itself (every message exactly once,
//! printed as sent and received, counted) and ends with ALL PASSED:
//! * `normal`: 20 messages, each received and acked once by a
//!   SimpleConsumer, with the tag, both keys, user property, born time and
//!   delivery attempt 1;
//! * `filter`: a tag consumer (`tagA || tagB`) and a SQL92 consumer
//!   (`index >= 5`) of one topic each get exactly their messages;
//! * `shared`: two SimpleConsumers of one group receiving at once get 30
//!   messages, together each exactly once;
//! * `any-queue`: a receive right after start is empty, not an error; then
//!   eight times one message sent, one receive returns it (whichever queue
//!   the SDK names and the message is on);
//! * `fifo`: three message groups of five, each group in send order, each
//!   message carrying its group;
//! * `orderly`: an orderly group (`consumeMessageOrderly`, set here by a
//!   remoting request): while the first of a message group is received and
//!   not acked, a receive gets nothing; after its ack the rest, in order;
//! * `delay`: three messages with a delivery time 3 s ahead, none early
//!   nor more than 8 s late, each carrying that time;
//! * `transaction`: one committed, one rolled back, three resolved by the
//!   producer's transaction checker on the broker's check-back (one
//!   committed, one rolled back, one left open once, then committed on the
//!   next check): exactly the three committed arrive, only open ones are
//!   checked;
//! * `bad-input`: a send to an unknown topic is TOPIC_NOT_FOUND, one over
//!   the size limit is refused, and a good send after them is taken;
//! * `invisible`: a message not acked comes back after its 10 s invisible
//!   time with delivery attempt 2, and not after its ack;
//! * `change-invisible`: 60 s invisible changed to 2 s: back within 30 s,
//!   attempt 2; an ack with the replaced receipt handle is refused with
//!   INVALID_RECEIPT_HANDLE (this SDK checks an ack's status); not back
//!   after an ack with the new one.
//!
//! The SDK's default is plain text (`sslEnabled` false); `--tls` turns it on
//! and the harness trusts the broker's self-signed certificate, read off a
//! handshake, so grpc-js verifies it (docs/grpc.md, "Node.js SDK").

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};

use crate::interop::{Finished, family_dir, run_bounded};
use crate::raw::Raw;
use crate::standalone::Standalone;

const FAMILY: &str = "node-grpc-sdk";
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
/// `node-CASE` (4 queues) for each case.
fn broker(tmp: &Path, cases: &[&str]) -> (Standalone, String) {
    let port = free_port();
    let grpc = format!("grpcServerPort={port}");
    let mut sets: Vec<&str> = BROKER_SETS.to_vec();
    sets.push(&grpc);
    let b = Standalone::start(&tmp.join("data"), &sets);
    let ns = b.namesrv_addr();
    for case in cases {
        let topic = format!("node-{case}");
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
    let body = r#"{"groupName":"ng-orderly","consumeEnable":true,"consumeMessageOrderly":true}"#;
    let r = Raw::connect(&b.broker_addr()).call(
        RemotingCommand::request(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(body.as_bytes().to_vec()),
    );
    assert_eq!(
        r.code,
        response::SUCCESS,
        "create ng-orderly: {:?}",
        r.remark
    );
    (b, format!("127.0.0.1:{port}"))
}

/// The home directory of `case`'s run: the SDK logs to
/// `$HOME/logs/rocketmq/rocketmq_client_nodejs.log`.
fn home(tmp: &Path, case: &str) -> PathBuf {
    tmp.join("home").join(case)
}

/// Runs one case of the harness against `endpoint`.
fn run_case(dir: &Path, tmp: &Path, endpoint: &str, case: &str, tls: bool) -> Finished {
    let case_home = home(tmp, case);
    std::fs::create_dir_all(&case_home).expect("home dir");
    let mut cmd = Command::new("node");
    cmd.arg(dir.join("cases.js"));
    if tls {
        cmd.arg("--tls");
    }
    cmd.args(["--endpoint", endpoint, case])
        .env("HOME", &case_home)
        .env("TMPDIR", tmp);
    run_bounded(&mut cmd, CASE_DEADLINE)
}

/// The SDK's log of `case`, for a failure report.
fn sdk_log(tmp: &Path, case: &str) -> String {
    let path = home(tmp, case)
        .join("logs")
        .join("rocketmq")
        .join("rocketmq_client_nodejs.log");
    let log = std::fs::read_to_string(&path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Runs `cases` in parallel (one process each) against one broker, with
/// the SDK's default plain text or with TLS; panics with every failed
/// case's output and SDK log unless each ended with ALL PASSED.
fn run_all(cases: &[&str], tls: bool) {
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
        let what = format!("node cases.js {case}");
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

/// `sslEnabled: true` against the gRPC port's default, permissive TLS, the
/// broker's made-up certificate verified by grpc-js (the harness trusts
/// it after reading it off a handshake).
#[test]
fn sdk_with_tls() {
    run_all(&["normal", "fifo", "transaction"], true);
}
