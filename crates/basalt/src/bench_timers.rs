//! `basalt bench timers`: sends many timer messages (`TIMER_DELIVER_MS`)
//! due evenly over a window, consumes them, and reports delivery lateness —
//! as the broker stored each copy, and as the consumer received it — and
//! how many arrived early, twice or not at all.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use basalt_client::{
    ClientConfig, ConsumeStatus, Message, Producer, PushConsumeFrom, PushConsumer, PushOptions,
};
use basalt_common::time::now_millis;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use crate::cli::BenchTimersArgs;
use crate::histogram::{Histogram, fmt_micros};

/// What the consumer saw: lateness as stored and as received, in µs.
#[derive(Default)]
struct Arrivals {
    stored: Histogram,
    received: Histogram,
    /// Stored before their time.
    early: u64,
    /// Message numbers seen (to count duplicates).
    seen: HashSet<u64>,
    duplicates: u64,
}

type SharedArrivals = Arc<parking_lot::Mutex<Arrivals>>;

pub async fn timers(a: BenchTimersArgs) -> Result<ExitCode, String> {
    let arrivals: SharedArrivals = Arc::default();
    let producer = Producer::new(a.group.clone(), client_config(&a));
    producer
        .start()
        .await
        .map_err(|e| format!("producer: {e}"))?;
    // Create the topic (and its route) before the consumer subscribes; the
    // probe has no number and is not counted.
    producer
        .send(&Message::new(a.topic.clone(), Bytes::from_static(b"probe")))
        .await
        .map_err(|e| format!("first send failed: {e}"))?;
    let consumer = start_consumer(&a, Arc::clone(&arrivals)).await?;
    let first_due = now_millis() + a.start_secs as i64 * 1000;
    let spread_ms = a.spread_secs as i64 * 1000;
    let sent_ok = send_all(&a, &producer, first_due, spread_ms).await?;
    producer.shutdown().await;
    println!(
        "sent {sent_ok} of {} timers, due from {first_due} over {} s",
        a.count, a.spread_secs
    );

    // Wait for everything (or until well after the last is due).
    let deadline = first_due + spread_ms + a.grace_secs as i64 * 1000;
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    loop {
        tick.tick().await;
        let got = arrivals.lock().seen.len() as u64;
        println!(
            "{:>8} s  received {got} of {sent_ok}",
            (now_millis() - first_due) / 1000
        );
        if got >= sent_ok || now_millis() > deadline {
            break;
        }
    }
    consumer.shutdown().await;
    let r = arrivals.lock();
    println!(
        "received {} distinct, {} duplicates, {} early, {} missing",
        r.seen.len(),
        r.duplicates,
        r.early,
        sent_ok.saturating_sub(r.seen.len() as u64)
    );
    for (what, h) in [
        ("lateness as stored", &r.stored),
        ("lateness as received", &r.received),
    ] {
        println!(
            "{what}: p50 {} p99 {} p99.9 {} max {}",
            fmt_micros(h.quantile(0.50) as f64),
            fmt_micros(h.quantile(0.99) as f64),
            fmt_micros(h.quantile(0.999) as f64),
            fmt_micros(h.max() as f64),
        );
    }
    let ok = r.duplicates == 0 && r.early == 0 && r.seen.len() as u64 == sent_ok;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn client_config(a: &BenchTimersArgs) -> ClientConfig {
    let mut c = ClientConfig::new(a.namesrv.clone());
    c.poll_name_server_interval = Duration::from_secs(1);
    c
}

async fn start_consumer(a: &BenchTimersArgs, out: SharedArrivals) -> Result<PushConsumer, String> {
    let opts = PushOptions {
        consume_from_where: PushConsumeFrom::FirstOffset,
        consume_message_batch_max_size: 32,
        ..Default::default()
    };
    let group = format!("{}-consumer", a.group);
    let consumer = PushConsumer::with_options(group, client_config(a), opts);
    consumer
        .subscribe(&a.topic, "*")
        .map_err(|e| e.to_string())?;
    consumer.register_listener(move |msgs, _ctx| {
        let now = now_millis();
        let mut r = out.lock();
        for m in msgs {
            let (Some(due), Some(n)) = (
                m.property("TIMER_DELIVER_MS")
                    .and_then(|v| v.parse::<i64>().ok()),
                m.property("BENCH_TIMER_NO")
                    .and_then(|v| v.parse::<u64>().ok()),
            ) else {
                continue;
            };
            if !r.seen.insert(n) {
                r.duplicates += 1;
                continue;
            }
            if m.store_timestamp < due {
                r.early += 1;
            }
            r.stored
                .record((m.store_timestamp - due).max(0) as u64 * 1000);
            r.received.record((now - due).max(0) as u64 * 1000);
        }
        ConsumeStatus::Success
    });
    consumer
        .start()
        .await
        .map_err(|e| format!("consumer: {e}"))?;
    Ok(consumer)
}

/// Sends message `i` due at `first_due + i × spread / count`; returns how
/// many were acknowledged.
async fn send_all(
    a: &BenchTimersArgs,
    producer: &Producer,
    first_due: i64,
    spread_ms: i64,
) -> Result<u64, String> {
    let body = Bytes::from(vec![b'x'; a.size]);
    let count = a.count;
    let next = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let started = now_millis();
    let mut workers = Vec::new();
    for _ in 0..a.threads.max(1) {
        let (producer, body, next, ok) = (
            producer.clone(),
            body.clone(),
            Arc::clone(&next),
            Arc::clone(&ok),
        );
        let (topic, window) = (a.topic.clone(), a.window.max(1));
        workers.push(tokio::spawn(async move {
            let mut inflight = FuturesUnordered::new();
            loop {
                while inflight.len() < window {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let due = first_due + (i as i128 * spread_ms as i128 / count as i128) as i64;
                    let m = Message::new(topic.clone(), body.clone())
                        .with_property("TIMER_DELIVER_MS", due.to_string())
                        .with_property("BENCH_TIMER_NO", i.to_string());
                    let producer = producer.clone();
                    inflight.push(async move { producer.send(&m).await.is_ok() });
                }
                match inflight.next().await {
                    Some(true) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(false) => {}
                    None => break,
                }
            }
        }));
    }
    for w in workers {
        w.await.map_err(|e| e.to_string())?;
    }
    let secs = (now_millis() - started) as f64 / 1000.0;
    let n = ok.load(Ordering::Relaxed);
    println!(
        "sending took {secs:.1} s ({:.0} msg/s)",
        n as f64 / secs.max(0.001)
    );
    Ok(n)
}
