//! The C++ client 2.x (PyPI `rocketmq` 0.4.4, `set_session_credentials`)
//! against Basalt with ACL 2.0 on. Its `ClientRPCHook` signs differently
//! from Java's `AclClientRPCHook`: it adds an `OnsChannel` field (signed
//! and sent) and signs the fields its header declares rather than the
//! encoded ext fields; Basalt verifies over the fields received, so the
//! two agree as long as the header sends what it declares, which this
//! test shows for sends, heartbeats, pulls and offset commits.
//!
//! Users and ACLs are made with `basalt admin user|acl` as root:
//! * `cpp_prod`: Pub on topic A; its sync sends to A are stored, its sends
//!   to B are refused (16) and B stays empty;
//! * `cpp_cons`: Sub on topic A and its group; a push consumer receives
//!   every message of A exactly once;
//! * `cpp_prod` with a wrong secret: refused, nothing stored.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::auth::{ROOT, free_port};
use crate::cpp_client::{self, ClientEnv, Driver, PushConsumer, assert_exactly, produce};
use crate::prom;
use crate::standalone::Standalone;

/// The gate's refusals so far by reason (`basalt_auth_failures_total`).
fn failures(metrics: u16, stage: &str) -> [(&'static str, f64); 3] {
    let (status, text) = prom::http_get(metrics, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200);
    let e = prom::parse(&text).expect("metrics parse");
    let v = |r: &str| {
        e.get("basalt_auth_failures_total", &[("reason", r)])
            .unwrap_or(0.0)
    };
    let out = [
        ("bad_signature", v("bad_signature")),
        ("denied", v("denied")),
        ("no_credentials", v("no_credentials")),
    ];
    println!("refusals after {stage}: {out:?}");
    out
}

const TOPIC_A: &str = "CppAuthA";
const TOPIC_B: &str = "CppAuthB";
const PROD: (&str, &str) = ("cpp_prod", "cpp-prod-secret-1");
const CONS: (&str, &str) = ("cpp_cons", "cpp-cons-secret-1");
const CONS_GROUP: &str = "cpp_cons_group";
const COUNT: usize = 20;

/// `basalt admin --json ARGS` as root; panics unless it succeeds.
fn root_admin(namesrv: &str, args: &[&str]) -> Value {
    println!(">>> basalt admin {} (as root)", args.join(" "));
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["--access-key", ROOT.0])
        .env("BASALT_SECRET_KEY", ROOT.1)
        .args(["admin", "--json", "--namesrv", namesrv])
        .args(args)
        .output()
        .expect("run basalt admin");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "basalt admin {args:?} failed");
    serde_json::from_str(&stdout).expect("JSON")
}

