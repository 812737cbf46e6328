//! Where a topic's memory goes (issue 16): the heap this process holds,
//! counted by a global allocator, before and after a broker creates topics
//! by sends (one message each, like `scripts/many_topics.py`), and the part
//! of it the topic table alone takes. Prints the figures; the bound it
//! checks is generous, to catch a leak per topic, not to time anything.
//!
//! `#[ignore]`: it measures the whole process, so it runs alone, by hand:
//! `cargo test -p basalt-broker --release --test topic_memory -- --ignored --nocapture`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use basalt_broker::BrokerConfig;
use basalt_broker::metadata::topics::TopicConfigManager;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::SendMessageRequestHeader;
use basalt_remoting::{RemotingClient, RemotingClientConfig, RemotingCommand};

/// Counts live heap bytes and blocks.
struct Counting;

static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE_BLOCKS: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are plain atomics and never affect the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(l.size() as i64, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's layout contract is passed on as it is.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE_BYTES.fetch_sub(l.size() as i64, Ordering::Relaxed);
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: `p` came from `alloc`/`realloc` above, with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(new as i64 - l.size() as i64, Ordering::Relaxed);
        // SAFETY: as for `dealloc`; `new` is the caller's new size.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> (i64, i64) {
    (
        LIVE_BYTES.load(Ordering::Relaxed),
        LIVE_BLOCKS.load(Ordering::Relaxed),
    )
}

const TOPICS: usize = 4000;

fn config(dir: &std::path::Path) -> BrokerConfig {
    BrokerConfig {
        store_path_root_dir: dir.to_path_buf(),
        listen_addr: "127.0.0.1".parse().unwrap(),
        listen_port: 0,
        mapped_file_size_commit_log: 64 * 1024 * 1024,
        disk_space_warning_level_ratio: 100,
        disk_space_clean_forcibly_ratio: 100,
        max_topic_count: TOPICS + 100,
        ..Default::default()
    }
}

fn send(topic: &str, queue_id: i32) -> RemotingCommand {
    let h = SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 8,
        queue_id,
        born_timestamp: 1_700_000_000_000,
        ..Default::default()
    };
    RemotingCommand::request(request::SEND_MESSAGE_V2)
        .with_ext(h.to_ext_v2())
        .with_body(vec![b'x'; 100])
}

fn per_topic(label: &str, before: (i64, i64), after: (i64, i64)) -> f64 {
    let bytes = (after.0 - before.0) as f64 / TOPICS as f64;
    let blocks = (after.1 - before.1) as f64 / TOPICS as f64;
    println!("{label}: {bytes:.0} B and {blocks:.1} heap blocks per topic");
    bytes
}

#[test]
#[ignore = "measures the whole process's heap; run alone by hand (see the module docs)"]
fn heap_per_created_topic() {
    // The topic table alone.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let table = TopicConfigManager::load(dir.path(), &cfg).unwrap();
    let before = live();
    for i in 0..TOPICS {
        table
            .create_on_send(&format!("topic-{i:06}"), "TBW102", 8, true)
            .unwrap();
    }
    let table_bytes = per_topic("topic table", before, live());
    table.persist_and_stop();
    drop(table);

    // The store alone: one message to one queue of each topic.
    let dir = tempfile::tempdir().unwrap();
    let store =
        basalt_store::MessageStore::open(basalt_store::StoreConfig::for_tests(dir.path())).unwrap();
    let host = store.store_host();
    let put = |topic: &str, q: i32| {
        let draft = basalt_common::record::RecordDraft {
            topic,
            queue_id: q,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &[b'x'; 100],
            properties: b"",
        };
        assert!(store.put_message(&draft).is_ok());
    };
    put("warm-up", 0);
    assert!(store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10)));
    let before = live();
    for i in 0..TOPICS {
        put(&format!("topic-{i:06}"), (i % 8) as i32);
    }
    assert!(store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(30)));
    let store_bytes = per_topic("store (ConsumeQueue, queue offsets)", before, live());
    store.shutdown();
    drop(store);

    // A whole broker, topics created by sends.
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let total = rt.block_on(async {
        let broker = basalt_broker::start(config(dir.path())).await.unwrap();
        let addr = broker.broker().broker_addr();
        let client = RemotingClient::new(RemotingClientConfig::default());
        // One send first: connections and first-use buffers are not per topic.
        let r = client
            .invoke(&addr, send("warm-up", 0), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let before = live();
        for i in 0..TOPICS {
            let r = client
                .invoke(
                    &addr,
                    send(&format!("topic-{i:06}"), (i % 8) as i32),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        }
        // Let dispatch create the queues and the writers settle.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let bytes = per_topic("whole broker", before, live());
        broker.shutdown().await;
        bytes
    });
    println!(
        "rest of the broker (stats, clients, ...): {:.0} B per topic",
        total - table_bytes - store_bytes
    );
    assert!(total < 64.0 * 1024.0, "{total} B per topic");
}
