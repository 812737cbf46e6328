//! The Java 5.5.0 client's own POP calls against Basalt: the `pop` case of
//! `interop/java-client` (src/rmq5, PopCase) pops, acks, lets a message
//! come back, changes an invisible time, through MQClientAPIImpl, which
//! decodes the broker's POP answers and builds each `POP_CK` as the
//! client's POP push consumer does (docs/pop.md).

use std::time::Duration;

use crate::interop::{family_dir, java, run_bounded};
use crate::standalone::{self, Standalone};

#[test]
fn java_client_pops_and_acks() {
    let Some(dir) = family_dir("java-client") else {
        return;
    };
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
    .arg("pop_rmq5")
    .arg("pop");
    let run = run_bounded(&mut cmd, Duration::from_secs(200));
    let run = run.expect_success("java 5.5.0 pop");
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
