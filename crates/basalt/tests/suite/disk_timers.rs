//! Timer messages and forced cleanup on a small loop-mounted disk
//! (docs/disk-space.md#messages-waiting-for-their-time):
//!
//! * above `diskSpaceCleanForciblyRatio` but below the warning ratio, the
//!   CommitLog file holding timers still waiting for their time is kept, and
//!   every timer is delivered once it is due; cleanup goes on afterwards;
//! * on a full disk (sends refused) with nothing else to delete, the file
//!   goes anyway: each timer lost is logged with its topic, key and due time
//!   and counted in `basalt_scheduled_messages_dropped_total`.

use crate::disk_full::{LoopFs, client_config, create_topic, loop_fs, produce, producer};
use crate::prom;
use crate::standalone::Standalone;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use basalt_client::{Admin, Message, Producer, PullConsumer, PullStatus, SendStatus, TopicConfig};
use basalt_common::time::now_millis;

const TARGET: &str = "TimerTarget";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Fills the disk until about `pct` percent is used.
fn fill_to(fs: &LoopFs, name: &str, pct: u64) {
    let st = fs.statvfs();
    let total = (st.f_blocks - st.f_bfree + st.f_bavail) * st.f_frsize;
    fs.fill(name, total * (100 - pct) / 100);
}

/// One `/metrics` value (0 when absent).
async fn metric(port: u16, name: &str) -> f64 {
    let name = name.to_string();
    tokio::task::spawn_blocking(move || {
        let (status, body) = prom::http_get(port, "/metrics").expect("GET /metrics");
        assert_eq!(status, 200, "{body}");
        let e = prom::parse(&body).unwrap_or_else(|e| panic!("bad /metrics: {e}"));
        e.get(&name, &[]).unwrap_or(0.0)
    })
    .await
    .unwrap()
}

/// Sends `n` timers to [`TARGET`] due at `due_ms`, keys `{tag}-{i}`.
async fn send_timers(p: &Producer, tag: &str, n: usize, due_ms: i64) {
    for i in 0..n {
        let m = Message::new(TARGET, format!("{tag}-{i}").into_bytes())
            .with_key(format!("{tag}-{i}"))
            .with_property("TIMER_DELIVER_MS", due_ms.to_string());
        let r = p.send(&m).await.expect("timer send answered");
        assert_eq!(r.status, SendStatus::SendOk, "timer {tag}-{i}");
    }
    eprintln!("sent {n} timers {tag}-* due at {due_ms}");
}

