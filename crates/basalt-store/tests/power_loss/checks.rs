//! The invariants checked after every restart.

use std::collections::BTreeMap;

use basalt_common::record::{RecordHead, RecordView, peek_head};
use basalt_store::{GetMessageRequest, GetMessageStatus, MessageStore};

use super::{Rec, Violation, World};

/// A record found in the recovered log.
struct Found {
    phys: i64,
    rec: Rec,
    queue_offset: i64,
}

impl World {
    pub(super) fn check_after_restart(&mut self) -> Result<(), Violation> {
        let store = std::sync::Arc::clone(self.store());
        let found = walk_log(&store)?;
        let min = store.commit_log().min_offset();
        // Nothing appears that was never written, and what is there is intact.
        for f in &found {
            match self.log.get(&f.phys) {
                Some(r)
                    if r.body == f.rec.body
                        && r.topic == f.rec.topic
                        && r.queue_id == f.rec.queue_id => {}
                Some(_) => {
                    return Err(format!(
                        "record at {} differs from what was written",
                        f.phys
                    ));
                }
                None => return Err(format!("record at {} was never written", f.phys)),
            }
        }
        // Everything acknowledged durable (SYNC_FLUSH) or flushed
        // (ASYNC_FLUSH) is there; only a tail past it may be missing.
        let log_end = found.last().map(|f| f.rec.end).unwrap_or(min);
        for (phys, r) in self.log.range(self.cleaned_below.max(0)..) {
            if r.end <= self.required_end && (*phys < min || *phys >= log_end) {
                return Err(format!(
                    "durable record {phys}..{} is missing (log {min}..{log_end}, durable point {})",
                    r.end, self.required_end
                ));
            }
        }
        check_queues(&store, &found)?;
        check_index(&store, &found)?;
        // What survived is the new truth; recovery made it durable.
        self.log = found.into_iter().map(|f| (f.phys, f.rec)).collect();
        self.required_end = log_end;
        self.cleaned_below = self.cleaned_below.min(min).max(min);
        Ok(())
    }
}

/// Every record of the CommitLog, in order.
fn walk_log(store: &MessageStore) -> Result<Vec<Found>, Violation> {
    let log = store.commit_log();
    let mut out = Vec::new();
    let mut offset = log.min_offset();
    let end = log.max_offset();
    while offset < end {
        let Some(data) = log.read_to_file_end(offset) else {
            return Err(format!("log unreadable at {offset} below its end {end}"));
        };
        let mut at = 0;
        let mut next = None;
        while at < data.len() {
            match peek_head(&data[at..]) {
                Some(RecordHead::Message { total_size }) => {
                    let v = RecordView::parse(&data[at..], true)
                        .map_err(|e| format!("invalid record at {}: {e}", offset + at as i64))?;
                    let phys = offset + at as i64;
                    out.push(Found {
                        phys,
                        rec: Rec {
                            end: phys + total_size as i64,
                            topic: v.topic_str().into_owned(),
                            queue_id: v.queue_id,
                            body: v.body.to_vec(),
                        },
                        queue_offset: v.queue_offset,
                    });
                    at += total_size;
                }
                Some(RecordHead::Blank) => {
                    next = Some(log.roll_next_file(offset + at as i64));
                    break;
                }
                other => {
                    return Err(format!(
                        "unexpected {other:?} inside the log at {}",
                        offset + at as i64
                    ));
                }
            }
        }
        offset = next.unwrap_or(offset + at as i64);
    }
    Ok(out)
}

