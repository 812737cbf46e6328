//! Authentication and authorization on the wire (docs/auth.md): raw,
//! hand-signed requests against a real `basalt standalone` with ACL 2.0 or
//! the ACL 1.0 plain_acl.yml on. Forged, unsigned and replayed-with-changes
//! requests of each code class are refused with Java's codes, and what they
//! aimed at is unchanged afterwards.

use std::time::{Duration, Instant};

use basalt_auth::sign;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, CreateTopicRequestHeader, DeleteTopicRequestHeader};
use basalt_remoting::{ExtFields, RemotingCommand};

use crate::prom;
use crate::raw::{Raw, pull_request, send_request};
use crate::standalone::Standalone;

pub(crate) const ROOT: (&str, &str) = ("root", "root-secret-1");
const ALICE: (&str, &str) = ("alice", "alice-secret-1");

pub(crate) fn signed(mut cmd: RemotingCommand, who: (&str, &str)) -> RemotingCommand {
    sign::sign(&mut cmd, who.0, who.1, None);
    cmd
}

fn ext(pairs: &[(&str, &str)]) -> ExtFields {
    let mut e = ExtFields::new();
    for (k, v) in pairs {
        e.insert(k, v);
    }
    e
}

pub(crate) fn admin(code: i32, fields: &[(&str, &str)], body: &str) -> RemotingCommand {
    RemotingCommand::request(code)
        .with_ext(ext(fields))
        .with_body(body.as_bytes().to_vec())
}

pub(crate) fn create_topic(topic: &str) -> RemotingCommand {
    let h = CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: Some("TBW102".into()),
        read_queue_nums: 4,
        write_queue_nums: 4,
        perm: 6,
        topic_filter_type: None,
        topic_sys_flag: None,
        order: None,
        attributes: None,
        force: None,
    };
    RemotingCommand::request(request::UPDATE_AND_CREATE_TOPIC).with_ext(h.to_ext())
}

pub(crate) fn acl_body(entries: &[(&str, &[&str], &str, &[&str])]) -> String {
    let entries: Vec<serde_json::Value> = entries
        .iter()
        .map(|(r, a, d, ips)| {
            serde_json::json!({"resource": r, "actions": a, "decision": d, "sourceIps": ips})
        })
        .collect();
    serde_json::json!({"policies": [{"policyType": "Custom", "entries": entries}]}).to_string()
}

pub(crate) fn ok(r: &RemotingCommand, what: &str) {
    assert_eq!(r.code, response::SUCCESS, "{what}: {:?}", r.remark);
}

fn refused(r: &RemotingCommand, code: i32, needle: &str, what: &str) {
    assert_eq!(r.code, code, "{what} must be refused: {:?}", r.remark);
    let remark = r.remark.clone().unwrap_or_default();
    assert!(
        remark.contains(needle),
        "{what}: remark {remark:?} lacks {needle:?}"
    );
}

