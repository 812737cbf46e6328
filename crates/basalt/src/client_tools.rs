//! `basalt produce` and `basalt consume`: operator tools on top of
//! basalt-client (`basalt admin` is in `admin_cli`).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use basalt_client::{
    ClientConfig, ConsumeStatus, Message, MessageExt, Producer, PullConsumer, PullStatus,
    PushConsumeFrom, PushConsumer, PushOptions, TopicQueue,
};
use bytes::Bytes;

use crate::cli::{ConsumeArgs, ProduceArgs};
use crate::progress::{self, ProgressLine};

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

pub fn produce(a: ProduceArgs) -> Result<ExitCode, String> {
    runtime()?.block_on(async move {
        let producer = Producer::new(a.group.clone(), ClientConfig::new(a.namesrv.clone()));
        producer
            .start()
            .await
            .map_err(|e| format!("producer: {e}"))?;
        let make = |body: Bytes, i: u64| {
            let mut m = Message::new(a.topic.clone(), body);
            if let Some(t) = &a.tags {
                m = m.with_tags(t.clone());
            }
            if let Some(k) = &a.keys {
                m = m.with_key(k.replace("{i}", &i.to_string()));
            }
            for p in &a.property {
                if let Some((k, v)) = p.split_once('=') {
                    m = m.with_property(k, v);
                }
            }
            if a.delay_level > 0 {
                m = m.with_delay_level(a.delay_level);
            }
            m
        };
        let started = std::time::Instant::now();
        let mut sent = 0u64;
        let mut failed = 0u64;
        // Stored by the broker but not (yet) flushed or replicated as its
        // flushDiskType / brokerRole promise: FLUSH_DISK_TIMEOUT,
        // FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE.
        let mut not_ok = 0u64;
        let mut report = |r: Result<basalt_client::SendResult, basalt_client::ClientError>,
                          verbose: bool| match r {
            Ok(r) => {
                sent += 1;
                if r.status != basalt_client::SendStatus::SendOk {
                    not_ok += 1;
                }
                if verbose {
                    println!(
                        "{} msgId={} queue={}:{} offset={}",
                        r.status.name(),
                        r.msg_id,
                        r.queue.broker_name,
                        r.queue.queue_id,
                        r.queue_offset
                    );
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("send failed: {e}");
            }
        };
        if a.stdin {
            let lines: Vec<String> = std::io::stdin()
                .lock()
                .lines()
                .map_while(Result::ok)
                .collect();
            for (i, l) in lines.into_iter().enumerate() {
                let r = producer
                    .send(&make(Bytes::from(l.into_bytes()), i as u64))
                    .await;
                report(r, !a.json);
            }
        } else {
            let verbose = a.count <= 20 && !a.json;
            let shown = progress::wanted(a.json, verbose);
            let mut line = ProgressLine::new(shown, "sent", a.count);
            for i in 0..a.count {
                let body = if let Some(b) = &a.body {
                    Bytes::from(b.clone().into_bytes())
                } else {
                    let mut b = format!("message {i} ").into_bytes();
                    b.resize(a.size.max(b.len()), b'x');
                    Bytes::from(b)
                };
                let r = producer.send(&make(body, i)).await;
                report(r, verbose);
                line.update(i + 1);
            }
            line.finish(a.count);
        }
        print_sent(a.json, started.elapsed(), sent, failed, not_ok);
        producer.shutdown().await;
        Ok(if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    })
}

/// The summary of `basalt produce`: text, or one JSON object.
fn print_sent(json: bool, elapsed: Duration, sent: u64, failed: u64, not_ok: u64) {
    if json {
        let secs = elapsed.as_secs_f64();
        let summary = serde_json::json!({
            "sent": sent,
            "failed": failed,
            "not_send_ok": not_ok,
            "elapsed_ms": elapsed.as_millis() as u64,
            "msgs_per_sec": if secs > 0.0 { sent as f64 / secs } else { 0.0 },
        });
        println!("{summary}");
    } else if not_ok > 0 {
        println!("sent {sent} ({not_ok} of them not SEND_OK), failed {failed}");
    } else {
        println!("sent {sent}, failed {failed}");
    }
}

fn print_message(m: &MessageExt, body: bool) {
    let text = String::from_utf8_lossy(&m.body);
    let shown: String = text.chars().take(200).collect();
    print!(
        "{}:{} offset={} msgId={} tags={} keys={} size={}",
        m.broker_name,
        m.queue_id,
        m.queue_offset,
        m.msg_id,
        m.tags.as_deref().unwrap_or("-"),
        if m.keys.is_empty() {
            "-".to_string()
        } else {
            m.keys.join(" ")
        },
        m.body.len()
    );
    if body {
        print!(" body={shown:?}");
    }
    println!();
}

pub fn consume(a: ConsumeArgs) -> Result<ExitCode, String> {
    runtime()?.block_on(async move {
        if let Some(q) = a.queue {
            return consume_pull(&a, q).await;
        }
        let from = match a.from.as_str() {
            "first" => PushConsumeFrom::FirstOffset,
            "last" => PushConsumeFrom::LastOffset,
            other => return Err(format!("--from {other:?}: expected first or last")),
        };
        let opts = PushOptions {
            consume_from_where: from,
            // One listener call at a time: messages of a queue are printed
            // in queue order, so what is left unprinted is a suffix of each
            // queue and one offset per queue says where to go on.
            consume_thread_max: 1,
            consume_message_batch_max_size: 32,
            ..Default::default()
        };
        let consumer =
            PushConsumer::with_options(a.group.clone(), ClientConfig::new(a.namesrv.clone()), opts);
        consumer
            .subscribe(&a.topic, a.tags.as_deref().unwrap_or("*"))
            .map_err(|e| e.to_string())?;
        let tally = Arc::new(Tally::default());
        let done = Arc::new(tokio::sync::Notify::new());
        {
            let tally = Arc::clone(&tally);
            let done = Arc::clone(&done);
            let (quiet, want, body) = (a.quiet || a.json, a.count, !a.no_body);
            consumer.register_listener(move |msgs, ctx| {
                let take = tally.claim(want, msgs.len());
                for m in &msgs[..take] {
                    if !quiet {
                        print_message(m, body);
                    }
                }
                if let Some(first_left) = msgs.get(take) {
                    tally.leave(&ctx.queue, first_left.queue_offset);
                }
                if want > 0 && tally.printed.load(Ordering::Relaxed) >= want {
                    done.notify_one();
                }
                ConsumeStatus::Success
            });
        }
        consumer
            .start()
            .await
            .map_err(|e| format!("consumer: {e}"))?;
        let started = std::time::Instant::now();
        wait_consumed(&a, &tally.printed, &done).await;
        consumer.shutdown().await;
        commit_unprinted(&a, &tally).await?;
        let n = tally.printed.load(Ordering::Relaxed);
        if a.json {
            let summary = serde_json::json!({
                "consumed": n,
                "elapsed_ms": started.elapsed().as_millis() as u64,
            });
            println!("{summary}");
        } else {
            println!("consumed {n}");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// What the push listener of `consume` printed, and where it stopped.
#[derive(Default)]
struct Tally {
    /// Messages printed (never more than `-n`).
    printed: AtomicU64,
    /// Per queue, the first offset delivered but not printed (the count
    /// was reached). The listener acknowledges these messages, so the
    /// consumer commits past them; `commit_unprinted` moves the group's
    /// offset back to here after the consumer stops.
    left: parking_lot::Mutex<BTreeMap<TopicQueue, i64>>,
}

impl Tally {
    /// Takes up to `n` of the remaining slots of `want` (all of them when
    /// `want` is 0) and says how many were taken.
    fn claim(&self, want: u64, n: usize) -> usize {
        let mut took = 0;
        let _ = self
            .printed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |have| {
                took = if want == 0 {
                    n
                } else {
                    want.saturating_sub(have).min(n as u64) as usize
                };
                Some(have + took as u64)
            });
        took
    }

    /// Records that `queue` was left unprinted from `offset` on.
    fn leave(&self, queue: &TopicQueue, offset: i64) {
        let mut left = self.left.lock();
        let at = left.entry(queue.clone()).or_insert(offset);
        *at = (*at).min(offset);
    }
}

/// Commits, for every queue where `consume -n` stopped before the end of
/// what it was handed, the offset of the first message it did not print,
/// so that the group's next run starts there.
async fn commit_unprinted(a: &ConsumeArgs, tally: &Tally) -> Result<(), String> {
    let left = std::mem::take(&mut *tally.left.lock());
    if left.is_empty() {
        return Ok(());
    }
    let committer = PullConsumer::new(a.group.clone(), ClientConfig::new(a.namesrv.clone()));
    committer
        .start()
        .await
        .map_err(|e| format!("offset commit: {e}"))?;
    let mut result = Ok(());
    for (mq, offset) in &left {
        if let Err(e) = committer.update_offset(mq, *offset).await {
            result = Err(format!(
                "could not commit offset {offset} of {}/{}/{}: {e}; the next run may print \
                 messages after it again",
                mq.topic, mq.broker_name, mq.queue_id
            ));
            break;
        }
    }
    committer.shutdown().await;
    result
}

/// Waits for the count, the timeout or Ctrl-C, drawing the progress line
/// (see [`progress`]) while it waits.
async fn wait_consumed(a: &ConsumeArgs, count: &AtomicU64, done: &tokio::sync::Notify) {
    let shown = progress::wanted(a.json, !a.quiet);
    let mut line = ProgressLine::new(shown, "consumed", a.count);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let wait = async {
        match a.timeout {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(wait);
    loop {
        tokio::select! {
            _ = done.notified() => break,
            _ = &mut wait => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = tick.tick(), if shown => line.update(count.load(Ordering::Relaxed)),
        }
    }
    line.finish(count.load(Ordering::Relaxed));
}

async fn consume_pull(a: &ConsumeArgs, queue: i32) -> Result<ExitCode, String> {
    let consumer = PullConsumer::new(a.group.clone(), ClientConfig::new(a.namesrv.clone()));
    consumer
        .start()
        .await
        .map_err(|e| format!("consumer: {e}"))?;
    let queues = consumer
        .fetch_queues(&a.topic)
        .await
        .map_err(|e| e.to_string())?;
    let mq: TopicQueue = queues
        .into_iter()
        .find(|q| q.queue_id == queue && a.broker.as_deref().is_none_or(|b| q.broker_name == b))
        .ok_or_else(|| format!("topic {} has no queue {queue}", a.topic))?;
    let mut offset = match a.offset {
        Some(o) => o,
        None if a.from == "last" => consumer.max_offset(&mq).await.map_err(|e| e.to_string())?,
        None => consumer.min_offset(&mq).await.map_err(|e| e.to_string())?,
    };
    let mut got = 0u64;
    let quiet = a.quiet || a.json;
    let mut line = ProgressLine::new(progress::wanted(a.json, !quiet), "consumed", a.count);
    let expr = a.tags.clone().unwrap_or_else(|| "*".into());
    while a.count == 0 || got < a.count {
        let r = consumer
            .pull(&mq, &expr, offset, 32, Duration::from_secs(10))
            .await
            .map_err(|e| e.to_string())?;
        match r.status {
            PullStatus::Found => {
                let room = match a.count {
                    0 => r.msgs.len(),
                    n => (n - got).min(r.msgs.len() as u64) as usize,
                };
                for m in &r.msgs[..room] {
                    if !quiet {
                        print_message(m, !a.no_body);
                    }
                    got += 1;
                }
                line.update(got);
                if let Some(first_left) = r.msgs.get(room) {
                    // Stopped at the count: the next run starts here.
                    offset = first_left.queue_offset;
                    break;
                }
            }
            PullStatus::NoNewMsg => break,
            _ => {}
        }
        if r.next_begin_offset == offset {
            break;
        }
        offset = r.next_begin_offset;
    }
    line.finish(got);
    if a.json {
        let summary = serde_json::json!({ "consumed": got, "next_offset": offset });
        println!("{summary}");
    } else {
        println!("consumed {got}, next offset {offset}");
    }
    consumer.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
