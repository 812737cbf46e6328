//! Apache RocketMQ's `mqadmin` 5.5.0 against Basalt with ACL 2.0 on
//! (authentication and authorization, initial user root). With
//! `$ROCKETMQ_HOME/conf/tools.yml` naming root (`accessKey`/`secretKey`,
//! read by `AclUtils.getAclRPCHook`), mqadmin signs with
//! `AclClientRPCHook` and every auth verb (createUser … deleteAcl) and an
//! ordinary one (updateTopic, topicList) takes effect; each effect is read
//! back with `basalt admin user|acl` as root. Without tools.yml, mqadmin
//! sends unsigned requests: each is refused with 16 and changes nothing.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::auth::ROOT;
use crate::interop::{Finished, family_dir};
use crate::interop_mqadmin::harness::{Mq, rows};
use crate::standalone::Standalone;

const ALICE_PW: &str = "alice-secret-1";

/// `basalt admin --json ARGS` signed as root: `Ok(json)` or `Err(stderr)`.
fn basalt_root(namesrv: &str, args: &[&str]) -> Result<Value, String> {
    println!(">>> basalt admin {} (as root)", args.join(" "));
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["--access-key", ROOT.0])
        .env("BASALT_SECRET_KEY", ROOT.1)
        .args(["admin", "--json", "--namesrv", namesrv])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run basalt admin");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("{stdout}{stderr}");
    if !out.status.success() {
        return Err(stderr);
    }
    Ok(serde_json::from_str(&stdout).expect("basalt admin --json prints JSON"))
}

/// `(userName, userType, userStatus)` of every user, from `basalt admin
/// user list`.
fn users(namesrv: &str, broker: &str) -> Vec<(String, String, String)> {
    let j = basalt_root(namesrv, &["user", "list", "-b", broker]).expect("user list");
    let s = |row: &Value, k: &str| row[k].as_str().unwrap_or("-").to_string();
    j["users"]
        .as_array()
        .expect("users")
        .iter()
        .map(|r| (s(r, "userName"), s(r, "userType"), s(r, "userStatus")))
        .collect()
}

/// `(resource, actions, sourceIps, decision)` of a subject's entries, from
/// `basalt admin acl get`; `None` when it has no ACL.
fn acl(namesrv: &str, broker: &str, subject: &str) -> Option<Vec<[String; 4]>> {
    let j = match basalt_root(namesrv, &["acl", "get", "-b", broker, "-s", subject]) {
        Ok(j) => j,
        Err(e) if e.contains("no acl for") => return None,
        Err(e) => panic!("acl get: {e}"),
    };
    let s = |row: &Value, k: &str| row[k].as_str().unwrap_or("-").to_string();
    Some(
        j["acls"]
            .as_array()
            .expect("acls")
            .iter()
            .map(|r| {
                [
                    s(r, "resource"),
                    s(r, "actions"),
                    s(r, "sourceIps"),
                    s(r, "decision"),
                ]
            })
            .collect(),
    )
}

fn entry(r: &str, a: &str, ip: &str, d: &str) -> [String; 4] {
    [r.into(), a.into(), ip.into(), d.into()]
}

