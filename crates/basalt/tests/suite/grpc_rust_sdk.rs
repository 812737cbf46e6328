//! The RocketMQ 5 gRPC SDK for Rust (crate `rocketmq` 5.0.0, from
//! apache/rocketmq-clients/rust, built by `interop/rust-grpc-sdk/prepare.sh`)
//! against `basalt standalone`'s gRPC MessagingService. Each case is one
//! run of `rustgrpcsdk`, which checks itself (every message exactly once,
//! printed as sent and received, counted) and ends with ALL PASSED:
//! * `normal`: 20 messages, each received and acked once by a
//!   SimpleConsumer, with the topic, tag, both keys, the user property, the
//!   born time and host sent, at delivery attempt 1;
//! * `fifo`: three message groups of five, sent interleaved: each group in
//!   send order, each message carrying its group;
//! * `delay`: three messages with a delivery time 3..4 s ahead (whole
//!   seconds, as the SDK sends it), none early nor more than 8 s late,
//!   each carrying that time;
//! * `transaction`: one committed, one rolled back, three resolved by the
//!   producer's transaction checker on the broker's check-back (one
//!   committed, one rolled back, one UNKNOWN then committed on the next
//!   check): exactly the three committed arrive, and only the open ones
//!   are checked;
//! * `invisible`: a message not acked comes back after its 10 s invisible
//!   time with delivery attempt 2, and not after its ack.
//!
//!
//! Each case also makes sure nothing more comes: one more receive, a whole
//! long poll (the SDK's 40 s, of which Basalt polls 30 s), must be empty.
//! The SDK runs with its defaults, plain text among them. With TLS on it
//! verifies the server against the system's roots (or `SSL_CERT_FILE`) and
//! offers no way around that, so `sdk_tls_with_a_trusted_ca` gives the
//! broker a certificate of a test CA named in `SSL_CERT_FILE`
//! (docs/grpc.md, "Rust SDK").

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::interop::{Finished, family_dir, run_bounded};
use crate::standalone::Standalone;

const FAMILY: &str = "rust-grpc-sdk";
/// One case's run (each waits at most 90 s for its messages, then one
/// empty receive of 30 s).
const CASE_DEADLINE: Duration = Duration::from_secs(200);

/// Transaction check-backs within about a second (the `transaction` case).
const BROKER_SETS: &[&str] = &["transactionCheckInterval=1000", "transactionTimeOut=1000"];

/// A free loopback port for the gRPC server.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A standalone broker with its gRPC server on a free port, `extra` sets,
/// and topic `rs-CASE` (4 queues) for each case.
fn broker(tmp: &Path, cases: &[&str], extra: &[String]) -> (Standalone, String) {
    let port = free_port();
    let grpc = format!("grpcServerPort={port}");
    let mut sets: Vec<&str> = BROKER_SETS.to_vec();
    sets.push(&grpc);
    sets.extend(extra.iter().map(String::as_str));
    let b = Standalone::start(&tmp.join("data"), &sets);
    let ns = b.namesrv_addr();
    for case in cases {
        let topic = format!("rs-{case}");
        let o = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["admin", "--namesrv", &ns, "topic", "create"])
            .args(["-t", &topic, "--queues", "4"])
            .output()
            .expect("run basalt admin");
        assert!(
            o.status.success(),
            "create {topic}: {}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    (b, format!("127.0.0.1:{port}"))
}

/// Runs one case of the harness against `endpoint`, with TLS trusting
/// the CA certificate `tls_ca` when given (the SDK logs to stderr, which
/// the report shows).
fn run_case(bin: &Path, tmp: &Path, endpoint: &str, case: &str, tls_ca: Option<&Path>) -> Finished {
    let mut cmd = Command::new(bin);
    cmd.args(["--endpoint", endpoint]);
    if let Some(ca) = tls_ca {
        // The SDK's TLS (tonic's tls-roots) reads the roots from
        // rustls-native-certs, which takes SSL_CERT_FILE when it is set.
        cmd.arg("--tls").env("SSL_CERT_FILE", ca);
    }
    cmd.arg(case)
        // With LoggingFormat::Json the SDK would write logs/ in its
        // working directory; keep any file it makes in the temp dir.
        .current_dir(tmp)
        .env("HOME", tmp);
    run_bounded(&mut cmd, CASE_DEADLINE)
}

/// Runs `cases` in parallel (one process each) against one broker, in
/// plain text, or with TLS when `tls`: then the broker's gRPC port serves
/// a certificate of a test CA the SDK is told to trust. Panics with every
/// failed case's output unless each ended with ALL PASSED.
fn run_all(cases: &[&str], tls: bool) {
    let Some(dir) = family_dir(FAMILY) else {
        return;
    };
    let bin: PathBuf = dir.join("bin").join("rustgrpcsdk");
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut extra = Vec::new();
    let mut tls_ca = None;
    if tls {
        let ca = crate::tls_certs::TestCa::new(tmp.path(), "grpc");
        let cert = ca.server(tmp.path(), "server");
        extra.push(format!("tls.server.certPath={}", cert.cert.display()));
        extra.push(format!("tls.server.keyPath={}", cert.key.display()));
        tls_ca = Some(ca.cert_path);
    }
    let (b, endpoint) = broker(tmp.path(), cases, &extra);
    let runs: Vec<(&str, Finished)> = std::thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|case| {
                let (bin, tmp, endpoint) = (&bin, tmp.path(), &endpoint);
                let ca = tls_ca.as_deref();
                (
                    *case,
                    s.spawn(move || run_case(bin, tmp, endpoint, case, ca)),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(case, h)| (case, h.join().expect("case thread")))
            .collect()
    });
    let mut failed = Vec::new();
    for (case, run) in &runs {
        let what = format!("rustgrpcsdk {case}");
        let passed = run.success() && run.stdout.lines().last() == Some("ALL PASSED");
        println!("{}", run.report(&what));
        if !passed {
            failed.push(run.report(&what));
        }
    }
    drop(b);
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn producers_and_simple_consumers() {
    run_all(&["normal", "fifo", "delay", "transaction"], false);
}

#[test]
fn invisible_time() {
    run_all(&["invisible"], false);
}

/// The SDK with TLS on (`set_enable_tls(true)`) against the gRPC port's
/// default, permissive TLS with a certificate of a CA it trusts: sends,
/// receives and the transaction check-back over the Telemetry stream.
#[test]
fn sdk_tls_with_a_trusted_ca() {
    run_all(&["normal", "transaction"], true);
}
