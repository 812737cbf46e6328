//! Operations views of POP and gRPC (docs/pop.md#operations,
//! docs/metrics.md#grpc) against a real `basalt standalone`:
//! * POP over raw remoting leaves 4 of 10 messages popped and not acked;
//!   `/metrics`, `basalt admin pop` (tables and `--json`, all groups and
//!   one) and the dashboard's `/api/snapshot` all show exactly those 4;
//! * [`check_grpc_metrics`]: what an SDK run must have left in the
//!   `basalt_grpc_*` families (used by grpc_go_sdk.rs, whose SDK makes
//!   the gRPC calls; the suite has no gRPC client of its own).

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::pop::{ack, pop_until};
use crate::prom::{self, Exposition};
use crate::raw::{Raw, send_request};
use crate::standalone::{self, Standalone};
use basalt_remoting::code::response;

const TOPIC: &str = "OpsPopT";
const GROUP: &str = "ops-pop";
const SENT: usize = 10;
const ACKED: usize = 6;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// `/metrics` of the broker, parsed strictly.
pub(crate) fn scrape(port: u16) -> Exposition {
    let (status, body) = prom::http_get(port, "/metrics").expect("GET /metrics");
    assert_eq!(status, 200, "/metrics: {body}");
    prom::parse(&body).unwrap_or_else(|e| panic!("/metrics does not parse: {e}\n{body}"))
}