/// Messages stored in `topic`: the sum of its queues' max offsets.
fn stored(namesrv: &str, topic: &str) -> i64 {
    let j = root_admin(namesrv, &["topic", "stats", "-t", topic]);
    j["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["max"].as_i64().expect("max") - q["min"].as_i64().expect("min"))
        .sum()
}

fn setup_users(ns: &str, broker: &str) {
    for t in [TOPIC_A, TOPIC_B] {
        root_admin(
            ns,
            &["topic", "create", "-t", t, "--queues", "4", "-b", broker],
        );
    }
    for (u, p) in [PROD, CONS] {
        root_admin(ns, &["user", "create", "-b", broker, "-u", u, "-p", p]);
    }
    let topic_a = format!("Topic:{TOPIC_A}");
    root_admin(
        ns,
        &[
            "acl", "create", "-b", broker, "-s", PROD.0, "-r", &topic_a, "-a", "Pub", "-d", "Allow",
        ],
    );
    let cons_res = format!("{topic_a},Group:{CONS_GROUP}");
    root_admin(
        ns,
        &[
            "acl", "create", "-b", broker, "-s", CONS.0, "-r", &cons_res, "-a", "Sub", "-d",
            "Allow",
        ],
    );
    let users = root_admin(ns, &["user", "list", "-b", broker]);
    assert_eq!(users["count"], 3, "root, cpp_cons, cpp_prod");
    let acls = root_admin(ns, &["acl", "list", "-b", broker]);
    assert_eq!(
        acls["acls"].as_array().map(Vec::len),
        Some(3),
        "three entries"
    );
}

/// produce.py's arguments: `count` sync sends to `topic` as cpp_prod
/// signing with `secret`.
fn prod_args(topic: &str, count: usize, prefix: &str, secret: &str) -> Vec<String> {
    let line = format!(
        "--topic {topic} --group cpp_prod_group --mode sync --count {count} \
         --prefix {prefix} --access-key {} --secret-key {secret}",
        PROD.0
    );
    line.split_whitespace().map(str::to_string).collect()
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Runs produce.py expecting it to fail: returns its error lines (it sent
/// nothing).
fn produce_refused(env: &ClientEnv, name: &str, args: &[&str]) -> Vec<Value> {
    let d = Driver::spawn(env, name, "produce.py", args);
    let (status, lines) = d.finish(Instant::now() + Duration::from_secs(120));
    for l in &lines {
        println!("{name}: {l}");
    }
    assert!(!status.success(), "{name} must fail");
    let sent = lines.iter().filter(|v| v["event"] == "sent").count();
    assert_eq!(sent, 0, "{name} sent nothing");
    let errors: Vec<Value> = lines
        .into_iter()
        .filter(|v| v["event"] == "error" || v["event"] == "send_failed")
        .collect();
    assert!(!errors.is_empty(), "{name} reported its refusal");
    errors
}

/// prod-B (no Pub on B) and a wrong secret: refused, counted by reason;
/// the counters after both.
fn refused_producers(env: &ClientEnv, b: &Standalone, metrics: u16) -> [(&'static str, f64); 3] {
    // The client reports its failed retries as "No route info"; the
    // broker refused each send with 16 (the client retries on broker
    // errors), as its counters and log say.
    let errs = produce_refused(env, "prod-B", &refs(&prod_args(TOPIC_B, 3, "b", PROD.1)));
    println!("prod-B's error: {errs:?}");
    let after_b = failures(metrics, "prod-B");
    assert_eq!(after_b[0].1, 0.0, "no bad signature: {after_b:?}");
    assert!(after_b[1].1 >= 1.0, "prod-B's sends denied: {after_b:?}");
    assert!(
        b.log_text()
            .contains("User:cpp_prod has no permission to access Topic:CppAuthB (Pub)"),
        "the broker names the refusal"
    );

    let wrong = prod_args(TOPIC_A, 3, "w", "not-the-secret");
    let errs = produce_refused(env, "prod-wrong-secret", &refs(&wrong));
    println!("prod-wrong-secret's error: {errs:?}");
    let after_w = failures(metrics, "prod-wrong-secret");
    assert!(after_w[0].1 >= 1.0, "a bad signature refused: {after_w:?}");
    assert_eq!(
        after_w[1].1, after_b[1].1,
        "nothing else denied: {after_w:?}"
    );
    assert_eq!(after_w[2].1, 0.0, "nothing unsigned: {after_w:?}");

    after_w
}

/// The consumer's signed offset commits landed: the group is at the end of
/// topic A.
fn assert_committed(ns: &str) {
    let p = root_admin(ns, &["progress", "-g", CONS_GROUP, "-t", TOPIC_A]);
    let committed: i64 = p["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["consumerOffset"].as_i64().unwrap_or(-1))
        .sum();
    println!("{CONS_GROUP} committed {committed}, lag {}", p["totalLag"]);
    assert_eq!(committed, COUNT as i64);
    assert_eq!(p["totalLag"], 0);
}

#[test]
fn cpp_client_signs_under_acl2() {
    let Some(python) = cpp_client::client_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).expect("client home");
    let metrics = free_port();
    let init = format!(
        r#"initAuthenticationUser={{"username":"{}","password":"{}"}}"#,
        ROOT.0, ROOT.1
    );
    let b = Standalone::start(
        &dir.path().join("data"),
        &[
            "dashboardEnable=false",
            &format!("metricsPromExporterPort={metrics}"),
            "authenticationEnabled=true",
            "authorizationEnabled=true",
            &init,
        ],
    );
    let ns = b.namesrv_addr();
    let env = ClientEnv {
        python,
        home,
        namesrv: ns.clone(),
    };
    setup_users(&ns, &b.broker_addr());

    let cons_creds = ["--access-key", CONS.0, "--secret-key", CONS.1];
    let mut consumer = PushConsumer::start(&env, "cons-A", TOPIC_A, CONS_GROUP, &cons_creds);

    let sent = produce(
        &env,
        "prod-A",
        &refs(&prod_args(TOPIC_A, COUNT, "a", PROD.1)),
    );
    let keys: Vec<String> = sent
        .iter()
        .flat_map(|s| s["keys"].as_array().cloned().unwrap_or_default())
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect();
    println!("prod-A sent {} message(s): {keys:?}", keys.len());
    assert_eq!(keys.len(), COUNT);
    assert!(
        sent.iter().all(|s| s["status"] == 0),
        "all SEND_OK: {sent:?}"
    );

    consumer.until(Instant::now() + Duration::from_secs(60), &keys);
    // Every request of the signing producer and consumer passed: none
    // refused for its signature or anything else.
    let clean = failures(metrics, "prod-A and cons-A");
    assert_eq!(clean.map(|(_, n)| n), [0.0; 3], "{clean:?}");

    let after_w = refused_producers(&env, &b, metrics);

    consumer.settle(Duration::from_secs(3));
    let msgs = consumer.stop();
    println!("cons-A received {} message(s)", msgs.len());
    let got: Vec<&Value> = msgs.iter().collect();
    assert_exactly("cons-A", &got, &keys);
    // The consumer's offset commits and unregistration at shutdown passed
    // too: nothing was refused since.
    let end = failures(metrics, "cons-A's shutdown");
    assert_eq!(end, after_w, "no refusal after the wrong secret's");

    assert_committed(&ns);

    let (in_a, in_b) = (stored(&ns, TOPIC_A), stored(&ns, TOPIC_B));
    println!("stored: {TOPIC_A} {in_a}, {TOPIC_B} {in_b}");
    assert_eq!(in_a, COUNT as i64, "only prod-A's messages in A");
    assert_eq!(in_b, 0, "nothing in B");
    drop(b);
}
