use basalt_common::config::FlushDiskType;
use basalt_common::record::RecordDraft;
use basalt_store::{MessageStore, PutMessageStatus, StoreConfig};
use std::time::{Duration, Instant};
fn main() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    cfg.warm_mapped_file = std::env::args().any(|a| a == "warm");
    cfg.commit_log_file_size = 128 << 20;
    let store = MessageStore::open(cfg).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let body = vec![b'x'; 1024];
    let props = b"TAGS\x01TagA\x02KEYS\x01k1\x02".to_vec();
    let t = Instant::now();
    let n = rt.block_on(async {
        let mut tasks = Vec::new();
        for w in 0..64 {
            let store = store.clone();
            let body = body.clone();
            let props = props.clone();
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                let end = Instant::now() + Duration::from_secs(4);
                while Instant::now() < end {
                    let d = RecordDraft {
                        topic: "S",
                        queue_id: w % 8,
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
                    let r = store.put_message_durable(&d, true).await;
                    assert_eq!(r.status, PutMessageStatus::PutOk);
                    n += 1;
                }
                n
            }));
        }
        let mut n = 0;
        for t in tasks {
            n += t.await.unwrap();
        }
        n
    });
    let e = t.elapsed();
    eprintln!(
        "{n} durable puts in {e:?}: {:.0}/s",
        n as f64 / e.as_secs_f64()
    );
    store.shutdown();
}
