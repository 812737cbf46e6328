//! The RocketMQ 5 gRPC SDK for Java (`rocketmq-client-java`, built by
//! `interop/java-grpc-sdk/prepare.sh`) against `basalt standalone`'s gRPC
//! MessagingService: producers (normal, FIFO, delayed, transactional with
//! commit, rollback and check-back), SimpleConsumers receiving and acking,
//! a message not acked coming back after its invisible time,
//! ChangeInvisibleDuration, bad input, and remoting and gRPC clients on the
//! same topic. `basalt.grpc.Main` checks each case itself (every message
//! exactly once, printed as sent and received) and ends with ALL PASSED.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::interop::{family_dir, java, run_bounded};
use crate::standalone::Standalone;

const FAMILY: &str = "java-grpc-sdk";
/// One JVM run of several cases (each case bounds itself at 60 to 90 s).
const RUN_DEADLINE: Duration = Duration::from_secs(240);

/// Transaction check-backs within about a second (the `transaction` case).
const BROKER_SETS: &[&str] = &["transactionCheckInterval=1000", "transactionTimeOut=1000"];

const TOPICS: &[&str] = &[
    "grpc-normal",
    "grpc-fifo",
    "grpc-delay",
    "grpc-transaction",
    "grpc-invisible",
    "grpc-change-invisible",
    "grpc-bad-input",
    "grpc-mixed-in",
    "grpc-mixed-out",
];

/// A free loopback port for the gRPC server.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn basalt(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .output()
        .expect("run basalt")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A standalone broker with its gRPC server on a free port; the topics of
/// every case created (4 queues each).
fn broker(tmp: &Path) -> (Standalone, String) {
    let port = free_port();
    let grpc = format!("grpcServerPort={port}");
    let mut sets: Vec<&str> = BROKER_SETS.to_vec();
    sets.push(&grpc);
    let b = Standalone::start(&tmp.join("data"), &sets);
    let ns = b.namesrv_addr();
    for t in TOPICS {
        let o = basalt(&[
            "admin",
            "--namesrv",
            &ns,
            "topic",
            "create",
            "-t",
            t,
            "--queues",
            "4",
        ]);
        assert!(
            o.status.success(),
            "create {t}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    (b, format!("127.0.0.1:{port}"))
}

/// Runs `cases` of the harness against `endpoints`; panics with the whole
/// output unless ALL PASSED.
fn run_cases(dir: &Path, home: &Path, endpoints: &str, cases: &[&str], props: &[(&str, String)]) {
    let cp = std::fs::read_to_string(dir.join("sdk.classpath")).expect("sdk.classpath");
    let mut cmd = Command::new(java());
    cmd.args([
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
    ])
    .arg(format!("-Duser.home={}", home.display()));
    for (k, v) in props {
        cmd.arg(format!("-D{k}={v}"));
    }
    cmd.arg("-cp")
        .arg(cp.trim())
        .arg("basalt.grpc.Main")
        .arg(endpoints)
        .args(cases);
    let run = run_bounded(&mut cmd, RUN_DEADLINE);
    let what = format!("java gRPC SDK {cases:?}");
    let run = run.expect_success(&what);
    assert!(
        run.stdout.contains("ALL PASSED"),
        "{what}: no ALL PASSED line"
    );
}

fn setup() -> Option<(std::path::PathBuf, tempfile::TempDir)> {
    let dir = family_dir(FAMILY)?;
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(tmp.path().join("home")).expect("home");
    Some((dir, tmp))
}

#[test]
fn producers_and_simple_consumers() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker(tmp.path());
    let cases = ["normal", "fifo", "delay", "transaction", "bad-input"];
    run_cases(&dir, &tmp.path().join("home"), &endpoints, &cases, &[]);
    drop(b);
}

#[test]
fn invisible_time_and_change_invisible_duration() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker(tmp.path());
    run_cases(
        &dir,
        &tmp.path().join("home"),
        &endpoints,
        &["invisible", "change-invisible"],
        &[],
    );
    drop(b);
}

/// A remoting producer (`basalt produce`) feeds a gRPC SimpleConsumer, and
/// a gRPC producer feeds a remoting consumer (`basalt consume`), on the
/// same broker: each side gets exactly what the other sent.
#[test]
fn remoting_and_grpc_clients_share_topics() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker(tmp.path());
    let ns = b.namesrv_addr();
    let n = 10;
    let o = basalt(&[
        "produce",
        "--namesrv",
        &ns,
        "-t",
        "grpc-mixed-in",
        "-n",
        &n.to_string(),
        "--keys",
        "remoting-{i}",
    ]);
    assert!(o.status.success(), "basalt produce: {}", text(&o.stderr));
    let sent = text(&o.stdout);
    assert!(sent.ends_with(&format!("sent {n}, failed 0\n")), "{sent}");
    let props = [("grpc.mixed.count", n.to_string())];
    run_cases(
        &dir,
        &tmp.path().join("home"),
        &endpoints,
        &["mixed-consume", "mixed-produce"],
        &props,
    );
    let o = basalt(&[
        "consume",
        "--namesrv",
        &ns,
        "-t",
        "grpc-mixed-out",
        "-g",
        "remoting-reader",
        "-n",
        &n.to_string(),
        "--timeout",
        "60",
    ]);
    let out = text(&o.stdout);
    println!("basalt consume printed:\n{out}");
    assert!(o.status.success(), "basalt consume: {}", text(&o.stderr));
    assert!(out.contains(&format!("consumed {n}")), "{out}");
    for i in 0..n {
        let body = format!("body=\"from-grpc-{i}\"");
        assert_eq!(
            out.matches(&body).count(),
            1,
            "{body} exactly once in:\n{out}"
        );
    }
    drop(b);
}
