use basalt_common::record::RecordDraft;
use basalt_store::{MessageStore, StoreConfig};
use std::time::{Duration, Instant};
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.warm_mapped_file = std::env::args().any(|a| a == "warm");
    let store = MessageStore::open(cfg).unwrap();
    let body = vec![b'x'; 1024];
    let props = b"TAGS\x01TagA\x02KEYS\x01k1\x02".to_vec();
    let n = 1_500_000;
    let t = Instant::now();
    let mut slow = 0;
    let mut max = Duration::ZERO;
    let mut buckets = [0u64; 6];
    for i in 0..n {
        let d = RecordDraft {
            topic: "BenchTopic",
            queue_id: i % 8,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &body,
            properties: &props,
        };
        let s = Instant::now();
        store.put_message(&d);
        let e = s.elapsed();
        if e > max {
            max = e;
        }
        let us = e.as_micros();
        let b = if us < 10 {
            0
        } else if us < 100 {
            1
        } else if us < 1000 {
            2
        } else if us < 10_000 {
            3
        } else if us < 100_000 {
            4
        } else {
            5
        };
        buckets[b] += 1;
        if e > Duration::from_millis(1) {
            slow += 1;
        }
    }
    let e = t.elapsed();
    eprintln!(
        "{n} puts in {e:?}: {:.0} msg/s, max {max:?}, >1ms {slow}, buckets <10us,<100us,<1ms,<10ms,<100ms,more: {buckets:?}",
        n as f64 / e.as_secs_f64()
    );
    store.shutdown();
}
