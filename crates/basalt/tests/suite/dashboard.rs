//! The web dashboard of a real `basalt standalone`, rendered by a real
//! headless Chromium: pages show live data (topic names, a group's lag per
//! queue, the broker, a message found by key with its body) and charts with
//! points from the history; screenshots land in target/tmp/dashboard/ for a
//! person to look at; the groups page's POP card shows a POP group's
//! messages popped and not acked. Skipped, saying so, without /usr/bin/chromium
//! (Debian's `chromium` package; .ci/run installs it).
//!
//! No request leaves 127.0.0.1: the embedded assets name no other host,
//! and Chromium runs with background networking off and every other host
//! name unresolvable.

use crate::prom;
use crate::standalone;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, Producer, PushConsumeFrom, PushConsumer,
    PushOptions, TopicConfig,
};

use standalone::Standalone;

pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
const TOPIC: &str = "DashTopic";
const GROUP: &str = "dash-group";
const POP_GROUP: &str = "dash-pop";
/// Of the 26 messages the POP group pops, it acks all but these.
const POP_LEFT: usize = 5;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Chromium's arguments for one headless run against the dashboard.
fn chromium(profile: &Path, extra: &[String], url: &str) -> Command {
    let mut c = Command::new(CHROMIUM);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--no-first-run",
        "--no-default-browser-check",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        "--virtual-time-budget=4000",
        "--window-size=1280,1000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(url);
    c
}

/// The DOM of `url` after its scripts ran.
pub(crate) fn dump_dom(tmp: &Path, name: &str, url: &str) -> String {
    let out = chromium(
        &tmp.join(format!("profile-{name}")),
        &["--dump-dom".into()],
        url,
    )
    .output()
    .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && !dom.is_empty(),
        "chromium --dump-dom {url} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dom
}

