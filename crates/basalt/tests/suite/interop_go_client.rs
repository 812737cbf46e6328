//! Interop with the official RocketMQ Go client
//! (`github.com/apache/rocketmq-client-go/v2`, a remoting client written in
//! Go, not the C++ wrapper), run unchanged against `basalt standalone`.
//!
//! `interop/go-client/prepare.sh` builds `goclient` (interop/go-client/*.go)
//! into `target/interop/go-client/bin/`. Each of its sub-commands is one
//! self-checking case: it prints what it sent and received, counts every
//! message exactly and exits non-zero, saying why, on any mismatch:
//! * `modes`: sync, async, oneway and batch sends with tags, some bodies
//!   compressed by the client; two clustering push consumers of one group
//!   share the topic (together each message once, each some) and a
//!   `TagA || TagB` consumer gets exactly those;
//! * `orderly`: sends through the hash queue selector by sharding key; an
//!   orderly push consumer sees each key's messages once, in order;
//! * `pull`: a pull consumer (Subscribe, Poll, ACK) reads once what a
//!   producer sent to a topic its first send created;
//! * `delay`: delay-level messages arrive once, after their delay;
//! * `retry`: messages a consumer fails come back once from the retry topic;
//! * `transaction`: committed, rolled-back and checked-back half messages;
//!   the consumer gets exactly the committed ones;
//! * `admin`: the client's admin API creates, lists and deletes a topic and
//!   reads the broker's subscription groups;
//! * `produce` / `consume`: a group's offsets survive a broker restart.
//!
//! What the Go client does differently is in docs/go-client.md.

use crate::interop::{Finished, family_dir, run_bounded};
use crate::standalone::Standalone;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// How long one `goclient` case may run (it waits at most 60 s for
/// messages, then settles).
const CASE_DEADLINE: Duration = Duration::from_secs(150);

/// The harness binary and the broker a case talks to.
struct GoClient {
    bin: PathBuf,
    home: PathBuf,
    namesrv: String,
}

impl GoClient {
    /// Runs `goclient CASE -namesrv .. -topic TOPIC ARGS..`, bounded.
    fn run(&self, case: &str, topic: &str, args: &[&str]) -> Finished {
        let mut cmd = Command::new(&self.bin);
        cmd.arg(case)
            .args(["-namesrv", &self.namesrv, "-topic", topic])
            .args(args)
            // The client writes nothing to HOME for these cases; keep it
            // out of the real one regardless.
            .env("HOME", &self.home);
        run_bounded(&mut cmd, CASE_DEADLINE)
    }
}

/// Creates `topic` with `queues` queues through `basalt admin`.
fn create_topic(namesrv: &str, topic: &str, queues: u32) {
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["admin", "--namesrv", namesrv, "topic", "create"])
        .args(["--topic", topic, "--queues", &queues.to_string()])
        .output()
        .expect("run basalt admin");
    assert!(
        out.status.success(),
        "create topic {topic}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The harness, a temporary directory and its client HOME, or `None` when
/// the harness is not built (the test then skips, or fails in CI).
fn setup() -> Option<(PathBuf, tempfile::TempDir, PathBuf)> {
    let dir = family_dir("go-client")?;
    let tmp = tempfile::tempdir().expect("temp dir");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).expect("client home");
    Some((dir.join("bin").join("goclient"), tmp, home))
}

fn client(bin: &Path, home: &Path, broker: &Standalone) -> GoClient {
    GoClient {
        bin: bin.to_path_buf(),
        home: home.to_path_buf(),
        namesrv: broker.namesrv_addr(),
    }
}

