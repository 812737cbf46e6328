//! The NameServer's gate (docs/auth.md#nameserver): with
//! `authenticationEnabled`, `basalt standalone`'s NameServer takes its
//! writes only from a super user its settings name, signed; reads pass.
//! The broker signs its own registrations, so it registers as before;
//! `basalt admin --access-key` signs the CLI's requests.

use std::process::Command;
use std::time::{Duration, Instant};

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    AddWritePermOfBrokerRequestHeader, CommandHeader, DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader, WipeWritePermOfBrokerRequestHeader,
};
use basalt_remoting::{ExtFields, RemotingCommand};

use crate::auth::{ROOT, admin, create_topic, ok, signed};
use crate::raw::Raw;
use crate::standalone::{Standalone, broker_binary};

/// A user of the broker's ACL store; not a super user of the NameServer.
const CAROL: (&str, &str) = ("carol", "carol-secret-1");

fn route(ns: &mut Raw, topic: &str) -> RemotingCommand {
    let h = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: Some(true),
    };
    ns.call(RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC).with_ext(h.to_ext()))
}

/// The broker name and write permission of `topic`'s first queue data.
fn route_perm(ns: &mut Raw, topic: &str) -> Option<(String, i64)> {
    let r = route(ns, topic);
    if r.code != response::SUCCESS {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("route JSON");
    let q = &v["queueDatas"][0];
    Some((q["brokerName"].as_str()?.to_string(), q["perm"].as_i64()?))
}

fn wipe(broker_name: &str) -> RemotingCommand {
    let h = WipeWritePermOfBrokerRequestHeader {
        broker_name: broker_name.into(),
    };
    RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER).with_ext(h.to_ext())
}

fn refused(r: &RemotingCommand, needle: &str, what: &str) {
    assert_eq!(r.code, response::NO_PERMISSION, "{what}: {:?}", r.remark);
    let remark = r.remark.clone().unwrap_or_default();
    assert!(
        remark.contains(needle),
        "{what}: {remark:?} lacks {needle:?}"
    );
}

#[test]
fn namesrv_writes_need_a_signed_super_user() {
    let dir = tempfile::tempdir().expect("temp dir");
    let init = format!(
        r#"initAuthenticationUser={{"username":"{}","password":"{}"}}"#,
        ROOT.0, ROOT.1
    );
    let b = Standalone::start(
        &dir.path().join("data"),
        &["authenticationEnabled=true", &init, "dashboardEnable=false"],
    );
    let mut broker = Raw::connect(&b.broker_addr());
    ok(
        &broker.call(signed(create_topic("NsT"), ROOT)),
        "create NsT",
    );
    let user = format!(r#"{{"password":"{}","userType":"Normal"}}"#, CAROL.1);
    ok(
        &broker.call(signed(admin(3001, &[("username", CAROL.0)], &user), ROOT)),
        "createUser carol",
    );

    // Reads pass unsigned; the broker's own (signed) registration landed.
    let mut ns = Raw::connect(&b.namesrv_addr());
    let deadline = Instant::now() + Duration::from_secs(15);
    let (name, perm) = loop {
        if let Some(found) = route_perm(&mut ns, "NsT") {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "NsT never reached the NameServer"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(perm & 2, 2, "NsT is writable: perm {perm}");

    // Writes: unsigned, by a user who is not the NameServer's super user,
    // with a wrong secret: each refused, and nothing changed.
    refused(
        &ns.call(wipe(&name)),
        "username cannot be null",
        "unsigned wipe",
    );
    refused(
        &ns.call(signed(wipe(&name), CAROL)),
        "is not a super user",
        "carol's wipe",
    );
    refused(
        &ns.call(signed(wipe(&name), (ROOT.0, "not-the-secret"))),
        "check signature failed",
        "a forged wipe",
    );
    let mut forged = signed(wipe(&name), ROOT);
    forged.ext_fields.insert("brokerName", "another-broker");
    refused(&ns.call(forged), "check signature failed", "a changed wipe");
    let del = DeleteTopicFromNamesrvRequestHeader {
        topic: "NsT".into(),
        cluster_name: None,
    };
    let del = RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV).with_ext(del.to_ext());
    refused(
        &ns.call(del),
        "username cannot be null",
        "unsigned topic delete",
    );
    let mut kv = ExtFields::new();
    for (k, v) in [
        ("namespace", "ORDER_TOPIC_CONFIG"),
        ("key", "NsT"),
        ("value", "x:1"),
    ] {
        kv.insert(k, v);
    }
    let put = RemotingCommand::request(request::PUT_KV_CONFIG).with_ext(kv);
    refused(
        &ns.call(put),
        "username cannot be null",
        "unsigned PUT_KV_CONFIG",
    );
    assert_eq!(route_perm(&mut ns, "NsT").map(|(_, p)| p & 2), Some(2));

    // The super user's signed wipe and add take effect.
    let r = ns.call(signed(wipe(&name), ROOT));
    ok(&r, "root's wipe");
    assert_eq!(route_perm(&mut ns, "NsT").map(|(_, p)| p & 2), Some(0));
    let add = AddWritePermOfBrokerRequestHeader {
        broker_name: name.clone(),
    };
    let add = RemotingCommand::request(request::ADD_WRITE_PERM_OF_BROKER).with_ext(add.to_ext());
    ok(&ns.call(signed(add, ROOT)), "root's add");
    assert_eq!(route_perm(&mut ns, "NsT").map(|(_, p)| p & 2), Some(2));

    // `basalt admin` signs with --access-key and BASALT_SECRET_KEY: refused
    // without them, and a create and a delete (broker and NameServer) work
    // with them.
    let cli = |creds: bool, args: &[&str]| {
        let mut c = Command::new(broker_binary());
        if creds {
            c.args(["--access-key", ROOT.0])
                .env("BASALT_SECRET_KEY", ROOT.1);
        }
        c.args(["admin", "--namesrv", &b.namesrv_addr()])
            .args(args)
            .output()
            .expect("run basalt admin")
    };
    let create = ["topic", "create", "-t", "CliT", "--queues", "2"];
    let o = cli(false, &create);
    assert!(!o.status.success(), "an unsigned create must fail");
    let o = cli(true, &create);
    assert!(
        o.status.success(),
        "signed create: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while route_perm(&mut ns, "CliT").is_none() {
        assert!(
            Instant::now() < deadline,
            "CliT never reached the NameServer"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let o = cli(true, &["topic", "delete", "-t", "CliT"]);
    assert!(
        o.status.success(),
        "signed delete: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(route(&mut ns, "CliT").code, response::TOPIC_NOT_EXIST);
    drop(b);
}
