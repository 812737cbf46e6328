//! `basalt bench produce|consume`, like RocketMQ's benchmark tools: a live
//! line every second (TPS, MB/s, latency average / p50 / p99 / max) and a
//! summary at the end.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use basalt_client::{
    AsyncMessageListener, ClientConfig, ConsumeContext, ConsumeStatus, Message, MessageExt,
    Producer, PushConsumeFrom, PushConsumer, PushOptions,
};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::cli::{BenchCommand, BenchConsumeArgs, BenchProduceArgs};
use crate::histogram::{Histogram, fmt_micros};

/// Interval figures shared by the workers and the reporter: a histogram,
/// bytes and errors, swapped out once a second.
#[derive(Default)]
struct Shared {
    interval: std::sync::Mutex<(Histogram, u64, u64)>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, (Histogram, u64, u64)> {
        self.interval.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, micros: u64, bytes: u64) {
        let mut g = self.lock();
        g.0.record(micros);
        g.1 += bytes;
    }

    /// Records a batch under one lock: (latency µs, bytes) per message.
    fn record_batch(&self, samples: impl Iterator<Item = (u64, u64)>) {
        let mut g = self.lock();
        for (micros, bytes) in samples {
            g.0.record(micros);
            g.1 += bytes;
        }
    }

    fn error(&self) {
        self.lock().2 += 1;
    }

    fn take(&self) -> (Histogram, u64, u64) {
        std::mem::take(&mut *self.lock())
    }
}

pub fn run(cmd: BenchCommand) -> Result<ExitCode, String> {
    // One runtime worker per sending task, at most one per core: a lone
    // sender on two workers had its responses and its next sends handed
    // between threads, which cost ~70 % more client CPU per message at one
    // in flight (docs/benchmarks.md, issue 33).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = match &cmd {
        BenchCommand::Produce(a) => a.threads.clamp(1, cores),
        _ => cores,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    match cmd {
        BenchCommand::Produce(a) => rt.block_on(produce(a)),
        BenchCommand::Consume(a) => rt.block_on(consume(a)),
        BenchCommand::Timers(a) => rt.block_on(crate::bench_timers::timers(a)),
    }
}

fn header(what: &str) {
    println!(
        "{:>5} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}   ({what})",
        "sec", "TPS", "MB/s", "avg", "p50", "p99", "max", "errors"
    );
}

fn line(sec: u64, h: &Histogram, bytes: u64, errors: u64, elapsed: Duration) {
    let s = elapsed.as_secs_f64().max(1e-9);
    println!(
        "{:>5} {:>10.0} {:>9.1} {:>9} {:>9} {:>9} {:>9} {:>7}",
        sec,
        h.count() as f64 / s,
        bytes as f64 / s / 1e6,
        fmt_micros(h.mean()),
        fmt_micros(h.quantile(0.5) as f64),
        fmt_micros(h.quantile(0.99) as f64),
        fmt_micros(h.max() as f64),
        errors
    );
}

fn summary(total: &Histogram, bytes: u64, errors: u64, elapsed: Duration, json: bool) {
    let s = elapsed.as_secs_f64().max(1e-9);
    if json {
        let q = |p: f64| total.quantile(p);
        let v = serde_json::json!({
            "msgs": total.count(),
            "elapsed_s": s,
            "msgs_per_sec": total.count() as f64 / s,
            "mb_per_sec": bytes as f64 / s / 1e6,
            "errors": errors,
            "latency_us": {
                "avg": total.mean(),
                "p50": q(0.5),
                "p99": q(0.99),
                "p999": q(0.999),
                "max": total.max(),
            },
        });
        println!("{v}");
        return;
    }
    println!("---");
    println!(
        "total {} msgs in {:.1} s: {:.0} msg/s, {:.1} MB/s, errors {}",
        total.count(),
        s,
        total.count() as f64 / s,
        bytes as f64 / s / 1e6,
        errors
    );
    println!(
        "latency avg {} p50 {} p99 {} p99.9 {} max {}",
        fmt_micros(total.mean()),
        fmt_micros(total.quantile(0.5) as f64),
        fmt_micros(total.quantile(0.99) as f64),
        fmt_micros(total.quantile(0.999) as f64),
        fmt_micros(total.max() as f64)
    );
}

/// Prints a line per second until `stop`; returns the merged figures.
/// With `quiet` (`--json`) nothing is printed until the summary.
async fn report(
    shared: Arc<Shared>,
    stop: Arc<tokio::sync::Notify>,
    what: &'static str,
    quiet: bool,
) -> (Histogram, u64, u64, Duration) {
    if !quiet {
        header(what);
    }
    let start = Instant::now();
    let mut total = Histogram::new();
    let (mut bytes, mut errors) = (0u64, 0u64);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let mut last = Instant::now();
    let mut sec = 0;
    loop {
        // The run's end cuts the last second short, so the elapsed time
        // (and the rate) is exact rather than rounded up to a tick.
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.notified() => break,
        }
        sec += 1;
        let (h, b, e) = shared.take();
        let now = Instant::now();
        if !quiet {
            line(sec, &h, b, e, now - last);
        }
        last = now;
        total.merge(&h);
        bytes += b;
        errors += e;
    }
    let (h, b, e) = shared.take();
    total.merge(&h);
    (total, bytes + b, errors + e, start.elapsed())
}

