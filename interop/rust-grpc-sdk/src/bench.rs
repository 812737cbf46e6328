//! Load generation on the Rust SDK for scripts/bench-grpc.sh, beside the
//! Java SDK's basalt.grpc.Bench:
//!
//!   rustgrpcsdk --endpoint E bench-send TOPIC WINDOW WARMUP_S DURATION_S
//!   rustgrpcsdk --endpoint E bench-consume TOPIC GROUP COUNT
//!
//! bench-send keeps WINDOW `Producer::send` futures in flight (1 KiB
//! bodies) for WARMUP_S seconds, then DURATION_S seconds counted; latency is
//! call to receipt. bench-consume receives batches of 32 (invisible 60 s),
//! one receive at a time, and acks each batch's messages concurrently
//! before the next receive, until COUNT distinct messages came. The last line is one JSON
//! object, as the Java harness prints (client CPU from /proc/self/stat
//! over the counted interval).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use rocketmq::model::common::{FilterExpression, FilterType};
use rocketmq::model::message::MessageBuilder;

use crate::Target;

/// This process's user + system CPU seconds (/proc/self/stat).
fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn quantiles(mut v: Vec<u64>) -> String {
    v.sort_unstable();
    let q = |p: f64| {
        if v.is_empty() {
            0
        } else {
            v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
        }
    };
    format!("{{\"p50\":{},\"p99\":{},\"p999\":{}}}", q(0.5), q(0.99), q(0.999))
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize) -> Result<T, String> {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("bench: argument {i} missing or bad: {args:?}"))
}

pub async fn send(target: &Target, args: &[String]) -> Result<(), String> {
    let topic: String = arg(args, 0)?;
    let window: usize = arg(args, 1)?;
    let warmup = Duration::from_secs(arg(args, 2)?);
    let duration = Duration::from_secs(arg(args, 3)?);
    let p = crate::producer(target, &topic, None).await?;
    let body = vec![b'x'; 1024];
    let message = || {
        MessageBuilder::builder()
            .set_topic(topic.clone())
            .set_body(body.clone())
            .build()
            .map_err(|e| e.to_string())
    };
    p.send(message()?).await.map_err(|e| crate::why(&e))?;
    let mut sent: u64 = 1;
    let (mut errors, mut lat) = (0u64, Vec::new());
    let measure_from = Instant::now() + warmup;
    let end = measure_from + duration;
    let mut cpu0 = None;
    let mut inflight = FuturesUnordered::new();
    loop {
        while inflight.len() < window && Instant::now() < end {
            let counted = Instant::now() >= measure_from;
            if counted && cpu0.is_none() {
                cpu0 = Some(cpu_secs());
            }
            let m = message()?;
            let p = &p;
            sent += 1;
            inflight.push(async move {
                let t0 = Instant::now();
                let r = p.send(m).await;
                (r.is_ok(), counted, t0.elapsed())
            });
        }
        match inflight.next().await {
            Some((ok, counted, took)) => {
                if !ok {
                    errors += 1;
                } else if counted {
                    lat.push(took.as_micros() as u64);
                }
            }
            None => break,
        }
    }
    let secs = measure_from.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu0.unwrap_or(0.0);
    let n = lat.len();
    println!(
        "{{\"mode\":\"send\",\"msgs\":{n},\"elapsed_s\":{secs:.3},\"msgs_per_sec\":{:.1},\"latency_us\":{},\
         \"errors\":{errors},\"sent_total\":{sent},\"client_cpu_us_per_msg\":{:.2}}}",
        n as f64 / secs,
        quantiles(lat),
        if n == 0 { 0.0 } else { cpu * 1e6 / n as f64 }
    );
    drop(inflight);
    crate::stop_producer(p).await;
    Ok(())
}

pub async fn consume(target: &Target, args: &[String]) -> Result<(), String> {
    let topic: String = arg(args, 0)?;
    let group: String = arg(args, 1)?;
    let count: usize = arg(args, 2)?;
    let c = crate::consumer(target, &group, &topic).await?;
    let all = FilterExpression::new(FilterType::Tag, "*");
    let (begin, cpu0) = (Instant::now(), cpu_secs());
    let deadline = begin + Duration::from_secs(300);
    let mut ids = HashSet::with_capacity(count);
    let (mut duplicates, mut errors, mut lat) = (0u64, 0u64, Vec::new());
    let mut acks = FuturesUnordered::new();
    while ids.len() < count && Instant::now() < deadline {
        let got = match c.receive_with(&topic, &all, 32, Duration::from_secs(60)).await {
            Ok(got) => got,
            Err(_) => {
                errors += 1;
                continue;
            }
        };
        for m in got {
            if !ids.insert(m.message_id().to_string()) {
                duplicates += 1;
            }
            let c = &c;
            acks.push(async move {
                let t0 = Instant::now();
                (c.ack(&m).await.is_ok(), t0.elapsed())
            });
        }
        // The batch's acks finish before the next receive: an ack future
        // left unpolled while a receive waits can hold the SDK's session
        // lock, and the receive then never ends (seen once: a hang at 0 CPU).
        while let Some(r) = acks.next().await {
            record_ack(Some(r), &mut errors, &mut lat);
        }
    }
    while let Some(r) = acks.next().await {
        record_ack(Some(r), &mut errors, &mut lat);
    }
    let secs = begin.elapsed().as_secs_f64();
    let n = ids.len();
    println!(
        "{{\"mode\":\"consume\",\"msgs\":{n},\"elapsed_s\":{secs:.3},\"msgs_per_sec\":{:.1},\"latency_us\":{},\
         \"errors\":{errors},\"duplicates\":{duplicates},\"client_cpu_us_per_msg\":{:.2}}}",
        n as f64 / secs,
        quantiles(lat),
        if n == 0 { 0.0 } else { (cpu_secs() - cpu0) * 1e6 / n as f64 }
    );
    drop(acks);
    crate::stop_consumer(c).await;
    Ok(())
}

fn record_ack(r: Option<(bool, Duration)>, errors: &mut u64, lat: &mut Vec<u64>) {
    match r {
        Some((true, took)) => lat.push(took.as_micros() as u64),
        Some((false, _)) => *errors += 1,
        None => {}
    }
}