/// Every case but the restart one, in parallel against one broker, each on
/// a topic of its own.
#[test]
fn go_client_cases_against_standalone() {
    let Some((bin, tmp, home)) = setup() else {
        return;
    };
    // Half messages are checked back within seconds, not the default 30 s.
    let broker = Standalone::start(
        &tmp.path().join("data"),
        &["transactionCheckInterval=2000", "transactionTimeOut=1000"],
    );
    let go = client(&bin, &home, &broker);
    let broker_addr = broker.broker_addr();
    // (case, topic, queues created beforehand, extra args). The pull case's
    // topic is created by its producer's first send (TBW102 route).
    let cases: [(&str, &str, Option<u32>, &[&str]); 7] = [
        ("modes", "GoModes", Some(8), &["-prefix", "gm", "-n", "12"]),
        (
            "orderly",
            "GoOrderly",
            Some(8),
            &["-prefix", "go", "-n", "15"],
        ),
        ("pull", "GoPull", None, &["-prefix", "gp", "-n", "30"]),
        ("delay", "GoDelay", Some(4), &["-prefix", "gd"]),
        // Redeliveries wait for the client's route poll (see the docs).
        (
            "retry",
            "GoRetry",
            Some(4),
            &["-prefix", "gr", "-n", "4", "-wait", "90s"],
        ),
        (
            "transaction",
            "GoTx",
            Some(4),
            &["-prefix", "gt", "-n", "3"],
        ),
        // Creates and deletes its topic itself.
        (
            "admin",
            "GoAdmin",
            None,
            &["-prefix", "ga", "-broker", &broker_addr],
        ),
    ];
    for (_, topic, queues, _) in &cases {
        if let Some(queues) = queues {
            create_topic(&go.namesrv, topic, *queues);
        }
    }
    let results: Vec<(&str, Finished)> = std::thread::scope(|s| {
        let running: Vec<_> = cases
            .iter()
            .map(|(case, topic, _, args)| (*case, s.spawn(|| go.run(case, topic, args))))
            .collect();
        running
            .into_iter()
            .map(|(case, h)| (case, h.join().expect("case thread")))
            .collect()
    });
    let mut failed = Vec::new();
    for (case, finished) in &results {
        println!("{}", finished.report(&format!("goclient {case}")));
        if !finished.success() || !finished.stdout.contains(&format!("PASS {case}")) {
            failed.push(*case);
        }
    }
    assert!(
        failed.is_empty(),
        "goclient case(s) failed: {failed:?} (their output is above)"
    );
}

/// A group consumes, the broker stops cleanly and starts again, and the
/// group's next consumer gets exactly the messages sent since: the offsets
/// the Go client committed (UPDATE_CONSUMER_OFFSET) survived the restart
/// and QUERY_CONSUMER_OFFSET hands them back. While that consumer waits,
/// `basalt admin consumer-status` asks it for its running info
/// (GET_CONSUMER_RUNNING_INFO, broker to client) and shows its queues.
#[test]
fn go_client_offsets_survive_broker_restart() {
    let Some((bin, tmp, home)) = setup() else {
        return;
    };
    let mut broker = Standalone::start(&tmp.path().join("data"), &[]);
    let go = client(&bin, &home, &broker);
    let topic = "GoResume";
    create_topic(&go.namesrv, topic, 4);
    let consume = |prefix: &str| {
        let args = ["-group", GROUP, "-prefix", prefix, "-n", "20"];
        go.run("consume", topic, &args)
    };
    go.run("produce", topic, &["-prefix", "before", "-n", "20"])
        .expect_success("produce before the restart");
    consume("before").expect_success("consume before the restart");
    broker.stop();
    broker.restart();
    // The consumer sees exactly after-0..19: a message from before the
    // restart would be reported as not expected.
    std::thread::scope(|s| {
        let waiting = s.spawn(|| consume("after"));
        let status = await_running_info(&go.namesrv, topic);
        println!("consumer-status -g {GROUP}: {status}");
        go.run("produce", topic, &["-prefix", "after", "-n", "20"])
            .expect_success("produce after the restart");
        waiting
            .join()
            .expect("consumer thread")
            .expect_success("consume after the restart");
    });
}

/// The group of the restart test.
const GROUP: &str = "go-resume";

/// Polls `basalt admin --json consumer-status` until the group's Go
/// consumer reports its running info with the topic's 4 queues (the
/// broker asks the client over its connection); panics after 30 s.
fn await_running_info(namesrv: &str, topic: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    while std::time::Instant::now() < deadline {
        let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["admin", "--namesrv", namesrv, "--json", "consumer-status"])
            .args(["-g", GROUP])
            .output()
            .expect("run basalt admin");
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) {
            let queues = v["queues"]
                .as_array()
                .map_or(0, |q| q.iter().filter(|q| q["topic"] == topic).count());
            let version = v["properties"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["key"] == "PROP_CLIENT_VERSION"));
            if queues == 4 && version {
                return v;
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("the Go consumer of {GROUP} never reported its 4 queues; last answer:\n{last}");
}