fn topics(namesrv: &str) -> Vec<String> {
    let j = basalt_root(namesrv, &["topic", "list"]).expect("topic list");
    j["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .filter_map(|t| t["topic"].as_str().map(str::to_string))
        .collect()
}

/// Runs unsigned verbs (one line each) side by side; each must end with
/// mqadmin's "command failed" and the broker's NO_PERMISSION (`CODE: 16`)
/// for its missing AccessKey.
fn refused_all(mq: &Mq, lines: &[&str]) {
    let runs: Vec<Finished> = std::thread::scope(|s| {
        let hs: Vec<_> = lines
            .iter()
            .map(|l| {
                let args: Vec<&str> = l.split_whitespace().collect();
                s.spawn(move || mq.run(&args))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("mqadmin run"))
            .collect()
    });
    for (l, f) in lines.iter().zip(runs) {
        let what = format!("unsigned mqadmin {l}");
        println!("{}", f.report(&what));
        let both = format!("{}\n{}", f.stdout, f.stderr);
        assert!(both.contains("command failed"), "{what} not refused");
        assert!(both.contains("CODE: 16"), "{what}: not NO_PERMISSION");
        assert!(
            both.contains("username cannot be null"),
            "{what}: not refused for its missing AccessKey"
        );
    }
}

fn write_tools_yml(home: &Path) {
    let conf = home.join("conf");
    std::fs::create_dir_all(&conf).expect("conf dir");
    let yml = format!("accessKey: {}\nsecretKey: {}\n", ROOT.0, ROOT.1);
    std::fs::write(conf.join("tools.yml"), yml).expect("tools.yml");
}

#[test]
fn mqadmin_manages_users_and_acls_with_tools_yml_credentials() {
    let Some(family) = family_dir("mqadmin") else {
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
            "dashboardEnable=false",
            "metricsExporterType=DISABLE",
            "authenticationEnabled=true",
            "authorizationEnabled=true",
            &init,
        ],
    );
    let (ns, addr) = (b.namesrv_addr(), b.broker_addr());
    let logs = tmp.path().join("home");
    std::fs::create_dir_all(&logs).expect("mqadmin home");
    let signed_home = tmp.path().join("rmq-signed");
    write_tools_yml(&signed_home);
    let anon_home = tmp.path().join("rmq-anon");
    std::fs::create_dir_all(&anon_home).expect("anon home");
    let mq = Mq::new(family.clone(), &logs, ns.clone()).with_rocketmq_home(&signed_home);
    let anon = Mq::new(family, &logs, ns.clone()).with_rocketmq_home(&anon_home);
    let a = addr.as_str();

    user_verbs(&mq, &ns, a);
    acl_verbs(&mq, &ns, a);
    unsigned_changes_nothing(&anon, &ns, a);
    update_acl(&mq, &ns, a);
    ordinary_verbs(&mq, &anon, &ns, a);
    deletes(&mq, &anon, &ns, a);
    drop(b);
}

fn user(name: &str, t: &str, status: &str) -> (String, String, String) {
    (name.to_string(), t.to_string(), status.to_string())
}

/// One signed mqadmin verb given as one line; its stdout.
fn ok(mq: &Mq, line: &str) -> String {
    let args: Vec<&str> = line.split_whitespace().collect();
    mq.ok(&args)
}

/// Signed verbs side by side; their stdouts in order.
fn ok_all(mq: &Mq, lines: &[&str]) -> Vec<String> {
    let args: Vec<Vec<&str>> = lines
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let refs: Vec<&[&str]> = args.iter().map(Vec::as_slice).collect();
    mq.ok_all(&refs)
}

/// createUser, listUser, getUser, updateUser, signed.
fn user_verbs(mq: &Mq, ns: &str, a: &str) {
    let out = ok(
        mq,
        &format!("createUser -b {a} -u alice -p {ALICE_PW} -t Normal"),
    );
    assert!(
        out.contains(&format!("create user to {a} success.")),
        "{out}"
    );
    let root = user("root", "Super", "enable");
    assert_eq!(
        users(ns, a),
        vec![user("alice", "Normal", "enable"), root.clone()]
    );

    let outs = ok_all(
        mq,
        &[
            &format!("listUser -b {a}"),
            &format!("getUser -b {a} -u alice"),
        ],
    );
    // mqadmin prints #UserName #Password #UserType #UserStatus; Basalt
    // never returns passwords, so the column reads "null".
    assert_eq!(
        rows(&outs[0], "#UserName"),
        vec![
            vec!["alice", "null", "Normal", "enable"],
            vec!["root", "null", "Super", "enable"]
        ]
    );
    assert_eq!(
        rows(&outs[1], "#UserName"),
        vec![vec!["alice", "null", "Normal", "enable"]]
    );

    let out = ok(mq, &format!("updateUser -b {a} -u alice -s disable"));
    assert!(
        out.contains(&format!("update user to {a} success.")),
        "{out}"
    );
    assert_eq!(
        users(ns, a),
        vec![user("alice", "Normal", "disable"), root.clone()]
    );
    // Back on with the CLI's own verb.
    basalt_root(
        ns,
        &["user", "update", "-b", a, "-u", "alice", "-s", "enable"],
    )
    .expect("basalt user update");
    assert_eq!(users(ns, a), vec![user("alice", "Normal", "enable"), root]);
}

fn created_acl() -> Vec<[String; 4]> {
    vec![
        entry("Topic:TA", "Pub,Sub", "127.0.0.1", "Allow"),
        entry("Group:GA", "Pub,Sub", "127.0.0.1", "Allow"),
    ]
}

/// createAcl, getAcl, listAcl, signed.
fn acl_verbs(mq: &Mq, ns: &str, a: &str) {
    let out = ok(
        mq,
        &format!(
            "createAcl -b {a} -s User:alice -r Topic:TA,Group:GA -a Pub,Sub -i 127.0.0.1 -d Allow"
        ),
    );
    assert!(
        out.contains(&format!("create acl to {a} success.")),
        "{out}"
    );
    assert_eq!(acl(ns, a, "alice"), Some(created_acl()));

    let outs = ok_all(
        mq,
        &[
            &format!("getAcl -b {a} -s User:alice"),
            &format!("listAcl -b {a}"),
        ],
    );
    for out in &outs {
        let r = rows(out, "#Subject");
        assert_eq!(r.len(), 2, "two entries:\n{out}");
        for (row, want) in r.iter().zip(["Topic:TA", "Group:GA"]) {
            // #Subject #PolicyType #Resource #Actions([Pub, Sub]) #SourceIp #Decision
            assert_eq!(&row[..3], ["User:alice", "Custom", want], "{out}");
            assert_eq!(row.last().map(String::as_str), Some("Allow"), "{out}");
        }
    }
}

/// Unsigned (no tools.yml): refused; users and ACL as they were.
fn unsigned_changes_nothing(anon: &Mq, ns: &str, a: &str) {
    let lines = [
        format!("createUser -b {a} -u mallory -p mallory-pw -t Super"),
        format!("updateUser -b {a} -u alice -s disable"),
        format!("listUser -b {a}"),
        format!("updateAcl -b {a} -s User:alice -r Topic:TA -a All -d Allow"),
        format!("deleteAcl -b {a} -s User:alice"),
        format!("getAcl -b {a} -s User:alice"),
    ];
    for chunk in lines.chunks(3) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        refused_all(anon, &refs);
    }
    assert_eq!(
        users(ns, a),
        vec![
            user("alice", "Normal", "enable"),
            user("root", "Super", "enable")
        ]
    );
    assert_eq!(acl(ns, a, "alice"), Some(created_acl()));
}

