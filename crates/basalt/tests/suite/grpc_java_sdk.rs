//! The RocketMQ 5 gRPC SDK for Java (`rocketmq-client-java`, built by
//! `interop/java-grpc-sdk/prepare.sh`) against `basalt standalone`'s gRPC
//! MessagingService: producers (normal, FIFO, delayed, transactional with
//! commit, rollback and check-back), SimpleConsumers receiving and acking,
//! a message not acked coming back after its invisible time,
//! ChangeInvisibleDuration, bad input, and remoting and gRPC clients on the
//! same topic. `basalt.grpc.Main` checks each case itself (every message
//! exactly once, printed as sent and received) and ends with ALL PASSED.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::interop::{family_dir, java, run_bounded};
use crate::standalone::Standalone;

const FAMILY: &str = "java-grpc-sdk";
/// One JVM run of several cases (each case bounds itself at 60 to 90 s).
const RUN_DEADLINE: Duration = Duration::from_secs(240);

/// Transaction check-backs within about a second (the `transaction` case).
const BROKER_SETS: &[&str] = &["transactionCheckInterval=1000", "transactionTimeOut=1000"];

const TOPICS: &[&str] = &[
    "grpc-normal",
    "grpc-fifo",
    "grpc-delay",
    "grpc-transaction",
    "grpc-invisible",
    "grpc-change-invisible",
    "grpc-bad-input",
    "grpc-mixed-in",
    "grpc-mixed-out",
    "grpc-push",
    "grpc-push-retry",
    "grpc-dlq",
    "grpc-fifo-two",
    "grpc-restart",
];

/// A free loopback port for the gRPC server.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub(crate) fn basalt(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .output()
        .expect("run basalt")
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A standalone broker with its gRPC server on a free port; the topics of
/// every case created (4 queues each).
fn broker(tmp: &Path) -> (Standalone, String) {
    broker_with(tmp, &[], &[])
}

/// [`broker`] with more `--set` values; `cli` goes before the admin
/// command (`--tls` when the broker takes TLS only).
pub(crate) fn broker_with(tmp: &Path, more: &[String], cli: &[&str]) -> (Standalone, String) {
    let port = free_port();
    let grpc = format!("grpcServerPort={port}");
    let mut sets: Vec<&str> = BROKER_SETS.to_vec();
    sets.push(&grpc);
    sets.extend(more.iter().map(String::as_str));
    let b = Standalone::start(&tmp.join("data"), &sets);
    let ns = b.namesrv_addr();
    for t in TOPICS {
        let mut args: Vec<&str> = cli.to_vec();
        args.extend([
            "admin",
            "--namesrv",
            &ns,
            "topic",
            "create",
            "-t",
            t,
            "--queues",
            "4",
        ]);
        let o = basalt(&args);
        assert!(
            o.status.success(),
            "create {t}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    (b, format!("127.0.0.1:{port}"))
}

/// Runs `cases` of the harness against `endpoints`; panics with the whole
/// output unless ALL PASSED.
pub(crate) fn run_cases(
    dir: &Path,
    home: &Path,
    endpoints: &str,
    cases: &[&str],
    props: &[(&str, String)],
) {
    let cp = std::fs::read_to_string(dir.join("sdk.classpath")).expect("sdk.classpath");
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
    cmd.arg("-cp")
        .arg(cp.trim())
        .arg("basalt.grpc.Main")
        .arg(endpoints)
        .args(cases);
    let run = run_bounded(&mut cmd, RUN_DEADLINE);
    let what = format!("java gRPC SDK {cases:?}");
    let run = run.expect_success(&what);
    assert!(
        run.stdout.contains("ALL PASSED"),
        "{what}: no ALL PASSED line"
    );
}

pub(crate) fn setup() -> Option<(std::path::PathBuf, tempfile::TempDir)> {
    let dir = family_dir(FAMILY)?;
    let tmp = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir_all(tmp.path().join("home")).expect("home");
    Some((dir, tmp))
}

#[test]
fn producers_and_simple_consumers() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker(tmp.path());
    let cases = ["normal", "fifo", "delay", "transaction", "bad-input"];
    run_cases(&dir, &tmp.path().join("home"), &endpoints, &cases, &[]);
    drop(b);
}

#[test]
fn invisible_time_and_change_invisible_duration() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker(tmp.path());
    run_cases(
        &dir,
        &tmp.path().join("home"),
        &endpoints,
        &["invisible", "change-invisible"],
        &[],
    );
    drop(b);
}

