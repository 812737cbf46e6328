//! Store benchmarks (criterion). Figures and the machine go to
//! docs/benchmarks.md; nothing here asserts a timing.
//!
//! * `append_async/raw_mmap_1k` vs `append_async/commitlog_1k`: appending 1 KiB
//!   messages under ASYNC_FLUSH against plain 1 KiB memcpys into a fresh
//!   memory-mapped file (the disk's mmap write bandwidth), same run.
//! * `sync_flush/fsync_per_message_1k` vs `sync_flush/group_commit_64_writers_1k`:
//!   one write+fdatasync per message against 64 writers sharing group commits.
//! * `recovery/abnormal_scan_crc`: abnormal recovery (CRC-checked scan and
//!   re-dispatch into fresh ConsumeQueues) of ~512 MiB of 1 KiB messages.
//!
//! Run: `cargo bench -p basalt-store --bench store` (set BASALT_BENCH_DIR to
//! put the data on another disk).

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use basalt_common::config::FlushDiskType;
use basalt_common::properties::Properties;
use basalt_common::record::RecordDraft;
use basalt_store::{MessageStore, PutMessageStatus, StoreConfig};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const BODY: usize = 1024;

fn bench_dir() -> tempfile::TempDir {
    match std::env::var("BASALT_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    }
}

fn props() -> Vec<u8> {
    let mut p = Properties::new();
    p.set("TAGS", "TagA");
    p.set("KEYS", "order-1");
    p.set("UNIQ_KEY", "7F0000011B3C18B4AAC2000000000000");
    p.encode()
}

fn draft<'a>(body: &'a [u8], props: &'a [u8], queue_id: i32) -> RecordDraft<'a> {
    RecordDraft {
        topic: "BenchTopic",
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:50000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: props,
    }
}

/// Bytes appended per measured iteration of the append benches: enough to
/// roll files and to keep writeback busy, so the figure is sustained disk
/// bandwidth rather than page-cache speed.
const APPEND_CHUNK: usize = 256 << 20;

fn append_async(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_async");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let body = vec![b'x'; BODY];
    let props = props();
    let record_len = {
        let mut v = Vec::new();
        draft(&body, &props, 0)
            .encode_with_crc_trailer(&mut v)
            .unwrap()
    };
    let per_iter = APPEND_CHUNK / record_len;
    g.throughput(Throughput::Bytes((per_iter * record_len) as u64));

    // The disk's mmap write bandwidth: record-sized memcpys into fresh 1 GiB
    // mapped files (page faults included), msync'd at the end of each
    // iteration, as an async flush would eventually do.
    let raw_dir = bench_dir();
    let file_size = 1usize << 30;
    let chunk = vec![7u8; record_len];
    let mut maps: Vec<memmap2::MmapMut> = Vec::new();
    let mut pos = file_size;
    g.bench_function("raw_mmap_1k", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let mut touched = Vec::new();
                for _ in 0..per_iter {
                    if pos + record_len > file_size {
                        let p = raw_dir.path().join(format!("{:020}", maps.len()));
                        let f = std::fs::OpenOptions::new()
                            .read(true)
                            .write(true)
                            .create(true)
                            .truncate(true)
                            .open(&p)
                            .unwrap();
                        f.set_len(file_size as u64).unwrap();
                        // SAFETY: a fresh file this bench owns.
                        maps.push(unsafe { memmap2::MmapMut::map_mut(&f).unwrap() });
                        pos = 0;
                    }
                    let i = maps.len() - 1;
                    if touched.last() != Some(&i) {
                        touched.push(i);
                    }
                    maps[i][pos..pos + record_len].copy_from_slice(&chunk);
                    pos += record_len;
                }
                for i in touched {
                    maps[i].flush().unwrap();
                }
            }
            start.elapsed()
        })
    });
    drop(maps);
    drop(raw_dir);

    // The store: ASYNC_FLUSH appends (flush and dispatch services running),
    // then everything fsynced at the end of each iteration.
    let dir = bench_dir();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.flush_disk_type = FlushDiskType::AsyncFlush;
    cfg.warm_mapped_file = std::env::var("BASALT_BENCH_WARM").is_ok();
    let store = MessageStore::open(cfg).unwrap();
    g.bench_function("commitlog_1k", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                for i in 0..per_iter {
                    let r = store.put_message(&draft(&body, &props, (i % 8) as i32));
                    assert_eq!(r.status, PutMessageStatus::PutOk);
                }
                store.flush_commit_log().unwrap();
            }
            start.elapsed()
        })
    });
    g.finish();
    store.shutdown();
}

