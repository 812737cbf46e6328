//! The official RocketMQ Java client (remoting; `rocketmq-client` 4.9.8 and
//! 5.5.0) against Basalt. `interop/java-client` is one harness built twice
//! (`interop/java-client/prepare.sh`); its `basalt.interop.Main` runs named
//! cases in parallel threads of one JVM and checks them itself: each prints
//! every message it sent and received and fails, with the reason, unless
//! every message arrived exactly once (in order where the client promises
//! order). Each test here is one area for one client version against one
//! broker, to save JVM start-ups. What the cases assert is in
//! docs/java-client.md.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::interop::{Finished, family_dir, java, run_bounded};
use crate::procs::{Proc, free_port_pair, write_conf};
use crate::standalone::Standalone;

const FAMILY: &str = "java-client";
/// A whole JVM run (Main bounds each case at 150 s; nextest kills at 300 s).
const RUN_DEADLINE: Duration = Duration::from_secs(200);

/// Broker settings the cases rely on: delay level 1 = 1 s and 2 = 2 s (the
/// `delay` case), retries at level 3 and 4 after 1 s each (the `dlq` case:
/// RocketMQ's defaults would wait 10 s and 30 s), and transaction check-backs
/// within about a second (the `transaction` case).
const BROKER_SETS: &[&str] = &[
    "messageDelayLevel=1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s",
    "transactionCheckInterval=1000",
    "transactionTimeOut=1000",
];

const PRODUCER_CASES: &[&str] = &[
    "sync",
    "async",
    "oneway",
    "batch",
    "ordered",
    "delay",
    "transaction",
    "request-reply",
];
const CONSUMER_CASES: &[&str] = &[
    "push",
    "orderly",
    "broadcast",
    "tag",
    "sql92",
    "lite-subscribe",
    "lite-assign",
    "dlq",
];
const BEHAVIOUR_CASES: &[&str] = &["rebalance", "resume", "trace"];

/// The `java` command for one build (`rmq4` / `rmq5`) of the harness: small
/// heap, C1 only, serial GC; the client's logs and local offsets go under
/// `home` (it writes them below `user.home`).
fn harness(dir: &Path, build: &str, home: &Path, props: &[(&str, String)]) -> Command {
    let cp_file = dir.join(format!("{build}.classpath"));
    let cp = std::fs::read_to_string(&cp_file)
        .unwrap_or_else(|e| panic!("read {}: {e}", cp_file.display()));
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
    cmd.arg("-cp").arg(cp.trim()).arg("basalt.interop.Main");
    cmd
}

/// The WARN and ERROR lines of the client's log (the last 60), for a
/// failure report.
fn client_log_problems(home: &Path) -> String {
    let log = home.join("logs/rocketmqlogs/rocketmq_client.log");
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
        .collect();
    let from = bad.len().saturating_sub(60);
    format!(
        "--- client log {} (WARN/ERROR, last {}) ---\n{}",
        log.display(),
        bad.len() - from,
        bad[from..].join("\n")
    )
}

/// Panics with the run's whole output (and the client's warnings) unless it
/// passed.
fn expect_passed(run: Finished, what: &str, home: &Path) {
    if !run.success() {
        panic!("{}\n{}", run.report(what), client_log_problems(home));
    }
    println!("{}", run.report(what));
    assert!(
        run.stdout.contains("ALL PASSED"),
        "{what}: exited 0 without its ALL PASSED line"
    );
}

/// Runs `cases` with the `build` client against a fresh `basalt standalone`
/// started with [`BROKER_SETS`] and `extra_sets`; `props` are the harness's
/// system properties.
fn run_against_standalone(
    build: &str,
    area: &str,
    cases: &[&str],
    extra_sets: &[&str],
    props: &[(&str, String)],
) {
    let Some(dir) = family_dir(FAMILY) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let sets: Vec<&str> = BROKER_SETS.iter().chain(extra_sets).copied().collect();
    let broker = Standalone::start(&tmp.path().join("data"), &sets);
    let mut cmd = harness(&dir, build, &home, props);
    cmd.arg(broker.namesrv_addr())
        .arg(format!("{area}_{build}"))
        .args(cases);
    let run = run_bounded(&mut cmd, RUN_DEADLINE);
    expect_passed(run, &format!("{build} {area} {cases:?}"), &home);
    drop(broker);
}

#[test]
fn producers_rmq4() {
    run_against_standalone("rmq4", "producers", PRODUCER_CASES, &[], &[]);
}