/// Each queue, read through the ConsumeQueue, is exactly its records of
/// the log, in log order with consecutive queue offsets.
fn check_queues(store: &MessageStore, found: &[Found]) -> Result<(), Violation> {
    let mut by_queue: BTreeMap<(String, i32), Vec<&Found>> = BTreeMap::new();
    for f in found {
        by_queue
            .entry((f.rec.topic.clone(), f.rec.queue_id))
            .or_default()
            .push(f);
    }
    for ((topic, qid), recs) in &by_queue {
        let pulled =
            pull_queue(store, topic, *qid).inspect_err(|_| dump_queue(store, topic, *qid, recs))?;
        let from = recs
            .iter()
            .position(|f| f.queue_offset >= store.min_offset_in_queue(topic, *qid));
        let want: Vec<(i64, &[u8])> = recs[from.unwrap_or(recs.len())..]
            .iter()
            .map(|f| (f.queue_offset, f.rec.body.as_slice()))
            .collect();
        let got: Vec<(i64, &[u8])> = pulled.iter().map(|(o, b)| (*o, b.as_slice())).collect();
        if want != got {
            let first = want.iter().zip(&got).position(|(w, g)| w != g);
            let at = first.unwrap_or(want.len().min(got.len()));
            let phys = recs[from.unwrap_or(recs.len())..].get(at).map(|f| f.phys);
            dump_queue(store, topic, *qid, recs);
            return Err(format!(
                "ConsumeQueue {topic}/{qid} disagrees with the CommitLog: {} units pulled, {} records; \
                 first difference at entry {at} (record at {phys:?}, queue offsets {:?} / {:?})",
                got.len(),
                want.len(),
                want.get(at).map(|w| w.0),
                got.get(at).map(|g| g.0),
            ));
        }
        for w in want.windows(2) {
            if w[1].0 != w[0].0 + 1 {
                return Err(format!(
                    "queue offsets of {topic}/{qid} jump from {} to {}",
                    w[0].0, w[1].0
                ));
            }
        }
    }
    for cq in store.consume_queues().all() {
        let key = (cq.topic().to_string(), cq.queue_id());
        if !by_queue.contains_key(&key) && cq.max_offset() > cq.min_offset() {
            return Err(format!(
                "ConsumeQueue {}/{} has units for no record",
                key.0, key.1
            ));
        }
    }
    Ok(())
}

/// With `BASALT_SIM_DEBUG`, prints a queue's units and its records.
fn dump_queue(store: &MessageStore, topic: &str, qid: i32, recs: &[&Found]) {
    if std::env::var("BASALT_SIM_DEBUG").is_err() {
        return;
    }
    let Some(cq) = store.get_consume_queue(topic, qid) else {
        return;
    };
    let units: Vec<_> = (cq.files().min_offset() / 20..cq.max_offset())
        .map(|o| (o, cq.unit_at(o)))
        .collect();
    eprintln!(
        "queue {topic}/{qid} min {} max {} units {units:?}\nrecords {:?}",
        cq.min_offset(),
        cq.max_offset(),
        recs.iter()
            .map(|f| (f.queue_offset, f.phys))
            .collect::<Vec<_>>()
    );
}

fn pull_queue(
    store: &MessageStore,
    topic: &str,
    queue_id: i32,
) -> Result<Vec<(i64, Vec<u8>)>, Violation> {
    let mut out = Vec::new();
    let mut offset = store.min_offset_in_queue(topic, queue_id);
    for _ in 0..10_000 {
        let req = GetMessageRequest {
            topic,
            queue_id,
            offset,
            max_msgs: 32,
            max_bytes: None,
            correct_offsets: true,
        };
        let r = store.get_message(&req, None);
        match r.status {
            GetMessageStatus::Found => {
                for m in &r.messages {
                    let v = RecordView::parse(m, true)
                        .map_err(|e| format!("pulled record of {topic}/{queue_id} invalid: {e}"))?;
                    out.push((v.queue_offset, v.body.to_vec()));
                }
                offset = r.next_begin_offset;
            }
            GetMessageStatus::OffsetOverflowOne
            | GetMessageStatus::NoMessageInQueue
            | GetMessageStatus::NoMatchedLogicQueue => return Ok(out),
            other => return Err(format!("pull of {topic}/{queue_id} at {offset}: {other:?}")),
        }
    }
    Err(format!("pull of {topic}/{queue_id} does not end"))
}

/// The index finds the newest records by their key.
fn check_index(store: &MessageStore, found: &[Found]) -> Result<(), Violation> {
    for f in found.iter().rev().take(3) {
        let key = format!(
            "key-{}",
            String::from_utf8_lossy(&f.rec.body[..f.rec.body.len().min(12)])
        );
        let r = store.query_message(&f.rec.topic, &key, 32, 0, i64::MAX);
        let hit = r.messages.iter().any(|m| {
            RecordView::parse(m, false)
                .map(|v| v.physical_offset == f.phys)
                .unwrap_or(false)
        });
        if !hit {
            let props = store.look_message_by_offset(f.phys).and_then(|r| {
                RecordView::parse(&r, true)
                    .ok()
                    .map(|v| String::from_utf8_lossy(v.properties).into_owned())
            });
            return Err(format!(
                "the index does not find record {} by key {key} (its properties now: {props:?})",
                f.phys
            ));
        }
    }
    Ok(())
}
