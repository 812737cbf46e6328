//! ACL 2.0 users and ACLs replicated (docs/auth.md "Replication"): a slave
//! and the ledger followers hold what was created on the master, follow its
//! changes and deletions, keep them across a restart without the master,
//! and a new ledger leader authenticates users created on the old one.
//! Basalt's AUTH_METADATA_SYNC (30005) answers passwords only to a signed
//! super user. Real processes; raw signed requests.

use std::path::Path;
use std::time::Duration;

use basalt_client::{Admin, ClientConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::{ExtFields, RemotingClient, RemotingCommand};

use crate::auth::{ROOT, acl_body, admin, create_topic, ok, signed};
use crate::procs::ledger_group::LedgerGroup;
use crate::procs::{Proc, eventually, free_port_pair, write_conf};
use crate::raw::send_request;
use crate::standalone::Standalone;

const ALICE: (&str, &str) = ("alice", "alice-repl-secret-1");
const ALICE_NEW: (&str, &str) = ("alice", "alice-repl-secret-2");

fn root_json() -> String {
    format!(r#"{{"username":"{}","password":"{}"}}"#, ROOT.0, ROOT.1)
}

fn auth_settings() -> Vec<(&'static str, String)> {
    vec![
        ("authenticationEnabled", "true".into()),
        ("authorizationEnabled", "true".into()),
        ("initAuthenticationUser", root_json()),
    ]
}

async fn call(client: &RemotingClient, addr: &str, cmd: RemotingCommand) -> RemotingCommand {
    client
        .invoke(addr, cmd, Duration::from_secs(5))
        .await
        .unwrap_or_else(|e| panic!("call to {addr}: {e}"))
}

fn topic_query(topic: &str) -> RemotingCommand {
    let mut ext = ExtFields::new();
    ext.insert("topic", topic);
    RemotingCommand::request(request::GET_TOPIC_CONFIG).with_ext(ext)
}

fn get_user(name: &str) -> RemotingCommand {
    signed(admin(3004, &[("username", name)], ""), ROOT)
}

/// Creates alice on `addr` with `acl` entries, signed by root.
async fn create_alice(client: &RemotingClient, addr: &str, resource: &str, actions: &[&str]) {
    let user = format!(r#"{{"password":"{}","userType":"Normal"}}"#, ALICE.1);
    let r = call(
        client,
        addr,
        signed(admin(3001, &[("username", "alice")], &user), ROOT),
    )
    .await;
    ok(&r, "createUser on the master");
    let acl = acl_body(&[(resource, actions, "Allow", &[])]);
    let r = call(
        client,
        addr,
        signed(admin(3006, &[("subject", "User:alice")], &acl), ROOT),
    )
    .await;
    ok(&r, "createAcl on the master");
    println!("created alice with {resource} {actions:?} on {addr}");
}

/// Waits until `addr` answers root's getUser for alice with her.
async fn wait_alice(client: &RemotingClient, addr: &str) {
    eventually(
        &format!("alice on {addr}"),
        Duration::from_secs(20),
        async || {
            let r = call(client, addr, get_user("alice")).await;
            r.code == response::SUCCESS && String::from_utf8_lossy(&r.body).contains("\"alice\"")
        },
    )
    .await;
    let r = call(client, addr, get_user("alice")).await;
    let body = String::from_utf8_lossy(&r.body).into_owned();
    println!("getUser alice on {addr}: {body}");
    assert!(
        !body.contains("password"),
        "getUser shows no password: {body}"
    );
}

fn no_secret_in(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for secret in [ROOT.1, ALICE.1, ALICE_NEW.1] {
        assert!(!text.contains(secret), "{} logs a password", path.display());
    }
}

fn ha_conf(work: &Path, name: &str, ns: &str, port: u16, role: &str) -> std::path::PathBuf {
    ha_conf_with(work, name, ns, port, role, &[])
}

/// [`ha_conf`] with more settings (later keys win).
fn ha_conf_with(
    work: &Path,
    name: &str,
    ns: &str,
    port: u16,
    role: &str,
    extra: &[(&'static str, String)],
) -> std::path::PathBuf {
    let mut pairs: Vec<(&str, String)> = vec![
        ("brokerClusterName", "AR".into()),
        ("brokerName", "arb".into()),
        ("listenAddr", "127.0.0.1".into()),
        ("brokerIP1", "127.0.0.1".into()),
        ("brokerIP2", "127.0.0.1".into()),
        ("listenPort", port.to_string()),
        ("namesrvAddr", ns.to_string()),
        ("storePathRootDir", work.join(name).display().to_string()),
        ("mappedFileSizeCommitLog", (1024 * 1024).to_string()),
        ("registerNameServerPeriod", "500".into()),
        ("slaveSyncInterval", "300".into()),
        ("brokerRole", role.into()),
    ];
    if role == "SLAVE" {
        pairs.push(("brokerId", "1".into()));
    }
    pairs.extend(auth_settings());
    pairs.extend(extra.iter().cloned());
    write_conf(work, name, &pairs)
}

fn broker(name: &str, conf: &Path, work: &Path) -> Proc {
    let conf = conf.to_str().expect("utf-8 path");
    Proc::spawn(name, &["broker", "-c", conf], "basalt broker", work)
}

/// Whether alice's signature (`who`) is accepted on `addr` for a read of
/// `topic` her ACL allows; the refusal's remark otherwise.
async fn alice_reads(
    client: &RemotingClient,
    addr: &str,
    who: (&str, &str),
    topic: &str,
) -> Result<(), String> {
    let r = call(client, addr, signed(topic_query(topic), who)).await;
    match r.code {
        response::SUCCESS => Ok(()),
        c => Err(format!("{c}: {}", r.remark.unwrap_or_default())),
    }
}

/// The slave holds alice, her ACL (checked by root's getUser/getAcl), takes
/// her signed read, and saved her.
async fn slave_has_alice(client: &RemotingClient, saddr: &str, w: &Path) {
    wait_alice(client, saddr).await;
    // The user and her ACL were made by two requests: the slave may have
    // copied the first alone.
    let get_acl = || signed(admin(3009, &[("subject", "User:alice")], ""), ROOT);
    eventually(
        "her ACL on the slave",
        Duration::from_secs(20),
        async || !call(client, saddr, get_acl()).await.body.is_empty(),
    )
    .await;
    let acl = call(client, saddr, get_acl()).await;
    let acl = String::from_utf8_lossy(&acl.body).into_owned();
    println!("getAcl User:alice on the slave: {acl}");
    assert!(
        acl.contains("Topic:ReplTopic") && acl.contains("Allow"),
        "{acl}"
    );
    // The slave authenticates and authorizes her (the topic came too: the
    // whole metadata sync is signed).
    eventually(
        "alice's read accepted by the slave",
        Duration::from_secs(20),
        async || alice_reads(client, saddr, ALICE, "ReplTopic").await.is_ok(),
    )
    .await;
    let users = std::fs::read_to_string(w.join("slave/config/authUsers.json")).expect("users file");
    assert!(
        users.contains("\"alice\""),
        "the slave saved alice: {users}"
    );
}

/// A password changed on the master reaches the slave: the new signature
/// is accepted there and the old one refused.
async fn password_change_follows(client: &RemotingClient, maddr: &str, saddr: &str) {
    let change = format!(r#"{{"password":"{}"}}"#, ALICE_NEW.1);
    ok(
        &call(
            client,
            maddr,
            signed(admin(3002, &[("username", "alice")], &change), ROOT),
        )
        .await,
        "updateUser",
    );
    eventually(
        "the new password on the slave",
        Duration::from_secs(20),
        async || {
            alice_reads(client, saddr, ALICE_NEW, "ReplTopic")
                .await
                .is_ok()
        },
    )
    .await;
    let old = alice_reads(client, saddr, ALICE, "ReplTopic").await;
    println!("old password on the slave: {old:?}");
    assert!(old.is_err_and(|e| e.contains("check signature failed")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_holds_the_masters_users_and_acls_across_restarts() {
    let work = tempfile::tempdir().expect("temp dir");
    let w = work.path();
    let (_ns, ns) = Proc::namesrv(w);
    let (mp, sp) = (free_port_pair(), free_port_pair());
    let master_conf = ha_conf(w, "master", &ns, mp, "ASYNC_MASTER");
    let slave_conf = ha_conf(w, "slave", &ns, sp, "SLAVE");
    let mut master = broker("master", &master_conf, w);
    let mut slave = broker("slave", &slave_conf, w);
    let (maddr, saddr) = (format!("127.0.0.1:{mp}"), format!("127.0.0.1:{sp}"));
    let client = RemotingClient::default();

    ok(
        &call(&client, &maddr, signed(create_topic("ReplTopic"), ROOT)).await,
        "topic",
    );
    create_alice(&client, &maddr, "Topic:ReplTopic", &["Pub", "Get"]).await;
    slave_has_alice(&client, &saddr, w).await;
    password_change_follows(&client, &maddr, &saddr).await;

    // Both stopped; the slave alone, its master gone, still knows her.
    slave.stop();
    master.stop();
    let mut slave = broker("slave", &slave_conf, w);
    let alone = alice_reads(&client, &saddr, ALICE_NEW, "ReplTopic").await;
    println!("alice on the restarted slave without its master: {alone:?}");
    assert_eq!(alone, Ok(()));

    // The master back: alice deleted there is gone from the slave.
    let _master = broker("master", &master_conf, w);
    ok(
        &call(
            &client,
            &maddr,
            signed(admin(3003, &[("username", "alice")], ""), ROOT),
        )
        .await,
        "deleteUser",
    );
    eventually(
        "alice gone from the slave",
        Duration::from_secs(20),
        async || {
            let r = call(&client, &saddr, get_user("alice")).await;
            r.code == response::SUCCESS && r.body.is_empty()
        },
    )
    .await;
    let gone = alice_reads(&client, &saddr, ALICE_NEW, "ReplTopic").await;
    println!("alice after deletion, on the slave: {gone:?}");
    assert!(gone.is_err_and(|e| e.contains("User:alice is not found")));
    let acl = call(
        &client,
        &saddr,
        signed(admin(3009, &[("subject", "User:alice")], ""), ROOT),
    )
    .await;
    assert!(acl.body.is_empty(), "her ACL went with her");
    slave.stop();
    for f in ["master.log", "slave.log"] {
        no_secret_in(&w.join(f));
    }
}

/// A slave whose credentials the master does not know is refused: it logs
/// that once (not every round), copies nothing and keeps its own users.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_slave_logs_once_and_keeps_its_users() {
    let work = tempfile::tempdir().expect("temp dir");
    let w = work.path();
    let (_ns, ns) = Proc::namesrv(w);
    let (mp, sp) = (free_port_pair(), free_port_pair());
    let stranger = ("slave-root", "slave-root-secret-1");
    let own = format!(
        r#"{{"username":"{}","password":"{}"}}"#,
        stranger.0, stranger.1
    );
    let master_conf = ha_conf(w, "master", &ns, mp, "ASYNC_MASTER");
    let extra = [("initAuthenticationUser", own)];
    let slave_conf = ha_conf_with(w, "slave", &ns, sp, "SLAVE", &extra);
    let _master = broker("master", &master_conf, w);
    let mut slave = broker("slave", &slave_conf, w);
    let (maddr, saddr) = (format!("127.0.0.1:{mp}"), format!("127.0.0.1:{sp}"));
    let client = RemotingClient::default();
    create_alice(&client, &maddr, "Topic:Any", &["Pub"]).await;
    // Ten rounds at least (slaveSyncInterval 300 ms).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let r = call(
        &client,
        &saddr,
        signed(admin(3004, &[("username", "alice")], ""), stranger),
    )
    .await;
    println!(
        "getUser alice on the refused slave: {} {:?}",
        r.code, r.body
    );
    ok(&r, "the slave's own super user still works");
    assert!(r.body.is_empty(), "nothing copied");
    slave.stop();
    let log = std::fs::read_to_string(w.join("slave.log")).expect("slave log");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("users and ACLs not copied"))
        .collect();
    println!("slave logged: {lines:?}");
    assert_eq!(lines.len(), 1, "logged once a minute at most");
    assert!(
        lines[0].contains("User:slave-root is not found"),
        "{}",
        lines[0]
    );
    no_secret_in(&w.join("slave.log"));
    assert!(!log.contains(stranger.1));
}

/// The sync code's own check, with authentication off (the handler checks
/// anyway) and on with the code whitelisted (it still checks).
#[test]
fn the_sync_code_answers_only_a_signed_super_user() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let init = format!("initAuthenticationUser={}", root_json());
    let mut b = Standalone::start(&data, &[&init]);
    let mut c = crate::raw::Raw::connect(&b.broker_addr());
    let user = format!(r#"{{"password":"{}","userType":"Normal"}}"#, ALICE.1);
    ok(
        &c.call(signed(admin(3001, &[("username", "alice")], &user), ROOT)),
        "createUser",
    );
    let sync = || RemotingCommand::request(request::AUTH_METADATA_SYNC);
    let refusals = [
        ("unsigned", sync(), "username cannot be null"),
        ("alice", signed(sync(), ALICE), "is not a super user"),
        (
            "forged root",
            signed(sync(), (ROOT.0, "guessed")),
            "check signature failed",
        ),
        (
            "unknown",
            signed(sync(), ("mallory", "x")),
            "User:mallory is not found",
        ),
    ];
    let check_refusals = |c: &mut crate::raw::Raw| {
        for (who, cmd, why) in refusals.clone() {
            let r = c.call(cmd);
            println!(
                "30005 by {who}: code {} remark {:?} body {} bytes",
                r.code,
                r.remark,
                r.body.len()
            );
            assert_eq!(r.code, response::NO_PERMISSION, "{who}");
            assert!(r.remark.unwrap_or_default().contains(why), "{who}");
            assert!(r.body.is_empty(), "{who} gets no body");
        }
    };
    check_refusals(&mut c);
    let r = c.call(signed(sync(), ROOT));
    let body = String::from_utf8_lossy(&r.body).into_owned();
    println!("30005 by root: code {} body {} bytes", r.code, body.len());
    ok(&r, "root's sync");
    assert!(
        body.contains(ALICE.1) && body.contains(ROOT.1),
        "the copy holds the passwords"
    );
    b.stop();
    drop(c);

    let on = [
        init.as_str(),
        "authenticationEnabled=true",
        "authenticationWhitelist=30005",
    ];
    let mut b = Standalone::start(&data, &on);
    let mut c = crate::raw::Raw::connect(&b.broker_addr());
    check_refusals(&mut c);
    ok(
        &c.call(signed(sync(), ROOT)),
        "root's sync, authentication on",
    );
    b.stop();
    for f in std::fs::read_dir(dir.path()).expect("dir").flatten() {
        if f.path().extension().is_some_and(|e| e == "log") {
            no_secret_in(&f.path());
        }
    }

    // A broker without users answers anyone an empty set.
    let empty = Standalone::start(&dir.path().join("empty"), &[]);
    let mut c = crate::raw::Raw::connect(&empty.broker_addr());
    let r = c.call(sync());
    println!(
        "30005 unsigned, no users: {}",
        String::from_utf8_lossy(&r.body)
    );
    ok(&r, "empty set");
    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("JSON");
    assert_eq!(v, serde_json::json!({"users": [], "acls": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_created_on_the_ledger_leader_works_on_the_next_one() {
    let work = tempfile::tempdir().expect("temp dir");
    let settings: Vec<String> = auth_settings()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut group = LedgerGroup::start(work.path(), &settings);
    let admin_client = Admin::new(ClientConfig::new(group.ns_addr.clone()));
    let leader = group.master(&admin_client, None).await;
    let client = RemotingClient::default();
    ok(
        &call(&client, &leader, signed(create_topic("LedgerAuth"), ROOT)).await,
        "topic",
    );
    create_alice(&client, &leader, "Topic:LedgerAuth", &["Pub"]).await;
    for addr in group.addrs() {
        wait_alice(&client, &addr).await;
        eventually(
            &format!("the topic on {addr}"),
            Duration::from_secs(20),
            async || {
                call(&client, &addr, signed(topic_query("LedgerAuth"), ROOT))
                    .await
                    .code
                    == 0
            },
        )
        .await;
    }
    group.kill9(&leader);
    println!("killed the leader {leader}");
    let next = group.master(&admin_client, Some(&leader)).await;
    println!("next leader {next}");
    let send = || send_request("LedgerAuth", 0, b"from alice");
    eventually(
        "alice's send taken by the next leader",
        Duration::from_secs(30),
        async || {
            let r = call(&client, &next, signed(send(), ALICE)).await;
            println!("alice's send to {next}: {} {:?}", r.code, r.remark);
            r.code == response::SUCCESS
        },
    )
    .await;
    let r = call(&client, &next, send()).await;
    println!("unsigned send to {next}: {} {:?}", r.code, r.remark);
    assert_eq!(r.code, response::NO_PERMISSION);
    let r = call(&client, &next, signed(send(), (ALICE.0, "wrong"))).await;
    assert_eq!(r.code, response::NO_PERMISSION, "a wrong secret");
    admin_client.shutdown();
    drop(group);
    for i in 0..3 {
        no_secret_in(&work.path().join(format!("broker{i}.log")));
    }
}
