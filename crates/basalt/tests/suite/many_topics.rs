//! Issue 16, many topics: a broker holding 5,000 topics of 4 queues, each
//! auto-created by a send of one message (topic i's goes to queue i % 4),
//! restarts cleanly and after SIGKILL
//! with every message readable, and right after each start its file-backed
//! resident memory (RssFile) stays within a small multiple of what the
//! ConsumeQueues hold on disk. (Before the fix every 6 MB queue file was read
//! in full at start: tens of GB of zero-filled page cache for a few MB of
//! units.)

use crate::raw;
use crate::standalone;

use std::path::Path;
use std::time::{Duration, Instant};

use basalt_remoting::code::response;
use raw::{Raw, pull_request, send_request};
use standalone::{Standalone, proc_status_kb};

const TOPICS: usize = 5_000;
const QUEUES: i32 = 4;
/// Connections the sends and pulls are spread over.
const CONNECTIONS: usize = 64;
/// Bounds each phase (sending, reading back).
const PHASE: Duration = Duration::from_secs(60);
/// What RssFile may hold besides the ConsumeQueues' pages: the binary's
/// text, the CommitLog pages recovery reads and the chunks the allocator
/// maps ahead of the writer (2 × 16 MiB).
const FIXED_RSS_FILE: u64 = 256 << 20;

fn topic(i: usize) -> String {
    format!("ManyTopics{i}")
}

/// The queue topic `i`'s one message goes to.
fn queue_of(i: usize) -> i32 {
    (i % QUEUES as usize) as i32
}

fn body(t: &str, q: i32) -> String {
    format!("message of {t} queue {q}")
}

/// Runs `work(conn, topic index)` for every topic, spread over
/// [`CONNECTIONS`] connections on their own threads.
fn for_all_topics(addr: &str, work: impl Fn(&mut Raw, usize) + Sync) {
    std::thread::scope(|s| {
        for c in 0..CONNECTIONS {
            let work = &work;
            s.spawn(move || {
                let mut conn = Raw::connect(addr);
                for i in (c..TOPICS).step_by(CONNECTIONS) {
                    work(&mut conn, i);
                }
            });
        }
    });
}

fn send_all(addr: &str) {
    let deadline = Instant::now() + PHASE;
    for_all_topics(addr, |conn, i| {
        let t = topic(i);
        {
            let q = queue_of(i);
            let r = conn.call(send_request(&t, q, body(&t, q).as_bytes()));
            assert_eq!(r.code, response::SUCCESS, "send to {t}/{q}: {:?}", r.remark);
            assert_eq!(
                r.ext_fields.get("queueOffset").map(|v| v.to_string()),
                Some("0".to_string()),
                "first message of {t}/{q}"
            );
        }
        assert!(
            Instant::now() < deadline,
            "sending took longer than {PHASE:?}"
        );
    });
}

/// Pulls offset 0 of every queue and checks it holds its message; a queue
/// not dispatched yet is asked again until the phase deadline.
fn read_all(addr: &str, when: &str) {
    let deadline = Instant::now() + PHASE;
    for_all_topics(addr, |conn, i| {
        let t = topic(i);
        {
            let q = queue_of(i);
            let want = body(&t, q);
            loop {
                let r = conn.call(pull_request(&t, q, 0));
                if r.code == response::SUCCESS {
                    assert!(
                        r.body.windows(want.len()).any(|w| w == want.as_bytes()),
                        "{when}: {t}/{q} offset 0 holds its message"
                    );
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{when}: {t}/{q} not readable (code {}, {:?})",
                    r.code,
                    r.remark
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
}

/// Bytes the ConsumeQueue files occupy on disk (allocated blocks).
fn consume_queue_disk_bytes(data: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut files = 0;
    for t in std::fs::read_dir(data.join("consumequeue")).unwrap() {
        for q in std::fs::read_dir(t.unwrap().path()).unwrap() {
            for f in std::fs::read_dir(q.unwrap().path()).unwrap() {
                total += f.unwrap().metadata().unwrap().blocks() * 512;
                files += 1;
            }
        }
    }
    assert_eq!(
        files, TOPICS,
        "one file per queue that got a message, none for the others"
    );
    total
}

/// RssFile right after start is at most a small multiple of the queues'
/// on-disk size plus a fixed allowance.
fn check_rss_file(b: &Standalone, cq_disk: u64, when: &str) {
    let pid = b.pid().expect("broker runs");
    let rss_file = proc_status_kb(pid, "RssFile").expect("RssFile in /proc/PID/status") << 10;
    let bound = 3 * cq_disk + FIXED_RSS_FILE;
    eprintln!(
        "{when}: RssFile {} MiB, ConsumeQueues on disk {} MiB, bound {} MiB",
        rss_file >> 20,
        cq_disk >> 20,
        bound >> 20
    );
    assert!(
        rss_file <= bound,
        "{when}: RssFile {rss_file} bytes exceeds {bound} (3 × {cq_disk} on disk + {FIXED_RSS_FILE})"
    );
}

#[test]
fn five_thousand_topics_restart_with_small_resident_memory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let sets = ["mappedFileSizeCommitLog=67108864"];
    let mut b = Standalone::start(&data, &sets);
    let addr = b.broker_addr();
    let started = Instant::now();
    send_all(&addr);
    eprintln!(
        "creating {TOPICS} topics by sends took {:?}",
        started.elapsed()
    );
    read_all(&addr, "before any restart");

    b.stop();
    let cq_disk = consume_queue_disk_bytes(&data);
    // One block per queue holding one unit, not a whole reserved file.
    assert!(
        cq_disk <= TOPICS as u64 * 8192,
        "ConsumeQueues take {cq_disk} bytes on disk"
    );
    b.restart();
    check_rss_file(&b, cq_disk, "after a clean restart");
    read_all(&addr, "after a clean restart");

    b.kill();
    b.restart();
    check_rss_file(&b, cq_disk, "after a kill -9 restart");
    read_all(&addr, "after a kill -9 restart");
    b.stop();
}
