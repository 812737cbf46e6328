//! TLS on Basalt's listeners (docs/tls.md), with real processes and
//! certificates made at test time: the CLI through an enforcing broker,
//! plain clients refused (enforcing) and served (permissive) on one port,
//! untrusted and expired certificates refused with a clear reason, and a
//! certificate replaced while a connection stays open.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use basalt_remoting::code::{request, response};
use basalt_remoting::codec::encode_frame;
use basalt_remoting::{
    ClientSecurity, ClientTls, RemotingClient, RemotingClientConfig, RemotingCommand, TlsSettings,
};

use crate::raw::{Outcome, Raw};
use crate::standalone::Standalone;
use crate::tls_certs::{CertFiles, TestCa};

const WAIT: Duration = Duration::from_secs(10);

fn basalt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .env_remove("BASALT_TLS")
        .env_remove("BASALT_TLS_CA")
        .env("BASALT_LOG", "warn")
        .output()
        .expect("run basalt")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `--set` values for a broker serving `cert` in `mode`.
fn tls_sets(mode: &str, cert: &CertFiles) -> Vec<String> {
    vec![
        format!("tls.server.mode={mode}"),
        format!("tls.server.certPath={}", cert.cert.display()),
        format!("tls.server.keyPath={}", cert.key.display()),
    ]
}

fn start(dir: &Path, sets: &[String]) -> Standalone {
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    Standalone::start(&dir.join("data"), &sets)
}

/// A remoting client dialing with `tls`.
fn tls_client(tls: ClientTls) -> RemotingClient {
    RemotingClient::new(RemotingClientConfig {
        security: Some(Arc::new(ClientSecurity {
            tls: Some(tls),
            secret: None,
            purpose: "test",
        })),
        ..Default::default()
    })
}

fn runtime_info() -> RemotingCommand {
    RemotingCommand::request(request::GET_BROKER_RUNTIME_INFO)
}

fn raw_request_outcome(addr: &str) -> Outcome {
    let mut raw = Raw::connect(addr);
    let mut cmd = runtime_info();
    cmd.opaque = 7;
    raw.send_raw(&encode_frame(&cmd).expect("encode"), WAIT)
}

#[test]
fn cli_produces_and_consumes_over_tls_to_an_enforcing_broker() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let cert = ca.server(dir.path(), "server");
    let b = start(dir.path(), &tls_sets("enforcing", &cert));
    let ns = b.namesrv_addr();
    let ca_path = ca.cert_path.to_str().unwrap();

    let o = basalt(&[
        "--tls-ca",
        ca_path,
        "produce",
        "--namesrv",
        &ns,
        "-t",
        "TlsOrders",
        "-n",
        "20",
    ]);
    assert!(o.status.success(), "produce over TLS: {}", text(&o));
    let o = basalt(&[
        "--tls-ca",
        ca_path,
        "consume",
        "--namesrv",
        &ns,
        "-t",
        "TlsOrders",
        "-g",
        "tls-g",
        "-n",
        "20",
        "--timeout",
        "30",
    ]);
    assert!(o.status.success(), "consume over TLS: {}", text(&o));
    let printed = String::from_utf8_lossy(&o.stdout).lines().count();
    assert!(
        printed >= 20,
        "20 messages consumed over TLS:\n{}",
        text(&o)
    );

    // --tls without a CA takes any certificate (Java's test mode).
    let o = basalt(&["--tls", "admin", "--namesrv", &ns, "cluster"]);
    assert!(o.status.success(), "admin over TLS: {}", text(&o));

    // Without TLS the CLI cannot talk to an enforcing broker.
    let o = basalt(&["admin", "--namesrv", &ns, "cluster"]);
    assert!(!o.status.success(), "plain admin must fail: {}", text(&o));
}

