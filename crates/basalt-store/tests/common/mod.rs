//! Helpers shared by the store's integration tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use basalt_common::properties::Properties;
use basalt_common::record::{RecordDraft, RecordView};
use basalt_store::{GetMessageRequest, GetMessageStatus, MessageStore, StoreConfig};

pub fn born() -> SocketAddr {
    "127.0.0.1:50000".parse().unwrap()
}

/// An owned message to put.
#[derive(Debug, Clone)]
pub struct Msg {
    pub topic: String,
    pub queue_id: i32,
    pub body: Vec<u8>,
    pub props: Vec<u8>,
}

impl Msg {
    pub fn new(topic: &str, queue_id: i32, body: Vec<u8>) -> Self {
        let mut p = Properties::new();
        p.set("TAGS", format!("tag{}", queue_id % 3));
        p.set(
            "KEYS",
            format!(
                "key-{}",
                String::from_utf8_lossy(&body[..body.len().min(12)])
            ),
        );
        Msg {
            topic: topic.to_string(),
            queue_id,
            body,
            props: p.encode(),
        }
    }

    pub fn draft(&self, store_host: SocketAddr) -> RecordDraft<'_> {
        RecordDraft {
            topic: &self.topic,
            queue_id: self.queue_id,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: born(),
            store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &self.body,
            properties: &self.props,
        }
    }
}

pub fn body(i: usize, len: usize) -> Vec<u8> {
    let mut b = format!("m{i:08}-").into_bytes();
    while b.len() < len {
        b.push(b'a' + (b.len() % 26) as u8);
    }
    b.truncate(len.max(10));
    b
}

pub fn open(dir: &Path) -> Arc<MessageStore> {
    MessageStore::open(StoreConfig::for_tests(dir)).expect("open store")
}

/// Reads a whole queue through `get_message`.
pub fn read_queue(store: &MessageStore, topic: &str, queue_id: i32) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = store.min_offset_in_queue(topic, queue_id);
    loop {
        let r = store.get_message(
            &GetMessageRequest {
                topic,
                queue_id,
                offset,
                max_msgs: 32,
                max_bytes: None,
                correct_offsets: true,
            },
            None,
        );
        match r.status {
            GetMessageStatus::Found => {
                for m in &r.messages {
                    let v = RecordView::parse(m, true).expect("pulled record parses");
                    out.push((v.queue_offset, v.body.to_vec()));
                }
                offset = r.next_begin_offset;
            }
            GetMessageStatus::OffsetOverflowOne | GetMessageStatus::NoMessageInQueue => return out,
            GetMessageStatus::NoMatchedLogicQueue => return out,
            other => {
                if r.next_begin_offset > offset {
                    offset = r.next_begin_offset;
                    continue;
                }
                panic!("unexpected pull status {other:?} at {offset}");
            }
        }
    }
}

/// Every ConsumeQueue unit points at a valid record of its topic/queue with
/// its queue offset, and every record in the log has its unit.
pub fn assert_consistent(store: &MessageStore) {
    let log = store.commit_log();
    let mut seen: HashMap<(String, i32), Vec<i64>> = HashMap::new();
    // Walk the log.
    let mut offset = log.min_offset();
    let end = log.max_offset();
    while offset < end {
        let Some(data) = log.read_to_file_end(offset) else {
            break;
        };
        let mut at = 0;
        let mut next = None;
        while at < data.len() {
            match basalt_common::record::peek_head(&data[at..]) {
                Some(basalt_common::record::RecordHead::Message { total_size }) => {
                    let v = RecordView::parse(&data[at..], true).expect("valid record in log");
                    assert_eq!(v.physical_offset, offset + at as i64);
                    seen.entry((v.topic_str().into_owned(), v.queue_id))
                        .or_default()
                        .push(v.queue_offset);
                    at += total_size;
                }
                Some(basalt_common::record::RecordHead::Blank) => {
                    next = Some(log.roll_next_file(offset + at as i64));
                    break;
                }
                other => panic!(
                    "unexpected {other:?} inside the log at {}",
                    offset + at as i64
                ),
            }
        }
        offset = next.unwrap_or(offset + at as i64);
    }
    for ((topic, qid), offsets) in &seen {
        let cq = store
            .get_consume_queue(topic, *qid)
            .unwrap_or_else(|| panic!("no ConsumeQueue for {topic}/{qid}"));
        assert_eq!(
            cq.max_offset(),
            offsets.last().unwrap() + 1,
            "max offset of {topic}/{qid}"
        );
        for (i, w) in offsets.windows(2).enumerate() {
            assert_eq!(
                w[1],
                w[0] + 1,
                "queue offsets of {topic}/{qid} are consecutive at {i}"
            );
        }
        for &o in offsets {
            if o < cq.min_offset() {
                continue;
            }
            let u = cq.unit_at(o).expect("unit present");
            let rec = log
                .read_record(u.physical_offset)
                .expect("unit points at a record");
            assert_eq!(rec.len() as i32, u.size);
            let v = RecordView::parse(&rec, true).unwrap();
            assert_eq!(v.topic, topic.as_bytes());
            assert_eq!(v.queue_id, *qid);
            assert_eq!(v.queue_offset, o);
        }
    }
    for cq in store.consume_queues().all() {
        if !seen.contains_key(&(cq.topic().to_string(), cq.queue_id())) {
            // A queue whose records were all cut must be empty now.
            assert!(
                cq.max_offset() <= cq.min_offset(),
                "ConsumeQueue {}/{} has units but the log has no records for it",
                cq.topic(),
                cq.queue_id()
            );
        }
    }
}