/// Every message of [`TARGET`], body → times seen, read until `want`
/// distinct bodies are there (bounded by `until`).
async fn read_target(ns: &str, want: usize, until: Instant) -> BTreeMap<String, usize> {
    let c = PullConsumer::new("disk-timers-reader", client_config(ns));
    c.start().await.unwrap();
    loop {
        let mut seen = BTreeMap::new();
        for mq in c.fetch_queues(TARGET).await.unwrap() {
            let mut offset = 0;
            loop {
                let r = c.pull(&mq, "*", offset, 32, Duration::from_secs(2)).await;
                let Ok(r) = r else { break };
                if r.status != PullStatus::Found {
                    break;
                }
                for m in r.msgs {
                    *seen
                        .entry(String::from_utf8_lossy(&m.body).into_owned())
                        .or_insert(0) += 1;
                }
                offset = r.next_begin_offset;
            }
        }
        if seen.len() >= want || Instant::now() > until {
            c.shutdown().await;
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_cleanup_keeps_pending_timers_and_counts_what_a_full_disk_takes() {
    let Some(fs) = loop_fs(128) else { return };
    let data = fs.link("store");
    let port = free_port();
    let broker = Standalone::start(
        &data,
        &[
            "mappedFileSizeCommitLog=8388608",
            "mappedFileSizeConsumeQueue=400000",
            "diskSpaceWarningLevelRatio=90",
            "diskSpaceCleanForciblyRatio=85",
            "diskMaxUsedSpaceRatio=75",
            "deleteCommitLogFilesInterval=0",
            // 2,048 TimerLog entries a segment (the default 100 MiB would
            // not fit this disk).
            "mappedFileSizeTimerLog=98304",
            &format!("metricsPromExporterPort={port}"),
            "dashboardEnable=false",
        ],
    );
    let ns = broker.namesrv_addr();
    create_topic(&ns, &broker.broker_addr()).await;
    let admin = Admin::new(client_config(&ns));
    admin
        .create_topic(&broker.broker_addr(), &TopicConfig::new(TARGET, 2))
        .await
        .unwrap();
    admin.shutdown();
    let (p, queues) = producer(&ns).await;

    // Phase 1: timers in the first CommitLog file, due after the fill;
    // three more files of plain messages behind them; the disk at ~87%.
    let n = 40;
    let due = now_millis() + 60_000;
    send_timers(&p, "kept", n, due).await;
    let plain = produce(&p, &queues, 0, 24 * 1024, 1).await;
    assert!(plain.refused.is_empty(), "{:?}", plain.refused);
    fill_to(&fs, "filler-a", 87);
    eprintln!(
        "disk {}% used; timers due in {} ms",
        fs.used_percent(),
        due - now_millis()
    );
    // Several cleanup rounds pass before the timers are due: the file
    // holding them stays (the log still starts at 0).
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        now_millis() < due,
        "the sends and the fill took longer than the timers' delay on this machine"
    );
    let min = metric(port, "basalt_commitlog_min_offset").await;
    eprintln!(
        "before the timers are due: CommitLog from {min}, disk {}%",
        fs.used_percent()
    );
    assert_eq!(min, 0.0, "the file holding pending timers was deleted");
    let wait = (due - now_millis()).max(0) as u64 + 2000;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let seen = read_target(&ns, n, Instant::now() + Duration::from_secs(30)).await;
    eprintln!("delivered: {} distinct timers", seen.len());
    for i in 0..n {
        assert_eq!(
            seen.get(&format!("kept-{i}")),
            Some(&1),
            "timer kept-{i}: {seen:?}"
        );
    }
    assert_eq!(seen.len(), n);
    // Delivered: the floor is gone and forced cleanup goes on.
    let deadline = Instant::now() + Duration::from_secs(30);
    while metric(port, "basalt_commitlog_min_offset").await == 0.0 {
        assert!(
            Instant::now() < deadline,
            "cleanup did not resume after delivery"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(
        metric(port, "basalt_scheduled_messages_dropped_total").await,
        0.0
    );

    // Phase 2: timers due far ahead, one more file behind them, then the
    // disk filled until sends are refused and nothing else can go.
    let lost = 25;
    send_timers(&p, "lost", lost, now_millis() + 600_000).await;
    more_behind_the_timers(&p, &queues, 10 * 1024).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut round = 0;
    loop {
        let dropped = metric(port, "basalt_scheduled_messages_dropped_total").await;
        // The timers may straddle two files: one goes per round.
        assert!(dropped <= lost as f64, "{dropped} counted, {lost} sent");
        if dropped == lost as f64 {
            eprintln!("dropped counter {dropped} after {round} fills");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a full disk never dropped the timers"
        );
        // Space freed by ordinary deletions is taken again.
        fill_to(&fs, &format!("filler-b{round}"), 97);
        round += 1;
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let log = broker.log_text();
    for i in 0..lost {
        let key = format!("lost-{i}");
        let line = log
            .lines()
            .find(|l| {
                l.contains("deleted by forced cleanup") && l.contains(&format!("keys={key} "))
            })
            .unwrap_or_else(|| panic!("no log line for {key}"));
        assert!(line.contains(TARGET) && line.contains("due_ms"), "{line}");
    }
    eprintln!("every lost timer logged with topic, key and due time");
    p.shutdown().await;
    drop(broker);
}

/// Sends `n` 1 KiB messages. Phase 1's forced cleanup may still be freeing
/// space when they start (it deletes a file a round), so a send refused for
/// a full disk is sent again once cleanup has caught up; anything else
/// fails the test.
async fn more_behind_the_timers(p: &Producer, queues: &[basalt_client::TopicQueue], n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut acked = 0;
    while acked < n {
        let r = produce(p, queues, 100_000 + acked as u64, (n - acked) as u64, 1).await;
        acked += r.acked.len();
        assert!(r.not_ok.is_empty(), "{:?}", r.not_ok);
        if let Some((code, remark)) = r.refused.first() {
            assert!(remark.contains("disk full"), "{code} {remark}");
            assert!(
                Instant::now() < deadline,
                "cleanup never made room for {n} more messages: {remark}"
            );
            eprintln!("{acked} of {n} sent; waiting for cleanup: {remark}");
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
}
