//! The official Java client 5.5.0 with `AclClientRPCHook` against Basalt
//! with ACL 2.0 on (`interop/java-client`, class `basalt.interop.AclMain`):
//! allowed and denied topics, a group without Sub, a wrong secret, no
//! credentials, a policy change taking effect without a restart, and a user
//! deleted while its client stays connected. The signatures are the real
//! client's, so this is what proves Basalt computes them as Java does.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::auth::{ROOT, acl_body, admin, create_topic, ok, signed};
use crate::interop::{Finished, family_dir, java, run_bounded};
use crate::raw::Raw;
use crate::standalone::Standalone;

fn wait_for(file: &Path, run: &std::thread::JoinHandle<Finished>) -> bool {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline && !run.is_finished() {
        if file.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    file.exists()
}

#[test]
fn java_client_with_acl_rpc_hook() {
    let Some(dir) = family_dir("java-client") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let init = format!(
        r#"initAuthenticationUser={{"username":"{}","password":"{}"}}"#,
        ROOT.0, ROOT.1
    );
    let b = Standalone::start(
        &tmp.path().join("data"),
        &[
            "authenticationEnabled=true",
            "authorizationEnabled=true",
            &init,
        ],
    );
    let mut root = Raw::connect(&b.broker_addr());
    for t in ["TopicA", "TopicB"] {
        ok(&root.call(signed(create_topic(t), ROOT)), "create topic");
    }
    let user = r#"{"password":"alice-secret-1"}"#;
    ok(
        &root.call(signed(admin(3001, &[("username", "alice")], user), ROOT)),
        "createUser",
    );
    let acl = acl_body(&[("Topic:TopicA", &["Pub"], "Allow", &[])]);
    ok(
        &root.call(signed(
            admin(3006, &[("subject", "User:alice")], &acl),
            ROOT,
        )),
        "createAcl",
    );

    let flags = tmp.path().join("flags");
    std::fs::create_dir_all(&flags).expect("flags dir");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).expect("home dir");
    let cp = std::fs::read_to_string(dir.join("rmq5.classpath")).expect("rmq5.classpath");
    let mut cmd = Command::new(java());
    cmd.args([
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
    ])
    .arg(format!("-Duser.home={}", home.display()))
    .arg("-cp")
    .arg(cp.trim())
    .arg("basalt.interop.AclMain")
    .arg(b.namesrv_addr())
    .arg(&flags);
    let run = std::thread::spawn(move || run_bounded(&mut cmd, Duration::from_secs(150)));

    // Grant while the client runs: Pub on TopicB, Sub on TopicA and its group.
    if wait_for(&flags.join("granted-wait"), &run) {
        let more = acl_body(&[
            ("Topic:TopicB", &["Pub"], "Allow", &[]),
            ("Topic:TopicA", &["Pub", "Sub"], "Allow", &[]),
            ("Group:alice_group", &["Sub"], "Allow", &[]),
        ]);
        ok(
            &root.call(signed(
                admin(3007, &[("subject", "User:alice")], &more),
                ROOT,
            )),
            "updateAcl",
        );
        std::fs::write(flags.join("granted"), b"").expect("flag");
    }
    if wait_for(&flags.join("delete-wait"), &run) {
        ok(
            &root.call(signed(admin(3003, &[("username", "alice")], ""), ROOT)),
            "deleteUser",
        );
        std::fs::write(flags.join("deleted"), b"").expect("flag");
    }
    let finished = run.join().expect("harness thread");
    let report = finished.report("AclMain");
    assert!(finished.success(), "{report}");
    assert!(finished.stdout.contains("ACL PASSED"), "{report}");
    for case in [
        "PASS allowed-topic-A",
        "PASS denied-topic-B refused: 16",
        "PASS pull-without-sub refused",
        "PASS wrong-secret refused: 16",
        "PASS no-credentials refused: 16",
        "PASS topic-B-after-grant",
        "PASS pull-after-grant",
        "PASS deleted-user refused: 16",
    ] {
        assert!(finished.stdout.contains(case), "missing {case:?}\n{report}");
    }
}