/// A remoting producer (`basalt produce`) feeds a gRPC SimpleConsumer, and
/// a gRPC producer feeds a remoting consumer (`basalt consume`), on the
/// same broker: each side gets exactly what the other sent.
#[test]
fn remoting_and_grpc_clients_share_topics() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker(tmp.path());
    let ns = b.namesrv_addr();
    let n = 10;
    let o = basalt(&[
        "produce",
        "--namesrv",
        &ns,
        "-t",
        "grpc-mixed-in",
        "-n",
        &n.to_string(),
        "--keys",
        "remoting-{i}",
    ]);
    assert!(o.status.success(), "basalt produce: {}", text(&o.stderr));
    let sent = text(&o.stdout);
    assert!(sent.ends_with(&format!("sent {n}, failed 0\n")), "{sent}");
    let props = [("grpc.mixed.count", n.to_string())];
    run_cases(
        &dir,
        &tmp.path().join("home"),
        &endpoints,
        &["mixed-consume", "mixed-produce"],
        &props,
    );
    let o = basalt(&[
        "consume",
        "--namesrv",
        &ns,
        "-t",
        "grpc-mixed-out",
        "-g",
        "remoting-reader",
        "-n",
        &n.to_string(),
        "--timeout",
        "60",
    ]);
    let out = text(&o.stdout);
    println!("basalt consume printed:\n{out}");
    assert!(o.status.success(), "basalt consume: {}", text(&o.stderr));
    assert!(out.contains(&format!("consumed {n}")), "{out}");
    for i in 0..n {
        let body = format!("body=\"from-grpc-{i}\"");
        assert_eq!(
            out.matches(&body).count(),
            1,
            "{body} exactly once in:\n{out}"
        );
    }
    drop(b);
}

/// With no TLS setting the gRPC port is permissive with a self-signed
/// certificate, as the proxy's defaults: a producer and a SimpleConsumer
/// with the SDK's default (TLS on, `enableSsl` not called) send and
/// receive exactly, and so do plain-text ones (`enableSsl(false)`) on the
/// same port.
#[test]
fn sdk_default_tls_and_plain_text_on_one_port() {
    let Some((dir, tmp)) = setup() else { return };
    let (b, endpoints) = broker(tmp.path());
    assert!(tls_handshake(&endpoints), "no TLS on the default gRPC port");
    let home = tmp.path().join("home");
    let tls = [("grpc.ssl", "sdk-default".to_string())];
    run_cases(&dir, &home, &endpoints, &["normal"], &tls);
    let plain = [("grpc.ssl", "false".to_string())];
    run_cases(&dir, &home, &endpoints, &["fifo"], &plain);
    drop(b);
}

/// `tls.server.mode=enforcing` with a configured certificate: TLS clients
/// work; a plain-text HTTP/2 connection is closed before any answer.
#[test]
fn enforcing_takes_tls_only() {
    let Some((dir, tmp)) = setup() else { return };
    let ca = crate::tls_certs::TestCa::new(tmp.path(), "grpc");
    let cert = ca.server(tmp.path(), "server");
    let sets = vec![
        "tls.server.mode=enforcing".to_string(),
        format!("tls.server.certPath={}", cert.cert.display()),
        format!("tls.server.keyPath={}", cert.key.display()),
    ];
    let (b, endpoints) = broker_with(tmp.path(), &sets, &["--tls"]);
    let home = tmp.path().join("home");
    run_cases(
        &dir,
        &home,
        &endpoints,
        &["normal"],
        &[("grpc.ssl", "true".to_string())],
    );
    let mut plain = std::net::TcpStream::connect(&endpoints).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    use std::io::{Read, Write};
    plain
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .expect("write preface");
    let mut buf = [0u8; 64];
    let n = plain.read(&mut buf).unwrap_or(0);
    assert_eq!(
        n,
        0,
        "a plain-text connection got an answer: {:?}",
        &buf[..n]
    );
    drop(b);
}

const ALICE: (&str, &str) = ("alice", "alice-grpc-secret");