fn sync_flush(c: &mut Criterion) {
    let mut g = c.benchmark_group("sync_flush");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(1));
    let body = vec![b'x'; BODY];
    let props = props();

    // Baseline: every message is its own write + fdatasync.
    g.bench_function("fsync_per_message_1k", |b| {
        b.iter_custom(|iters| {
            let dir = bench_dir();
            let p: PathBuf = dir.path().join("log");
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&p)
                .unwrap();
            let start = Instant::now();
            for _ in 0..iters {
                f.write_all(&body).unwrap();
                f.sync_data().unwrap();
            }
            start.elapsed()
        })
    });

    // 64 writers as the broker has them: tasks on a 2-worker tokio runtime,
    // each appending and awaiting the fsync that covers its message.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = bench_dir();
    let mut cfg = StoreConfig::new(dir.path());
    cfg.flush_disk_type = FlushDiskType::SyncFlush;
    if std::env::var("BASALT_BENCH_WARM").is_ok() {
        // Pre-written files: an fsync then writes data only, no block
        // allocation (no journal commit).
        cfg.warm_mapped_file = true;
        cfg.commit_log_file_size = 128 << 20;
    }
    let store = MessageStore::open(cfg).unwrap();
    // Let the allocator prepare (and warm) the first file.
    std::thread::sleep(Duration::from_secs(1));
    g.bench_function("group_commit_64_writers_1k", |b| {
        b.iter_custom(|iters| {
            let writers = 64u64;
            let per = iters.div_ceil(writers);
            let start = Instant::now();
            rt.block_on(async {
                let mut tasks = Vec::new();
                for w in 0..writers {
                    let store = store.clone();
                    let (body, props) = (body.clone(), props.clone());
                    tasks.push(tokio::spawn(async move {
                        for _ in 0..per {
                            let r = store
                                .put_message_durable(&draft(&body, &props, (w % 8) as i32), true)
                                .await;
                            assert_eq!(r.status, PutMessageStatus::PutOk);
                        }
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
            });
            // Scale to exactly `iters` messages.
            start
                .elapsed()
                .mul_f64(iters as f64 / (per * writers) as f64)
        })
    });
    g.finish();
    store.shutdown();
}

fn recovery(c: &mut Criterion) {
    let mut g = c.benchmark_group("recovery");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let dir = bench_dir();
    let body = vec![b'x'; BODY];
    let props = props();
    let target: u64 = std::env::var("BASALT_BENCH_RECOVERY_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
        << 20;
    let bytes = {
        let store = MessageStore::open(StoreConfig::new(dir.path())).unwrap();
        let mut i = 0u64;
        while store.commit_log().max_offset() < target as i64 {
            store.put_message(&draft(&body, &props, (i % 16) as i32));
            i += 1;
        }
        let n = store.commit_log().max_offset();
        store.shutdown();
        n as u64
    };
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("abnormal_scan_crc", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // As after a crash, with the ConsumeQueues and index lost:
                // everything is scanned, checked and re-dispatched.
                let _ = std::fs::remove_dir_all(dir.path().join("consumequeue"));
                let _ = std::fs::remove_dir_all(dir.path().join("index"));
                let _ = std::fs::remove_file(dir.path().join("checkpoint"));
                std::fs::File::create(dir.path().join("abort"))
                    .unwrap()
                    .write_all(b"1")
                    .unwrap();
                let start = Instant::now();
                let store = MessageStore::open(StoreConfig::new(dir.path())).unwrap();
                total += start.elapsed();
                assert!(store.recovery_report().abnormal);
                assert_eq!(
                    store.recovery_report().scan_from,
                    0,
                    "no checkpoint: scan from the start"
                );
                store.shutdown();
            }
            total
        })
    });
    g.finish();
}

criterion_group!(benches, append_async, sync_flush, recovery);
criterion_main!(benches);
