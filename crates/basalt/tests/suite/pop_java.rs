//! The Java 5.5.0 client's own POP calls against Basalt: the `pop` case of
//! `interop/java-client` (src/rmq5, PopCase) pops, acks, lets a message
//! come back, changes an invisible time, through MQClientAPIImpl, which
//! decodes the broker's POP answers and builds each `POP_CK` as the
//! client's POP push consumer does (docs/pop.md); the `pop-push` case
//! (PopPushCase) runs that POP push consumer itself, assigned its queues by
//! the broker (QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE).

use std::time::Duration;

use crate::interop::{family_dir, java, run_bounded};
use crate::standalone::{self, Standalone};

/// Runs one case of the 5.x harness against a fresh standalone broker.
fn run_case(case: &str) -> Option<crate::interop::Finished> {
    let dir = family_dir("java-client")?;
    let tmp = tempfile::tempdir().expect("tempdir");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).expect("home");
    let broker = Standalone::start(&tmp.path().join("data"), &standalone::NO_DISK_LIMITS);
    let cp = std::fs::read_to_string(dir.join("rmq5.classpath")).expect("rmq5 classpath");
    let mut cmd = std::process::Command::new(java());
    cmd.args([
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
    ])
    .arg(format!("-Duser.home={}", home.display()))
    .arg("-cp")
    .arg(cp.trim())
    .arg("basalt.interop.Main")
    .arg(broker.namesrv_addr())
    .arg(format!("{}_rmq5", case.replace('-', "_")))
    .arg(case);
    let run = run_bounded(&mut cmd, Duration::from_secs(200));
    drop(broker);
    Some(run.expect_success(&format!("java 5.5.0 {case}")))
}

#[test]
fn java_client_pops_and_acks() {
    let Some(run) = run_case("pop") else { return };
    assert!(
        run.stdout.contains("ALL PASSED"),
        "{}",
        run.report("java pop")
    );
    assert!(
        run.stdout.contains("redelivered"),
        "the redelivery step ran"
    );
}

/// The 5.x POP push consumer (setClientRebalance(false)) on a group set to
/// POP: QUERY_ASSIGNMENT hands it each broker's queue -1, and it pops and
/// consumes every message exactly once.
#[test]
fn java_pop_push_consumer_is_assigned_and_pops() {
    let Some(run) = run_case("pop-push") else {
        return;
    };
    assert!(
        run.stdout.contains("ALL PASSED"),
        "{}",
        run.report("java pop-push")
    );
}