fn props(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

/// ACL 2.0 on (authentication and authorization): the SDK's signed calls
/// are checked as remoting requests are. alice may publish to and consume
/// `grpc-normal` in group `g-normal`: her producer and SimpleConsumer (TLS,
/// the SDK's default) send and receive exactly. Refused, each with the
/// SDK's exception for the answer's code: a wrong secret, an unknown user
/// and no credentials (UNAUTHORIZED), alice on `grpc-fifo` where she has
/// no permission (FORBIDDEN at the route) and sending to `grpc-delay`
/// where she may only subscribe (FORBIDDEN at the send). Each refusal is counted in
/// `basalt_auth_failures_total`, and no secret reaches the log.
#[test]
fn acl_checks_the_sdk_signatures() {
    use crate::auth::{ROOT, acl_body, admin, create_topic, ok, signed};
    let Some((dir, tmp)) = setup() else { return };
    let port = free_port();
    let metrics = free_port();
    let init = format!(
        r#"initAuthenticationUser={{"username":"{}","password":"{}"}}"#,
        ROOT.0, ROOT.1
    );
    let grpc = format!("grpcServerPort={port}");
    let prom_port = format!("metricsPromExporterPort={metrics}");
    let b = Standalone::start(
        &tmp.path().join("data"),
        &[
            &grpc,
            "authenticationEnabled=true",
            "authorizationEnabled=true",
            &init,
            &prom_port,
            "dashboardEnable=false",
        ],
    );
    let mut root = crate::raw::Raw::connect(&b.broker_addr());
    for t in ["grpc-normal", "grpc-fifo", "grpc-delay"] {
        ok(&root.call(signed(create_topic(t), ROOT)), "create topic");
    }
    let user = format!(r#"{{"password":"{}","userType":"Normal"}}"#, ALICE.1);
    ok(
        &root.call(signed(admin(3001, &[("username", ALICE.0)], &user), ROOT)),
        "createUser alice",
    );
    let acl = acl_body(&[
        ("Topic:grpc-normal", &["Pub", "Sub"], "Allow", &[]),
        ("Group:g-normal", &["Sub"], "Allow", &[]),
        ("Topic:grpc-delay", &["Sub"], "Allow", &[]),
    ]);
    ok(
        &root.call(signed(
            admin(3006, &[("subject", "User:alice")], &acl),
            ROOT,
        )),
        "createAcl alice",
    );
    let endpoints = format!("127.0.0.1:{port}");
    let home = tmp.path().join("home");
    let run = |cases: &[&str], p: &[(&'static str, &str)]| {
        run_cases(&dir, &home, &endpoints, cases, &props(p));
    };
    let alice = [
        ("grpc.ssl", "sdk-default"),
        ("grpc.ak", ALICE.0),
        ("grpc.sk", ALICE.1),
    ];
    run(&["normal"], &alice);
    let unauthorized = ("grpc.refused.expect", "UnauthorizedException");
    run(
        &["refused"],
        &[
            ("grpc.ak", ALICE.0),
            ("grpc.sk", "guessed-secret"),
            unauthorized,
        ],
    );
    run(
        &["refused"],
        &[
            ("grpc.ak", "mallory"),
            ("grpc.sk", "mallory-pass"),
            unauthorized,
        ],
    );
    run(&["refused"], &[unauthorized]);
    run(
        &["refused"],
        &[
            ("grpc.ak", ALICE.0),
            ("grpc.sk", ALICE.1),
            ("grpc.refused.topic", "grpc-fifo"),
            ("grpc.refused.expect", "ForbiddenException"),
        ],
    );
    // Sub only: the route is given (Pub or Sub), the send is not.
    run(
        &["refused"],
        &[
            ("grpc.ak", ALICE.0),
            ("grpc.sk", ALICE.1),
            ("grpc.refused.topic", "grpc-delay"),
            ("grpc.refused.expect", "ForbiddenException"),
        ],
    );
    let (status, text) = crate::prom::http_get(metrics, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200);
    let e = crate::prom::parse(&text).expect("metrics parse");
    let count = |reason| e.value("basalt_auth_failures_total", &[("reason", reason)]);
    assert!(count("bad_signature") >= 1.0, "{text}");
    assert!(count("unknown_user") >= 1.0, "{text}");
    assert!(count("no_credentials") >= 1.0, "{text}");
    assert!(count("denied") >= 1.0, "{text}");
    let log = b.log_text();
    for secret in [ROOT.1, ALICE.1, "guessed-secret", "mallory-pass"] {
        assert!(!log.contains(secret), "the log holds a secret");
    }
    drop(b);
}

/// Whether a TLS handshake (any server certificate taken) completes with
/// the port at `endpoints`.
fn tls_handshake(endpoints: &str) -> bool {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(endpoints)
            .await
            .expect("connect");
        let dialer = basalt_remoting::ClientSecurity {
            tls: Some(basalt_remoting::ClientTls::insecure()),
            secret: None,
            purpose: "test",
        };
        dialer.connect(tcp, endpoints).await.is_ok()
    })
}

/// `tls.server.mode=disabled`: the gRPC port is plain text only. A TLS
/// handshake fails; the SDK with `enableSsl(false)` works.
#[test]
fn disabled_takes_plain_text_only() {
    let Some((dir, tmp)) = setup() else { return };
    let sets = vec!["tls.server.mode=disabled".to_string()];
    let (b, endpoints) = broker_with(tmp.path(), &sets, &[]);
    assert!(
        !tls_handshake(&endpoints),
        "a TLS handshake succeeded on a plain-text port"
    );
    let home = tmp.path().join("home");
    let plain = [("grpc.ssl", "false".to_string())];
    run_cases(&dir, &home, &endpoints, &["fifo"], &plain);
    drop(b);
}