#[test]
fn a_plain_client_is_refused_in_enforcing_mode() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let cert = ca.server(dir.path(), "server");
    let b = start(dir.path(), &tls_sets("enforcing", &cert));
    for addr in [b.broker_addr(), b.namesrv_addr()] {
        let o = raw_request_outcome(&addr);
        assert!(
            matches!(o, Outcome::Closed),
            "{addr}: plain request got {o:?}"
        );
    }
    let log = b.log_text();
    assert!(
        log.contains("plain-text connection refused"),
        "the refusal is logged:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissive_mode_serves_plain_and_tls_on_one_port() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let cert = ca.server(dir.path(), "server");
    let b = start(dir.path(), &tls_sets("permissive", &cert));
    let addr = b.broker_addr();

    let plain = tokio::task::spawn_blocking({
        let addr = addr.clone();
        move || raw_request_outcome(&addr)
    })
    .await
    .unwrap();
    match plain {
        Outcome::Reply(r) => assert_eq!(r.code, response::SUCCESS, "{r:?}"),
        other => panic!("plain request in permissive mode: {other:?}"),
    }
    let tls = tls_client(ClientTls::with_ca_file(&ca.cert_path).unwrap());
    let r = tls.invoke(&addr, runtime_info(), WAIT).await.unwrap();
    assert_eq!(r.code, response::SUCCESS, "TLS request in permissive mode");
    assert!(r.body.len() > 10, "runtime info has a body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_and_expired_certificates_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let other_ca = TestCa::new(dir.path(), "other");
    let expired = ca.expired_server(dir.path(), "expired");
    let good = ca.server(dir.path(), "server");

    // A broker whose certificate comes from a CA the client does not trust.
    let b = start(dir.path(), &tls_sets("enforcing", &good));
    let o = basalt(&[
        "--tls-ca",
        other_ca.cert_path.to_str().unwrap(),
        "admin",
        "--namesrv",
        &b.namesrv_addr(),
        "cluster",
    ]);
    assert!(!o.status.success(), "untrusted CA must fail: {}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("invalid peer certificate") && t.contains("UnknownIssuer"),
        "the client says why: {t}"
    );
    drop(b);

    // A broker with an expired certificate.
    let dir2 = tempfile::tempdir().unwrap();
    let b = start(dir2.path(), &tls_sets("enforcing", &expired));
    let tls = tls_client(ClientTls::with_ca_file(&ca.cert_path).unwrap());
    let err = tls
        .invoke(&b.broker_addr(), runtime_info(), WAIT)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("invalid peer certificate") && err.contains("certificate expired"),
        "the client says why: {err}"
    );
    // The broker logs the failed handshake too (the client's alert).
    crate::procs::eventually(
        "the broker to log the refused handshake",
        Duration::from_secs(10),
        async || b.log_text().contains("TLS handshake failed"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let other_ca = TestCa::new(dir.path(), "other");
    let server = ca.server(dir.path(), "server");
    let trusted = ca.client(dir.path(), "client");
    let stranger = other_ca.client(dir.path(), "stranger");
    let mut sets = tls_sets("enforcing", &server);
    sets.push("tls.server.need.client.auth=require".into());
    sets.push("tls.server.authClient=true".into());
    sets.push(format!(
        "tls.server.trustCertPath={}",
        ca.cert_path.display()
    ));
    let b = start(dir.path(), &sets);
    let with_cert = |c: &CertFiles| {
        let mut s = TlsSettings::default();
        for (k, v) in [
            ("tls.client.certPath", c.cert.display().to_string()),
            ("tls.client.keyPath", c.key.display().to_string()),
        ] {
            s.set(k, &v).unwrap();
        }
        tls_client(ClientTls::from_settings(&s).unwrap())
    };
    let r = with_cert(&trusted)
        .invoke(&b.broker_addr(), runtime_info(), WAIT)
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "a trusted client certificate");
    let refused = with_cert(&stranger)
        .invoke(&b.broker_addr(), runtime_info(), WAIT)
        .await;
    assert!(refused.is_err(), "a stranger's certificate: {refused:?}");
    let none = tls_client(ClientTls::insecure())
        .invoke(&b.broker_addr(), runtime_info(), WAIT)
        .await;
    assert!(none.is_err(), "no client certificate: {none:?}");
    let log = b.log_text();
    assert!(
        log.contains("TLS handshake failed") && log.contains("UnknownIssuer"),
        "the broker names the untrusted client certificate:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_certificate_serves_new_connections_and_keeps_open_ones() {
    let dir = tempfile::tempdir().unwrap();
    let first_ca = TestCa::new(dir.path(), "first");
    let second_ca = TestCa::new(dir.path(), "second");
    let live = first_ca.server(dir.path(), "live");
    let b = start(dir.path(), &tls_sets("enforcing", &live));
    let addr = b.broker_addr();

    let old = tls_client(ClientTls::with_ca_file(&first_ca.cert_path).unwrap());
    old.invoke(&addr, runtime_info(), WAIT).await.unwrap();

    // Replace the files in place (rename over them, as a deploy tool does).
    let next = second_ca.server(dir.path(), "next");
    std::fs::rename(&next.cert, &live.cert).unwrap();
    std::fs::rename(&next.key, &live.key).unwrap();

    let fresh = tls_client(ClientTls::with_ca_file(&second_ca.cert_path).unwrap());
    crate::procs::eventually(
        "new connections to get the new certificate",
        Duration::from_secs(15),
        async || {
            fresh.close_channel(&addr);
            fresh.invoke(&addr, runtime_info(), WAIT).await.is_ok()
        },
    )
    .await;
    // The connection opened before the change still works.
    let r = old.invoke(&addr, runtime_info(), WAIT).await.unwrap();
    assert_eq!(r.code, response::SUCCESS);
    // A new connection trusting only the old CA is refused now.
    let stale = tls_client(ClientTls::with_ca_file(&first_ca.cert_path).unwrap());
    assert!(stale.invoke(&addr, runtime_info(), WAIT).await.is_err());
    assert!(
        b.log_text().contains("TLS certificate files changed"),
        "the reload is logged"
    );
}

/// The official Java client 5.5.0 (`interop/java-client`, `TlsMain`) with
/// `setUseTLS(true)` sends and consumes through an enforcing broker
/// (NameServer and broker both TLS only), trusting as its default test mode
/// does.
#[test]
fn java_client_sends_and_consumes_through_an_enforcing_broker() {
    let Some(family) = crate::interop::family_dir("java-client") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path(), "main");
    let cert = ca.server(dir.path(), "server");
    let b = start(dir.path(), &tls_sets("enforcing", &cert));
    let ns = b.namesrv_addr();
    let o = basalt(&[
        "--tls-ca",
        ca.cert_path.to_str().unwrap(),
        "admin",
        "--namesrv",
        &ns,
        "topic",
        "create",
        "-t",
        "JavaTls",
        "--queues",
        "4",
    ]);
    assert!(o.status.success(), "create topic over TLS: {}", text(&o));
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cp = std::fs::read_to_string(family.join("rmq5.classpath")).expect("rmq5 classpath");
    let mut cmd = Command::new(crate::interop::java());
    cmd.args([
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
    ])
    .arg(format!("-Duser.home={}", home.display()))
    .arg("-cp")
    .arg(cp.trim())
    .arg("basalt.interop.TlsMain")
    .args([ns.as_str(), "JavaTls", "50"]);
    let run = crate::interop::run_bounded(&mut cmd, Duration::from_secs(150));
    assert!(
        run.success() && run.stdout.contains("TLS PASSED sent=50 received=50"),
        "{}",
        run.report("Java client over TLS")
    );
    println!("{}", run.report("Java client over TLS"));
    drop(b);
}
