//! kill -9 under SYNC_FLUSH: a child process appends and reports every
//! acknowledged message; the parent kills it at random moments and checks,
//! after each restart, that every acknowledged message is there exactly once,
//! in order, with the right queue offsets.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use basalt_common::config::FlushDiskType;
use basalt_common::record::RecordView;
use basalt_store::{MessageStore, PutMessageStatus, StoreConfig};
use common::*;
use rand::{Rng, SeedableRng, rngs::StdRng};

const WRITERS: i32 = 4;

fn config(dir: &std::path::Path) -> StoreConfig {
    let mut cfg = StoreConfig::for_tests(dir);
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    cfg
}

/// The child: appends until killed. Runs only when spawned by the parent.
#[test]
#[ignore = "run by kill9_under_sync_flush_loses_no_acknowledged_message as a child process"]
fn crash_child() {
    let Ok(dir) = std::env::var("BASALT_CRASH_DIR") else {
        return;
    };
    let base: u64 = std::env::var("BASALT_CRASH_BASE").unwrap().parse().unwrap();
    let store = MessageStore::open(config(std::path::Path::new(&dir))).unwrap();
    println!("READY");
    let host = store.store_host();
    std::thread::scope(|s| {
        for t in 0..WRITERS {
            let store = &store;
            s.spawn(move || {
                for i in 0u64.. {
                    let id = base + i;
                    let m = Msg::new("Crash", t, format!("id:{id:012}:").into_bytes().repeat(4));
                    let mut r = store.put_message(&m.draft(host));
                    store.wait_durable_blocking(&mut r, true);
                    if r.status == PutMessageStatus::PutOk {
                        let a = r.append.unwrap();
                        // One line per acknowledgement; stdout is line-buffered.
                        println!("ACK {t} {} {id}", a.queue_offset);
                    }
                }
            });
        }
    });
}

fn body_id(body: &[u8]) -> u64 {
    let s = std::str::from_utf8(&body[3..15]).unwrap();
    s.parse().unwrap()
}

#[test]
fn kill9_under_sync_flush_loses_no_acknowledged_message() {
    let seed: u64 = std::env::var("BASALT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // queue -> (queue offset -> id) of every acknowledged message.
    let mut acked: HashMap<i32, HashMap<i64, u64>> = HashMap::new();
    let mut total_acked = 0usize;

    for cycle in 0..6u64 {
        let mut child = Command::new(&exe)
            .args([
                "crash_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("BASALT_CRASH_DIR", dir.path())
            .env("BASALT_CRASH_BASE", (cycle * 100_000_000).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait for the child to be up, then let it run a random while.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("child started");
            if line.contains("READY") {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(30..400)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        let mut this_cycle = 0;
        for line in rx.try_iter() {
            let mut parts = line.split_whitespace();
            if parts.next() != Some("ACK") {
                continue;
            }
            let q: i32 = parts.next().unwrap().parse().unwrap();
            let qoff: i64 = parts.next().unwrap().parse().unwrap();
            let id: u64 = parts.next().unwrap().parse().unwrap();
            let prev = acked.entry(q).or_default().insert(qoff, id);
            assert!(
                prev.is_none() || prev == Some(id),
                "queue offset {qoff} of queue {q} acknowledged twice"
            );
            this_cycle += 1;
        }
        total_acked += this_cycle;

        // Restart (abnormal recovery) and check.
        let store = MessageStore::open(config(dir.path())).unwrap();
        assert!(
            store.recovery_report().abnormal,
            "a killed store recovers abnormally"
        );
        assert!(store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(30)));
        for q in 0..WRITERS {
            let got = read_queue(&store, "Crash", q);
            let mut last_id = None;
            for (i, (qoff, body)) in got.iter().enumerate() {
                assert_eq!(
                    *qoff, i as i64,
                    "queue offsets of queue {q} are 0.. without gaps"
                );
                let id = body_id(body);
                if let Some(prev) = last_id {
                    assert!(
                        id > prev,
                        "queue {q}: id {id} after {prev} (duplicate or reordered)"
                    );
                }
                last_id = Some(id);
            }
            let present: HashMap<i64, u64> = got.iter().map(|(o, b)| (*o, body_id(b))).collect();
            for (qoff, id) in acked.get(&q).into_iter().flatten() {
                assert_eq!(
                    present.get(qoff),
                    Some(id),
                    "seed {seed} cycle {cycle}: acknowledged message {id} at queue {q} offset {qoff} is missing"
                );
            }
        }
        assert_consistent(&store);
        // Double-check a random acknowledged record by its stored bytes.
        if let Some((q, offs)) = acked.iter().next()
            && let Some((qoff, id)) = offs.iter().next()
        {
            let phys = store
                .commit_log_offset_in_queue("Crash", *q, *qoff)
                .unwrap();
            let rec = store.look_message_by_offset(phys).unwrap();
            assert_eq!(body_id(RecordView::parse(&rec, true).unwrap().body), *id);
        }
        store.shutdown();
    }
    eprintln!("seed {seed}: {total_acked} acknowledged messages over 6 kill -9 cycles");
    assert!(total_acked > 0, "the children acknowledged nothing");
}
