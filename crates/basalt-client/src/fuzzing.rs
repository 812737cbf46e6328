//! Bodies of the fuzz targets (`fuzz/`), shared with plain tests so CI runs
//! them without cargo-fuzz. Each must never panic, whatever the input.

use bytes::Bytes;

use crate::decode::decode_messages;
use crate::filter::build_subscription;
use crate::message::TopicQueue;
use crate::pull::{PullStatus, RawPull, process};
use crate::push::offset_store;

/// Decodes a pull (or query) body; every decoded message's offset msgId
/// must point back at its store host and CommitLog offset, and tag
/// re-filtering may only drop messages.
pub fn pull_body(data: &[u8]) {
    let body = Bytes::copy_from_slice(data);
    let (msgs, _) = decode_messages(&body);
    for m in &msgs {
        let (host, offset) = basalt_common::msgid::decode(&m.offset_msg_id)
            .expect("an offset msgId we made decodes");
        assert_eq!(host, m.store_host);
        assert_eq!(offset, m.commit_log_offset);
    }
    let mq = TopicQueue::new("T", "broker", 0);
    for expr in ["*", "TagA || TagB"] {
        let sub = build_subscription("T", expr).expect("a valid expression");
        let r = process(
            RawPull {
                status: PullStatus::Found,
                next_begin_offset: 0,
                min_offset: 0,
                max_offset: 0,
                offset_delta: None,
                body: body.clone(),
            },
            &mq,
            &sub,
        );
        assert!(r.msgs.len() <= msgs.len());
        assert!(r.msgs.iter().all(|m| m.broker_name == "broker"));
    }
}

/// Parses a broadcasting consumer's offset file; what parses must survive
/// a write and a read.
pub fn offset_file(data: &[u8]) {
    if let Ok(table) = offset_store::decode_file(data) {
        let again = offset_store::encode_file(&table);
        assert_eq!(offset_store::decode_file(&again), Ok(table));
    }
}

/// Decodes the JSON bodies brokers answer client and admin requests with.
pub fn response_bodies(data: &[u8]) {
    use basalt_remoting::fastjson::from_slice;
    use basalt_remoting::protocol::*;
    let _ = from_slice::<ConsumerListBody>(data);
    let _ = from_slice::<LockBatchResponseBody>(data);
    let _ = from_slice::<crate::admin::ConsumerConnection>(data);
    let _ = from_slice::<KvTable>(data);
    let _ = TopicStatsTable::decode(data);
    let _ = ConsumeStats::decode(data);
    let _ = TopicRouteData::decode(data);
}
