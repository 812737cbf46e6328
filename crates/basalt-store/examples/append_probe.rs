use basalt_common::record::RecordDraft;
use basalt_store::{MessageStore, StoreConfig};
use std::time::Instant;
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.message_index_enable = std::env::args().nth(1).as_deref() != Some("noindex");
    let store = MessageStore::open(cfg).unwrap();
    let body = vec![b'x'; 1024];
    let props = b"TAGS\x01TagA\x02KEYS\x01k1\x02".to_vec();
    let n = 500_000;
    let t = Instant::now();
    for i in 0..n {
        let d = RecordDraft {
            topic: "BenchTopic",
            queue_id: (i % 8),
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
        store.put_message(&d);
        if i % 100_000 == 99_999 {
            eprintln!("{} puts: {:?} per put", i + 1, t.elapsed() / (i as u32 + 1));
        }
    }
    let e = t.elapsed();
    eprintln!(
        "{n} puts in {e:?}: {:.0} msg/s, {:.0} MB/s",
        n as f64 / e.as_secs_f64(),
        n as f64 * 1150.0 / e.as_secs_f64() / 1e6
    );
    store.shutdown();
}