/// updateAcl replaces one resource's entry.
fn update_acl(mq: &Mq, ns: &str, a: &str) {
    let out = ok(
        mq,
        &format!("updateAcl -b {a} -s User:alice -r Topic:TA -a Pub -d Deny"),
    );
    assert!(
        out.contains(&format!("update acl to {a} success.")),
        "{out}"
    );
    assert_eq!(
        acl(ns, a, "alice"),
        Some(vec![
            entry("Topic:TA", "Pub", "-", "Deny"),
            entry("Group:GA", "Pub,Sub", "127.0.0.1", "Allow"),
        ])
    );
}

/// updateTopic and topicList, signed and unsigned.
fn ordinary_verbs(mq: &Mq, anon: &Mq, ns: &str, a: &str) {
    let out = ok(mq, &format!("updateTopic -b {a} -t MqAuthT -r 2 -w 2"));
    assert!(out.contains("create topic to"), "{out}");
    refused_all(anon, &[&format!("updateTopic -b {a} -t AnonT -r 2 -w 2")]);
    let list = ok(mq, "topicList");
    let listed: Vec<&str> = list.lines().map(str::trim).collect();
    assert!(listed.contains(&"MqAuthT"), "{list}");
    let t = topics(ns);
    assert_eq!(t.iter().filter(|t| *t == "MqAuthT").count(), 1, "{t:?}");
    assert_eq!(t.iter().filter(|t| *t == "AnonT").count(), 0, "{t:?}");
}

/// deleteAcl of one resource, deleteUser (its ACL goes with it), and the
/// unsigned deleteUser refused before.
fn deletes(mq: &Mq, anon: &Mq, ns: &str, a: &str) {
    let out = ok(mq, &format!("deleteAcl -b {a} -s User:alice -r Group:GA"));
    assert!(
        out.contains(&format!("delete acl to {a} success.")),
        "{out}"
    );
    assert_eq!(
        acl(ns, a, "alice"),
        Some(vec![entry("Topic:TA", "Pub", "-", "Deny")])
    );

    refused_all(anon, &[&format!("deleteUser -b {a} -u alice")]);
    assert_eq!(users(ns, a).len(), 2);

    let out = ok(mq, &format!("deleteUser -b {a} -u alice"));
    assert!(
        out.contains(&format!("delete user to {a} success.")),
        "{out}"
    );
    assert_eq!(users(ns, a), vec![user("root", "Super", "enable")]);
    let gone = basalt_root(ns, &["user", "get", "-b", a, "-u", "alice"]).unwrap_err();
    assert!(gone.contains("no user alice"), "{gone}");
    assert_eq!(acl(ns, a, "alice"), None, "the user's ACL went with it");
    let j = basalt_root(ns, &["acl", "list", "-b", a]).expect("acl list");
    assert_eq!(j["count"], 0, "no ACL left: {j}");
}