#[test]
fn producers_rmq5() {
    let mut cases = PRODUCER_CASES.to_vec();
    // Message.setDeliverTimeMs exists only in the 5.x client.
    cases.push("timer");
    run_against_standalone("rmq5", "producers", &cases, &[], &[]);
}

#[test]
fn consumers_rmq4() {
    run_against_standalone("rmq4", "consumers", CONSUMER_CASES, &[], &[]);
}

#[test]
fn consumers_rmq5() {
    run_against_standalone("rmq5", "consumers", CONSUMER_CASES, &[], &[]);
}

/// The behaviour cases run on a broker with `traceTopicEnable=true`, which
/// makes RMQ_SYS_TRACE_TOPIC at start with one queue, as RocketMQ does; the
/// `trace` case checks that route (`-Dtrace.queues=1`).
fn behaviours(build: &str, cases: &[&str]) {
    run_against_standalone(
        build,
        "behaviours",
        cases,
        &["traceTopicEnable=true"],
        &[("trace.queues", "1".to_string())],
    );
}

#[test]
fn behaviours_rmq4() {
    behaviours("rmq4", BEHAVIOUR_CASES);
}

#[test]
fn behaviours_rmq5() {
    let mut cases = BEHAVIOUR_CASES.to_vec();
    // ClientConfig.setUseHeartbeatV2 exists only in the 5.x client.
    cases.push("heartbeat-v2");
    behaviours("rmq5", &cases);
}

/// A broker of its own name (one broker group) in cluster `JC`.
fn start_broker(work: &Path, name: &str, ns_addr: &str) -> Proc {
    let port = free_port_pair();
    let conf = write_conf(
        work,
        name,
        &[
            ("brokerClusterName", "JC".to_string()),
            ("brokerName", name.to_string()),
            ("listenAddr", "127.0.0.1".to_string()),
            ("brokerIP1", "127.0.0.1".to_string()),
            ("listenPort", port.to_string()),
            ("namesrvAddr", ns_addr.to_string()),
            ("storePathRootDir", work.join(name).display().to_string()),
            ("mappedFileSizeCommitLog", (4 * 1024 * 1024).to_string()),
            ("registerNameServerPeriod", "1000".to_string()),
        ],
    );
    Proc::spawn(
        name,
        &["broker", "-c", conf.to_str().unwrap()],
        "basalt broker",
        work,
    )
}

/// Waits (bounded) for `file`, or for the harness run to end first.
fn wait_for_file(file: &Path, run: &std::thread::JoinHandle<Finished>, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !run.is_finished() {
        if file.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    file.exists()
}

/// Two broker groups (broker-a, broker-b) on one NameServer; the harness
/// sends to both, this test kills broker-b with SIGKILL, and every later
/// send must succeed on broker-a.
fn failover(build: &str) {
    let Some(dir) = family_dir(FAMILY) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let work: PathBuf = tmp.path().to_path_buf();
    let home = work.join("home");
    let sync = work.join("sync");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&sync).unwrap();
    let (_ns, ns_addr) = Proc::namesrv(&work);
    let _a = start_broker(&work, "broker-a", &ns_addr);
    let mut b = start_broker(&work, "broker-b", &ns_addr);
    let mut cmd = harness(
        &dir,
        build,
        &home,
        &[
            ("failover.sync", sync.display().to_string()),
            ("failover.victim", "broker-b".to_string()),
        ],
    );
    cmd.arg(&ns_addr)
        .arg(format!("failover_{build}"))
        .arg("failover");
    let run = std::thread::spawn(move || run_bounded(&mut cmd, RUN_DEADLINE));
    if wait_for_file(&sync.join("phase1"), &run, Duration::from_secs(120)) {
        b.kill9();
        std::fs::write(sync.join("killed"), "broker-b").unwrap();
    }
    let finished = run.join().expect("harness thread");
    expect_passed(finished, &format!("{build} failover"), &home);
    // How the sends got past the dead broker (not asserted: the client's
    // retry on another broker, or a route without broker-b already).
    let log = std::fs::read_to_string(home.join("logs/rocketmqlogs/rocketmq_client.log"))
        .unwrap_or_default();
    println!(
        "{build} failover: the client logged {} sends retried on another broker",
        log.matches("resend at once").count()
    );
}

#[test]
fn failover_rmq4() {
    failover("rmq4");
}

#[test]
fn failover_rmq5() {
    failover("rmq5");
}