/// Runs `basalt admin --namesrv NS ARGS...`; panics unless it succeeds.
fn basalt_admin(namesrv: &str, args: &[&str]) -> String {
    let out = Command::new(standalone::broker_binary())
        .args(["admin", "--namesrv", namesrv])
        .args(args)
        .output()
        .expect("run basalt admin");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("basalt admin {args:?}:\n{stdout}");
    assert!(
        out.status.success(),
        "basalt admin {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Sends [`SENT`], pops them all (60 s invisible), acks [`ACKED`].
fn pop_traffic(s: &Standalone) {
    let mut c = Raw::connect(&s.broker_addr());
    for i in 0..SENT {
        let body = format!("ops-{i}");
        let r = c.call(send_request(TOPIC, (i % 4) as i32, body.as_bytes()));
        assert_eq!(r.code, response::SUCCESS, "send {body}: {:?}", r.remark);
        println!("SENT {body}");
    }
    let got = pop_until(&mut c, GROUP, TOPIC, 60_000, SENT, Duration::from_secs(15));
    let mut bodies: Vec<String> = got.iter().map(crate::pop::body).collect();
    bodies.sort();
    bodies.dedup();
    println!("POPPED {bodies:?}");
    assert_eq!((got.len(), bodies.len()), (SENT, SENT), "each popped once");
    for p in &got[..ACKED] {
        let r = ack(&mut c, GROUP, TOPIC, p);
        assert_eq!(r.code, response::SUCCESS, "ack: {:?}", r.remark);
        println!("ACKED {}", crate::pop::body(p));
    }
}

/// Waits until `/metrics` shows `want` in flight for the group; returns it.
fn metrics_in_flight(port: u16, want: f64) -> Exposition {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let e = scrape(port);
        let l = [("consumer_group", GROUP), ("topic", TOPIC)];
        let n = e.get("basalt_pop_inflight_messages", &l);
        if n == Some(want) || Instant::now() > deadline {
            println!("basalt_pop_inflight_messages{l:?} = {n:?}");
            assert_eq!(n, Some(want), "in flight in /metrics");
            return e;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn check_admin(ns: &str, addr: &str) {
    let left = (SENT - ACKED) as u64;
    let v: serde_json::Value =
        serde_json::from_str(&basalt_admin(ns, &["--json", "pop"])).expect("admin JSON");
    let brokers = v["brokers"].as_array().expect("brokers");
    assert_eq!(brokers.len(), 1, "{v}");
    assert_eq!(brokers[0]["broker"], addr, "{v}");
    assert_eq!(brokers[0]["inFlight"], left, "{v}");
    assert_eq!(brokers[0]["reviveLagMs"], 0, "nothing overdue: {v}");
    let groups = v["groups"].as_array().expect("groups");
    let ours: Vec<_> = groups.iter().filter(|g| g["group"] == GROUP).collect();
    assert_eq!(ours.len(), 1, "one row for {GROUP}/{TOPIC}: {v}");
    assert_eq!(ours[0]["topic"], TOPIC, "{v}");
    assert_eq!(ours[0]["inFlight"], left, "{v}");
    assert_eq!(v["groupsInFlight"], left, "{v}");

    let one = basalt_admin(ns, &["pop", "-b", addr, "-g", GROUP]);
    let row = one
        .lines()
        .find(|l| l.contains(GROUP) && l.contains(TOPIC))
        .unwrap_or_else(|| panic!("no row for {GROUP}: {one}"));
    assert_eq!(
        row.split_whitespace().last(),
        Some(left.to_string().as_str()),
        "{row}"
    );
    assert!(
        one.contains(&format!(
            "{left} message(s) of {GROUP} popped and not acked"
        )),
        "{one}"
    );
    let other = basalt_admin(ns, &["--json", "pop", "-g", "no-such-group"]);
    let v: serde_json::Value = serde_json::from_str(&other).expect("admin JSON");
    assert_eq!(v["groups"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(v["groupsInFlight"], 0, "{v}");
}

fn check_dashboard(port: u16) {
    let (status, body) = prom::http_get(port, "/api/snapshot").expect("GET snapshot");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("snapshot JSON");
    let pop = &v["pop"];
    println!("dashboard pop: {pop}");
    let left = (SENT - ACKED) as u64;
    assert_eq!(pop["inFlight"], left, "{pop}");
    assert_eq!(pop["reviveLagMs"], 0, "{pop}");
    let rows = pop["byGroup"].as_array().expect("byGroup");
    let want = serde_json::json!([GROUP, TOPIC, left]);
    assert_eq!(rows.iter().filter(|r| **r == want).count(), 1, "{pop}");
}

#[test]
fn pop_in_flight_shows_in_metrics_admin_and_dashboard() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (mport, dport) = (free_port(), free_port());
    let s = Standalone::start(
        &dir.path().join("data"),
        &[
            "metricsExporterType=PROM",
            "metricsPromExporterHost=127.0.0.1",
            &format!("metricsPromExporterPort={mport}"),
            "dashboardEnable=true",
            "dashboardHost=127.0.0.1",
            &format!("dashboardPort={dport}"),
        ],
    );
    pop_traffic(&s);
    let left = (SENT - ACKED) as f64;
    let e = metrics_in_flight(mport, left);
    assert_eq!(e.value("basalt_pop_inflight_total", &[]), left);
    assert_eq!(e.value("basalt_pop_revive_lag_ms", &[]), 0.0);
    // No gRPC call was made: the families are declared and empty.
    for f in [
        "basalt_grpc_requests_total",
        "basalt_grpc_request_duration_seconds",
    ] {
        assert!(e.types.contains_key(f), "{f} declared");
    }
    assert!(e.find("basalt_grpc_requests_total", &[]).is_empty());
    check_admin(&s.namesrv_addr(), &s.broker_addr());
    check_dashboard(dport);
}

/// The calls of one RPC answered with one code, from `/metrics`.
fn calls(e: &Exposition, rpc: &str, code: &str) -> f64 {
    let l = [("rpc", rpc), ("code", code)];
    e.get("basalt_grpc_requests_total", &l).unwrap_or(0.0)
}

/// Checks what gRPC SDK runs left in `/metrics` on `port`: at least
/// `min` calls of each (RPC, code), and for every RPC counted, a duration
/// histogram counting exactly its calls over all codes.
pub(crate) fn check_grpc_metrics(port: u16, min: &[(&str, &str, f64)]) {
    let e = scrape(port);
    let counted = e.find("basalt_grpc_requests_total", &[]);
    for s in &counted {
        println!("{} {:?} = {}", s.name, s.labels, s.value);
    }
    for (rpc, code, at_least) in min {
        let n = calls(&e, rpc, code);
        assert!(
            n >= *at_least,
            "{rpc} {code}: {n} calls, want >= {at_least}"
        );
    }
    let mut rpcs: Vec<&str> = counted.iter().map(|s| s.labels["rpc"].as_str()).collect();
    rpcs.sort();
    rpcs.dedup();
    for rpc in rpcs {
        let total: f64 = e
            .find("basalt_grpc_requests_total", &[("rpc", rpc)])
            .iter()
            .map(|s| s.value)
            .sum();
        let timed = e.value(
            "basalt_grpc_request_duration_seconds_count",
            &[("rpc", rpc)],
        );
        assert_eq!(timed, total, "{rpc}: every call timed once");
        let sum = e.value("basalt_grpc_request_duration_seconds_sum", &[("rpc", rpc)]);
        assert!(sum >= 0.0 && sum.is_finite(), "{rpc}: duration sum {sum}");
    }
}