fn screenshot(tmp: &Path, name: &str, url: &str, dir: &Path) -> PathBuf {
    let file = dir.join(format!("{name}.png"));
    let out = chromium(
        &tmp.join(format!("shot-{name}")),
        &[format!("--screenshot={}", file.display())],
        url,
    )
    .output()
    .expect("run chromium");
    assert!(
        out.status.success() && file.exists(),
        "screenshot of {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    file
}

/// The number in `attr="N"` of the element whose opening tag contains
/// `marker` (the first such tag).
fn attr_of(dom: &str, marker: &str, attr: &str) -> Option<i64> {
    let at = dom.find(marker)?;
    let tag_start = dom[..at].rfind('<')?;
    let tag = &dom[tag_start..tag_start + dom[tag_start..].find('>')?];
    let v = tag.split(&format!("{attr}=\"")).nth(1)?;
    v[..v.find('"')?].parse().ok()
}

/// Sends, consumes everything, then sends 6 more the group has not taken.
async fn traffic(b: &Standalone) {
    let ns = b.ports.namesrv_addr();
    let admin = Admin::new(ClientConfig::new(ns.clone()));
    admin
        .create_topic(&b.ports.broker_addr(), &TopicConfig::new(TOPIC, 2))
        .await
        .expect("create topic");
    let p = Producer::new("dash-producer", ClientConfig::new(ns.clone()));
    p.start().await.expect("producer");
    for i in 0..20 {
        let m = Message::new(TOPIC, format!("dash body {i}")).with_key(format!("dash-key-{i}"));
        p.send(&m).await.expect("send");
    }
    let opts = PushOptions {
        consume_from_where: PushConsumeFrom::FirstOffset,
        ..Default::default()
    };
    let c = PushConsumer::with_options(GROUP, ClientConfig::new(ns.clone()), opts);
    c.subscribe(TOPIC, "*").expect("subscribe");
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s2 = std::sync::Arc::clone(&seen);
    c.register_listener(move |msgs, _| {
        s2.fetch_add(msgs.len(), std::sync::atomic::Ordering::SeqCst);
        ConsumeStatus::Success
    });
    c.start().await.expect("consumer");
    let deadline = Instant::now() + Duration::from_secs(15);
    while seen.load(std::sync::atomic::Ordering::SeqCst) < 20 {
        assert!(Instant::now() < deadline, "consumer did not get 20");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.shutdown().await;
    for i in 20..26 {
        p.send(&Message::new(TOPIC, format!("dash body {i}")))
            .await
            .expect("send");
    }
    p.shutdown().await;
    admin.shutdown();
}

/// A POP group (over raw remoting) pops all 26 messages, 60 s invisible,
/// and acks all but [`POP_LEFT`].
fn pop_traffic(b: &Standalone) {
    let mut c = crate::raw::Raw::connect(&b.ports.broker_addr());
    let got = crate::pop::pop_until(
        &mut c,
        POP_GROUP,
        TOPIC,
        60_000,
        26,
        Duration::from_secs(15),
    );
    assert_eq!(got.len(), 26, "the POP group got every message");
    for p in &got[POP_LEFT..] {
        let r = crate::pop::ack(&mut c, POP_GROUP, TOPIC, p);
        assert_eq!(r.code, 0, "ack: {:?}", r.remark);
    }
    println!("popped {}, acked {}", got.len(), got.len() - POP_LEFT);
}

/// Every embedded asset names no host but its own origin.
fn assets_are_local(port: u16) {
    for path in ["/", "/app.js", "/chart.js", "/style.css"] {
        let (status, body) = prom::http_get(port, path).expect("GET asset");
        assert_eq!(status, 200, "{path}");
        for bad in ["http://", "https://", "src=\"//", "href=\"//", "url("] {
            assert!(!body.contains(bad), "{path} refers to {bad}");
        }
    }
}

#[test]
fn dashboard_pages_render_live_data_in_chromium() {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("SKIPPED: {CHROMIUM} not found (apt-get install -y chromium)");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let b = Standalone::start(
        &dir.path().join("data"),
        &[
            "metricsExporterType=DISABLE",
            &format!("dashboardPort={port}"),
            "dashboardHost=127.0.0.1",
            "dashboardSampleIntervalMs=250",
        ],
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(traffic(&b));
    pop_traffic(&b);
    // The history sampler needs a few rounds after the lag appeared; a
    // sample is taken every 250 ms.
    std::thread::sleep(Duration::from_millis(1500));
    assets_are_local(port);

    let base = format!("http://127.0.0.1:{port}/");
    let tmp = dir.path().to_path_buf();
    let pages = [
        ("topics", format!("{base}#topics/{TOPIC}")),
        ("groups", format!("{base}#groups/{GROUP}")),
        ("cluster", format!("{base}#cluster")),
        ("pop", format!("{base}#groups/{POP_GROUP}")),
        (
            "messages",
            format!("{base}#messages?topic={TOPIC}&key=dash-key-3"),
        ),
    ];
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let doms: Vec<(String, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = pages
            .iter()
            .map(|(name, url)| {
                let tmp = &tmp;
                s.spawn(move || (name.to_string(), dump_dom(tmp, name, url)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("chromium thread"))
            .collect()
    });
    let dom = |n: &str| &doms.iter().find(|(k, _)| k == n).expect("page").1;

    let topics = dom("topics");
    assert!(
        topics.contains(&format!("data-topic=\"{TOPIC}\"")),
        "{topics}"
    );
    assert!(topics.contains("id=\"queues\""), "queue table: {topics}");
    let points = attr_of(topics, "id=\"chart-topics\"", "data-points").unwrap_or(0);
    assert!(points >= 2, "topic chart points: {points}\n{topics}");

    let groups = dom("groups");
    let row = &groups[groups
        .find(&format!("data-group=\"{GROUP}\""))
        .expect("group row")..];
    assert_eq!(
        attr_of(row, "class=\"num lag\"", "data-lag"),
        Some(6),
        "{groups}"
    );
    // The group's queue tables (other groups' rows, the POP group's, may
    // come between its row and them).
    let tables = &row[row.find("class=\"queue-lag\"").expect("queue tables")..];
    let queue_lags: i64 = tables
        .split("class=\"num lag\" data-lag=\"")
        .skip(1)
        .filter_map(|s| s[..s.find('"')?].parse::<i64>().ok())
        .sum();
    assert_eq!(queue_lags, 6, "per-queue lag adds up: {groups}");
    let points = attr_of(groups, "id=\"chart-lag\"", "data-points").unwrap_or(0);
    assert!(points >= 2, "lag chart points: {points}\n{groups}");

    let pop = dom("pop");
    let row = &pop[pop
        .find(&format!(
            "data-pop-group=\"{POP_GROUP}\" data-pop-topic=\"{TOPIC}\""
        ))
        .unwrap_or_else(|| panic!("POP row: {pop}"))..];
    let left = POP_LEFT as i64;
    assert_eq!(
        attr_of(row, "class=\"num inflight\"", "data-inflight"),
        Some(left),
        "{pop}"
    );
    assert_eq!(
        attr_of(pop, "id=\"pop-inflight\"", "data-inflight"),
        Some(left),
        "{pop}"
    );
    assert_eq!(
        attr_of(pop, "id=\"pop-revive-lag\"", "data-ms"),
        Some(0),
        "{pop}"
    );

    let cluster = dom("cluster");
    assert!(cluster.contains("data-broker=\"broker-a\""), "{cluster}");
    assert!(cluster.contains("id=\"poisoned\">no<"), "{cluster}");

    let messages = dom("messages");
    assert!(messages.contains("class=\"card message\""), "{messages}");
    assert!(messages.contains("dash body 3"), "body preview: {messages}");

    for (name, url) in &pages[..2] {
        let f = screenshot(&tmp, name, url, &shots);
        eprintln!("screenshot: {}", f.display());
    }
    drop(b);
}