async fn produce(a: BenchProduceArgs) -> Result<ExitCode, String> {
    let producer = Producer::new(a.group.clone(), ClientConfig::new(a.namesrv.clone()));
    producer
        .start()
        .await
        .map_err(|e| format!("producer: {e}"))?;
    // Warm the route (and auto-create the topic) before timing.
    let body = Bytes::from(vec![b'x'; a.size]);
    let mut probe = Message::new(a.topic.clone(), body.clone());
    if let Some(t) = &a.tags {
        probe = probe.with_tags(t.clone());
    }
    producer
        .send(&probe)
        .await
        .map_err(|e| format!("first send failed: {e}"))?;

    let shared = Arc::new(Shared::default());
    let stop = Arc::new(tokio::sync::Notify::new());
    let reporter = tokio::spawn(report(
        Arc::clone(&shared),
        Arc::clone(&stop),
        "produce",
        a.json,
    ));
    let deadline = Instant::now() + Duration::from_secs(a.duration);
    let mut workers = Vec::new();
    for _ in 0..a.threads.max(1) {
        let producer = producer.clone();
        let shared = Arc::clone(&shared);
        let body = body.clone();
        let (topic, tags, window, batch) =
            (a.topic.clone(), a.tags.clone(), a.window.max(1), a.batch);
        workers.push(tokio::spawn(async move {
            let mut inflight = FuturesUnordered::new();
            loop {
                while inflight.len() < window && Instant::now() < deadline {
                    let producer = producer.clone();
                    let mut m = Message::new(topic.clone(), body.clone());
                    if let Some(t) = &tags {
                        m = m.with_tags(t.clone());
                    }
                    inflight.push(async move {
                        let t0 = Instant::now();
                        let r = if batch > 1 {
                            let msgs = vec![m; batch];
                            producer.send_batch(&msgs).await.map(|_| batch)
                        } else {
                            producer.send(&m).await.map(|_| 1)
                        };
                        (t0.elapsed(), r)
                    });
                }
                match inflight.next().await {
                    Some((lat, Ok(n))) => {
                        for _ in 0..n {
                            shared.record(lat.as_micros() as u64, body.len() as u64);
                        }
                    }
                    Some((_, Err(_))) => shared.error(),
                    None => break,
                }
            }
        }));
    }
    for w in workers {
        let _ = w.await;
    }
    stop.notify_one();
    let (total, bytes, errors, elapsed) = reporter.await.map_err(|e| e.to_string())?;
    summary(&total, bytes, errors, elapsed, a.json);
    producer.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

async fn consume(a: BenchConsumeArgs) -> Result<ExitCode, String> {
    let opts = PushOptions {
        consume_from_where: if a.from_first {
            PushConsumeFrom::FirstOffset
        } else {
            PushConsumeFrom::LastOffset
        },
        consume_message_batch_max_size: 32,
        ..Default::default()
    };
    let consumer =
        PushConsumer::with_options(a.group.clone(), ClientConfig::new(a.namesrv.clone()), opts);
    consumer
        .subscribe(&a.topic, a.tags.as_deref().unwrap_or("*"))
        .map_err(|e| e.to_string())?;
    let shared = Arc::new(Shared::default());
    let tally = Arc::new(ConsumeTally {
        shared: Arc::clone(&shared),
        count: AtomicU64::new(0),
        done: tokio::sync::Notify::new(),
        want: a.count,
    });
    if a.async_listener {
        consumer.register_async_listener(AsyncTally(Arc::clone(&tally)));
    } else {
        let t = Arc::clone(&tally);
        consumer.register_listener(move |msgs, _ctx| t.take(msgs));
    }
    consumer
        .start()
        .await
        .map_err(|e| format!("consumer: {e}"))?;
    let stop = Arc::new(tokio::sync::Notify::new());
    let reporter = tokio::spawn(report(
        Arc::clone(&shared),
        Arc::clone(&stop),
        "consume; latency = born to consumed",
        a.json,
    ));
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs(a.duration)) => {}
        _ = tally.done.notified() => {}
    }
    stop.notify_one();
    let (total, bytes, errors, elapsed) = reporter.await.map_err(|e| e.to_string())?;
    summary(&total, bytes, errors, elapsed, a.json);
    consumer.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// What the consume bench's listener does with each batch: records its
/// end-to-end latencies and bytes, and says when `want` messages are in.
struct ConsumeTally {
    shared: Arc<Shared>,
    count: AtomicU64,
    done: tokio::sync::Notify,
    want: u64,
}

impl ConsumeTally {
    fn take(&self, msgs: &[MessageExt]) -> ConsumeStatus {
        let now = basalt_common::time::now_millis();
        // End-to-end latency: from the producer's clock to now (ms
        // resolution on both sides).
        self.shared.record_batch(msgs.iter().map(|m| {
            let lat_ms = (now - m.born_timestamp).max(0) as u64;
            (lat_ms * 1000, m.body.len() as u64)
        }));
        let n = self.count.fetch_add(msgs.len() as u64, Ordering::Relaxed) + msgs.len() as u64;
        if self.want > 0 && n >= self.want {
            self.done.notify_one();
        }
        ConsumeStatus::Success
    }
}

/// [`ConsumeTally`] as an async listener (`--async-listener`).
struct AsyncTally(Arc<ConsumeTally>);

impl AsyncMessageListener for AsyncTally {
    fn consume<'a>(
        &'a self,
        msgs: &'a [MessageExt],
        _ctx: &'a mut ConsumeContext,
    ) -> basalt_remoting::transport::BoxFuture<'a, ConsumeStatus> {
        Box::pin(std::future::ready(self.0.take(msgs)))
    }
}