fn topic_exists(c: &mut Raw, topic: &str) -> bool {
    let q = signed(
        RemotingCommand::request(request::GET_TOPIC_CONFIG).with_ext(ext(&[("topic", topic)])),
        ROOT,
    );
    c.call(q).code == response::SUCCESS
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

#[test]
fn acl2_refuses_forged_unsigned_and_changed_requests() {
    let dir = tempfile::tempdir().expect("temp dir");
    let metrics = free_port();
    let init = format!(
        r#"initAuthenticationUser={{"username":"{}","password":"{}"}}"#,
        ROOT.0, ROOT.1
    );
    let mut b = Standalone::start(
        &dir.path().join("data"),
        &[
            "authenticationEnabled=true",
            "authorizationEnabled=true",
            &init,
            &format!("metricsPromExporterPort={metrics}"),
            "dashboardEnable=false",
        ],
    );
    let mut root = Raw::connect(&b.broker_addr());
    let mut alice = Raw::connect(&b.broker_addr());
    for t in ["TopicA", "TopicB"] {
        ok(
            &root.call(signed(create_topic(t), ROOT)),
            "root creates a topic",
        );
    }
    // The super user creates alice, allowed to publish to TopicA only.
    let user = format!(r#"{{"password":"{}","userType":"Normal"}}"#, ALICE.1);
    ok(
        &root.call(signed(admin(3001, &[("username", ALICE.0)], &user), ROOT)),
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

    // Allowed, denied, unsigned, forged.
    ok(
        &alice.call(signed(send_request("TopicA", 0, b"a"), ALICE)),
        "alice sends to TopicA",
    );
    let r = alice.call(signed(send_request("TopicB", 0, b"b"), ALICE));
    refused(
        &r,
        response::NO_PERMISSION,
        "User:alice",
        "alice sending to TopicB",
    );
    let remark = r.remark.unwrap_or_default();
    assert!(
        remark.contains("Topic:TopicB") && remark.contains("Pub"),
        "{remark}"
    );
    refused(
        &alice.call(send_request("TopicA", 0, b"c")),
        response::NO_PERMISSION,
        "username cannot be null",
        "an unsigned send",
    );
    let forged = signed(send_request("TopicA", 0, b"d"), (ALICE.0, "guessed-secret"));
    refused(
        &alice.call(forged),
        response::NO_PERMISSION,
        "check signature failed",
        "a forged send",
    );
    let stranger = signed(send_request("TopicA", 0, b"e"), ("mallory", "x"));
    refused(
        &alice.call(stranger),
        response::NO_PERMISSION,
        "not found",
        "an unknown user",
    );

    // Replays: identical passes (no nonce, as in Java); any covered change
    // is refused.
    let good = signed(send_request("TopicA", 0, b"f"), ALICE);
    ok(&alice.call(good.clone()), "the original");
    ok(
        &alice.call(good.clone()),
        "an identical replay (documented)",
    );
    let mut to_b = good.clone();
    to_b.ext_fields.insert("b", "TopicB");
    refused(
        &alice.call(to_b),
        response::NO_PERMISSION,
        "check signature failed",
        "a replay to another topic",
    );
    let new_body = good.clone().with_body(b"changed".to_vec());
    refused(
        &alice.call(new_body),
        response::NO_PERMISSION,
        "check signature failed",
        "a replay with another body",
    );
    let mut queue = good.clone();
    queue.ext_fields.insert("e", "3");
    refused(
        &alice.call(queue),
        response::NO_PERMISSION,
        "check signature failed",
        "a replay to another queue",
    );

    // Sub class: no Sub on TopicA or any group.
    let pull = signed(pull_request("TopicA", 0, 0), ALICE);
    refused(
        &alice.call(pull),
        response::NO_PERMISSION,
        "User:alice",
        "alice pulling",
    );

    // Admin codes from a normal user change nothing.
    let mallory = r#"{"password":"mallory-pass","userType":"Super"}"#;
    refused(
        &alice.call(signed(
            admin(3001, &[("username", "mallory")], mallory),
            ALICE,
        )),
        response::NO_PERMISSION,
        "Cluster:",
        "createUser by alice",
    );
    let got = root.call(signed(admin(3004, &[("username", "mallory")], ""), ROOT));
    ok(&got, "getUser");
    assert!(got.body.is_empty(), "mallory must not exist");
    let widen = acl_body(&[("*", &["All"], "Allow", &[])]);
    refused(
        &alice.call(signed(
            admin(3007, &[("subject", "User:alice")], &widen),
            ALICE,
        )),
        response::NO_PERMISSION,
        "Cluster:",
        "updateAcl by alice",
    );
    refused(
        &alice.call(signed(create_topic("TopicC"), ALICE)),
        response::NO_PERMISSION,
        "Topic:TopicC",
        "create topic by alice",
    );
    assert!(!topic_exists(&mut root, "TopicC"), "TopicC must not exist");
    let del = RemotingCommand::request(request::DELETE_TOPIC_IN_BROKER).with_ext(
        DeleteTopicRequestHeader {
            topic: "TopicA".into(),
        }
        .to_ext(),
    );
    refused(
        &alice.call(signed(del, ALICE)),
        response::NO_PERMISSION,
        "Topic:TopicA",
        "delete topic by alice",
    );
    assert!(topic_exists(&mut root, "TopicA"), "TopicA must still exist");
    let cfg = admin(request::UPDATE_BROKER_CONFIG, &[], "maxMessageSize=1024\n");
    refused(
        &alice.call(signed(cfg, ALICE)),
        response::NO_PERMISSION,
        "Cluster:",
        "broker config by alice",
    );
    let conf = root.call(signed(
        RemotingCommand::request(request::GET_BROKER_CONFIG),
        ROOT,
    ));
    ok(&conf, "root reads the broker config");
    assert!(
        !String::from_utf8_lossy(&conf.body).contains("maxMessageSize=1024\n"),
        "maxMessageSize unchanged"
    );

    // A policy change takes effect on the next request, no restart.
    let more = acl_body(&[("Topic:TopicB", &["Pub"], "Allow", &[])]);
    ok(
        &root.call(signed(
            admin(3007, &[("subject", "User:alice")], &more),
            ROOT,
        )),
        "updateAcl",
    );
    ok(
        &alice.call(signed(send_request("TopicB", 0, b"g"), ALICE)),
        "alice sends to TopicB now",
    );
    // A source range the caller is outside of.
    let bob = r#"{"password":"bob-secret-1"}"#;
    ok(
        &root.call(signed(admin(3001, &[("username", "bob")], bob), ROOT)),
        "create bob",
    );
    let far_only = acl_body(&[("Topic:TopicA", &["Pub"], "Allow", &["10.0.0.0/8"])]);
    ok(
        &root.call(signed(
            admin(3006, &[("subject", "User:bob")], &far_only),
            ROOT,
        )),
        "bob's acl",
    );
    let r = alice.call(signed(
        send_request("TopicA", 0, b"h"),
        ("bob", "bob-secret-1"),
    ));
    refused(
        &r,
        response::NO_PERMISSION,
        "from 127.0.0.1",
        "bob from outside 10/8",
    );

    // A user deleted while connected is refused on its open connection.
    ok(
        &root.call(signed(admin(3003, &[("username", ALICE.0)], ""), ROOT)),
        "deleteUser",
    );
    refused(
        &alice.call(signed(send_request("TopicA", 0, b"i"), ALICE)),
        response::NO_PERMISSION,
        "not found",
        "a deleted user",
    );

    // Failures are counted by reason; no secret reaches the log.
    let (status, text) = prom::http_get(metrics, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200);
    let e = prom::parse(&text).expect("metrics parse");
    assert!(e.value("basalt_auth_failures_total", &[("reason", "bad_signature")]) >= 4.0);
    assert!(e.value("basalt_auth_failures_total", &[("reason", "denied")]) >= 6.0);
    assert!(
        e.value(
            "basalt_auth_failures_total",
            &[("reason", "no_credentials")]
        ) >= 1.0
    );
    let log = b.log_text();
    for secret in [
        ROOT.1,
        ALICE.1,
        "bob-secret-1",
        "mallory-pass",
        "guessed-secret",
    ] {
        assert!(!log.contains(secret), "the log holds a secret");
    }

    // Users and ACLs survive a restart.
    drop((root, alice));
    b.stop();
    b.restart();
    let mut c = Raw::connect(&b.broker_addr());
    ok(
        &c.call(signed(send_request("TopicA", 0, b"j"), ROOT)),
        "root after restart",
    );
    let users = c.call(signed(admin(3005, &[], ""), ROOT));
    ok(&users, "listUser");
    let text = String::from_utf8_lossy(&users.body).to_string();
    assert!(
        text.contains("\"bob\"") && !text.contains("alice"),
        "{text}"
    );
    assert!(
        !text.contains("bob-secret-1"),
        "listUser must not return passwords"
    );
    let r = c.call(signed(
        send_request("TopicA", 0, b"k"),
        ("bob", "bob-secret-1"),
    ));
    refused(
        &r,
        response::NO_PERMISSION,
        "User:bob",
        "bob's ACL survived",
    );
}

const PLAIN_ACL: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicA=PUB
"#;

#[test]
fn acl1_plain_acl_is_checked_and_reloaded_without_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("plain_acl.yml");
    std::fs::write(&file, PLAIN_ACL).expect("write plain_acl.yml");
    let b = Standalone::start(
        &dir.path().join("data"),
        &[
            "aclEnable=true",
            &format!("aclPlainFile={}", file.display()),
        ],
    );
    let mut c = Raw::connect(&b.broker_addr());
    let me = ("RocketMQ", "12345678");
    // TopicA is created by its first send (autoCreateTopicEnable).
    ok(
        &c.call(signed(send_request("TopicA", 0, b"a"), me)),
        "PUB on TopicA",
    );
    let r = c.call(signed(send_request("TopicB", 0, b"b"), me));
    refused(
        &r,
        response::SYSTEM_ERROR,
        "AclException: No default permission for topic:TopicB",
        "TopicB",
    );
    refused(
        &c.call(send_request("TopicA", 0, b"c")),
        response::SYSTEM_ERROR,
        "No accessKey is configured",
        "unsigned",
    );
    let forged = signed(send_request("TopicA", 0, b"d"), ("RocketMQ", "87654321"));
    refused(
        &c.call(forged),
        response::SYSTEM_ERROR,
        "Check signature failed",
        "forged",
    );
    let mut changed = signed(send_request("TopicA", 0, b"e"), me);
    changed.ext_fields.insert("b", "TopicB");
    refused(
        &c.call(changed),
        response::SYSTEM_ERROR,
        "Check signature failed",
        "changed topic",
    );
    let ct = signed(create_topic("TopicZ"), me);
    refused(
        &c.call(ct),
        response::SYSTEM_ERROR,
        "Need admin permission",
        "admin code",
    );

    // Grant TopicB in the file; the broker picks it up within its 5 s poll.
    std::fs::write(
        &file,
        PLAIN_ACL.replace("- TopicA=PUB", "- TopicA=PUB\n      - TopicB=PUB"),
    )
    .expect("rewrite plain_acl.yml");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = c.call(signed(send_request("TopicB", 0, b"f"), me));
        if r.code == response::SUCCESS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new permission never took effect: {:?}",
            r.remark
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
