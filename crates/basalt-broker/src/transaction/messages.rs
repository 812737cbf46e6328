//! The records of a transaction and how each is made from the one before
//! (docs/protocol.md#transactions):
//!
//! * the **half** message: the producer's message stored in
//!   `RMQ_SYS_TRANS_HALF_TOPIC` queue 0, its real topic and queue kept in
//!   `REAL_TOPIC` / `REAL_QID`, its transaction bits cleared so that it gets a
//!   ConsumeQueue unit in the half topic (and none in the real one);
//! * a half **copy**: a half message put back at the end of the half queue
//!   by the check service (with `TRANSACTION_CHECK_TIMES` raised) or, while
//!   its own check time has not come, with `TRAN_PREPARED_QUEUE_OFFSET`;
//! * the **committed** message: the half restored to its real topic and
//!   queue, sys flag COMMIT, `REAL_*` and `TRAN_MSG` removed;
//! * an **op** message in `RMQ_SYS_TRANS_OP_HALF_TOPIC` (same queue id as
//!   the half), tag `d`, body `offset,` per half queue offset it resolves;
//! * a **discarded** half: copied to `TRANS_CHECK_MAX_TIME_TOPIC` once it
//!   was checked `transactionCheckMax` times.

use std::net::SocketAddr;

use basalt_common::constants::property;
use basalt_common::error::CodecError;
use basalt_common::record::{self, RecordDraft, RecordView};
use basalt_common::{properties, sysflag};

/// Tag of op messages ("d": remove).
pub(crate) const OP_REMOVE_TAG: &str = "d";

/// Separator after each half offset in an op body.
const OP_OFFSET_SEPARATOR: u8 = b',';

/// A property of a stored record as text.
pub(crate) fn text_property<'a>(v: &RecordView<'a>, name: &str) -> Option<&'a str> {
    v.property(name).and_then(|b| std::str::from_utf8(b).ok())
}

/// `sys_flag` with its transaction bits set to `tran_type`.
pub(crate) fn with_transaction_type(sys_flag: i32, tran_type: i32) -> i32 {
    (sys_flag & !sysflag::TRANSACTION_ROLLBACK_TYPE) | tran_type
}

/// Turns a producer's message properties into a half message's: the
/// transaction id (its unique key), the real topic and queue. The caller
/// stores the record in the half topic, queue 0, with the transaction bits
/// of its sys flag cleared.
pub(crate) fn half_properties(props: &[u8], real_topic: &str, real_queue_id: i32) -> Vec<u8> {
    let mut out = properties::without(
        props,
        &[
            property::REAL_TOPIC,
            property::REAL_QID,
            property::TRANSACTION_ID,
        ],
    );
    if let Some(uniq) = properties::find(props, property::UNIQ_KEY)
        .and_then(|u| std::str::from_utf8(u).ok())
        .filter(|u| !u.is_empty())
    {
        properties::append(&mut out, property::TRANSACTION_ID, uniq);
    }
    properties::append(&mut out, property::REAL_TOPIC, real_topic);
    properties::append(&mut out, property::REAL_QID, &real_queue_id.to_string());
    out
}

/// What a stored half message (or copy) says about its transaction.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HalfInfo<'a> {
    /// The transaction id: the message's unique key.
    pub transaction_id: &'a str,
    pub real_topic: &'a str,
    pub real_queue_id: i32,
    pub producer_group: &'a str,
    /// Checks sent so far; `None` before the first.
    pub check_times: Option<i32>,
    /// `CHECK_IMMUNITY_TIME_IN_SECONDS`, when set.
    pub immunity_secs: Option<&'a str>,
}

impl<'a> HalfInfo<'a> {
    /// Reads the transaction properties of a half record. `None` when it
    /// lacks one the broker needs (it cannot be committed or checked).
    pub fn read(v: &RecordView<'a>) -> Option<HalfInfo<'a>> {
        let transaction_id = text_property(v, property::UNIQ_KEY)
            .or_else(|| text_property(v, property::TRANSACTION_ID))?;
        Some(HalfInfo {
            transaction_id,
            real_topic: text_property(v, property::REAL_TOPIC)?,
            real_queue_id: text_property(v, property::REAL_QID)?.parse().ok()?,
            producer_group: text_property(v, property::PGROUP).unwrap_or(""),
            check_times: text_property(v, property::TRANSACTION_CHECK_TIMES)
                .map(|t| t.parse::<i32>().unwrap_or(-1)),
            immunity_secs: text_property(v, property::CHECK_IMMUNITY_TIME_IN_SECONDS),
        })
    }

    /// The time before a first check, in milliseconds: the message's own
    /// immunity time when it names one (RocketMQ falls back to the broker's
    /// timeout for a value that does not parse), else `timeout_ms`.
    pub fn check_after_ms(&self, timeout_ms: i64) -> i64 {
        match self.immunity_secs {
            Some(s) => s
                .trim()
                .parse::<i64>()
                .map(|secs| secs.saturating_mul(1000))
                .unwrap_or(timeout_ms),
            None => timeout_ms,
        }
    }
}

/// Properties of a half copy: the original's, without the CRC trailer (the
/// store writes its own), with the check count or the prepared offset set.
pub(crate) fn copy_properties(
    v: &RecordView<'_>,
    check_times: Option<i32>,
    prepared_queue_offset: Option<i64>,
) -> Vec<u8> {
    let mut drop = vec![property::CRC32];
    if check_times.is_some() {
        drop.push(property::TRANSACTION_CHECK_TIMES);
    }
    if prepared_queue_offset.is_some() {
        drop.push(property::TRANSACTION_PREPARED_QUEUE_OFFSET);
    }
    let mut out = properties::without(v.properties, &drop);
    if let Some(t) = check_times {
        properties::append(&mut out, property::TRANSACTION_CHECK_TIMES, &t.to_string());
    }
    if let Some(o) = prepared_queue_offset {
        properties::append(
            &mut out,
            property::TRANSACTION_PREPARED_QUEUE_OFFSET,
            &o.to_string(),
        );
    }
    out
}

/// Properties of the committed message: the half's without the real topic
/// and queue, the prepared mark and the CRC trailer.
pub(crate) fn committed_properties(v: &RecordView<'_>) -> Vec<u8> {
    properties::without(
        v.properties,
        &[
            property::REAL_TOPIC,
            property::REAL_QID,
            property::TRAN_MSG,
            property::CRC32,
        ],
    )
}

/// Properties of a record copied elsewhere as it is (discard).
pub(crate) fn plain_copy_properties(v: &RecordView<'_>) -> Vec<u8> {
    properties::without(v.properties, &[property::CRC32])
}

/// A draft of `v` with a new place, sys flag and properties; everything
/// else (body, flag, born time and host, reconsume count) as stored.
pub(crate) fn redraft<'a>(
    v: &RecordView<'a>,
    topic: &'a str,
    queue_id: i32,
    sys_flag: i32,
    props: &'a [u8],
    store_host: SocketAddr,
) -> RecordDraft<'a> {
    RecordDraft {
        topic,
        queue_id,
        flag: v.flag,
        sys_flag,
        born_timestamp: v.born_timestamp,
        born_host: v.born_host,
        store_host,
        reconsume_times: v.reconsume_times,
        prepared_transaction_offset: v.prepared_transaction_offset,
        body: v.body,
        properties: props,
    }
}

/// The body of an op message resolving these half queue offsets.
pub(crate) fn op_body(half_offsets: &[i64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(half_offsets.len() * 8);
    for o in half_offsets {
        out.extend_from_slice(o.to_string().as_bytes());
        out.push(OP_OFFSET_SEPARATOR);
    }
    out
}

/// The half queue offsets an op body names. Entries that are not numbers
/// are skipped (RocketMQ reads them as -1, below every offset).
pub(crate) fn parse_op_body(body: &[u8]) -> Vec<i64> {
    body.split(|b| *b == OP_OFFSET_SEPARATOR)
        .filter_map(|s| std::str::from_utf8(s).ok()?.trim().parse::<i64>().ok())
        .filter(|o| *o >= 0)
        .collect()
}

/// The properties of an op message.
pub(crate) fn op_properties(uniq_key: &str) -> Vec<u8> {
    let mut out = Vec::new();
    properties::append(&mut out, property::TAGS, OP_REMOVE_TAG);
    properties::append(&mut out, property::UNIQ_KEY, uniq_key);
    out
}

/// Where the store put a record: queue offset, log offset, store time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StoredAt {
    pub queue_offset: i64,
    pub commit_log_offset: i64,
    pub store_timestamp: i64,
}

/// The body of a CHECK_TRANSACTION_STATE request: the half copy (`v` with
/// the copy's properties `props`, stored at `at`) encoded as a record
/// placed at its real topic and queue (RocketMQ's `MessageDecoder.encode`).
pub(crate) fn check_body(
    v: &RecordView<'_>,
    props: &[u8],
    info: &HalfInfo<'_>,
    at: StoredAt,
    store_host: SocketAddr,
) -> Result<Vec<u8>, CodecError> {
    let draft = redraft(
        v,
        info.real_topic,
        info.real_queue_id,
        v.sys_flag,
        props,
        store_host,
    );
    let mut out = Vec::with_capacity(draft.encoded_len());
    draft.encode_into(&mut out)?;
    record::stamp(
        &mut out,
        at.queue_offset,
        at.commit_log_offset,
        at.store_timestamp,
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn host() -> SocketAddr {
        "127.0.0.1:10911".parse().unwrap()
    }

    fn stored(topic: &str, props: &[u8], sys_flag: i32) -> Vec<u8> {
        let d = RecordDraft {
            topic,
            queue_id: 0,
            flag: 3,
            sys_flag,
            born_timestamp: 1_000,
            born_host: "10.0.0.9:5555".parse().unwrap(),
            store_host: host(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"order-17",
            properties: props,
        };
        let mut out = Vec::new();
        d.encode_into(&mut out).unwrap();
        record::stamp(&mut out, 5, 4096, 2_000);
        out
    }

    #[test]
    fn half_keeps_the_real_place_and_the_transaction_id() {
        let mut props = Vec::new();
        properties::append(&mut props, property::UNIQ_KEY, "U1");
        properties::append(&mut props, property::TRAN_MSG, "true");
        properties::append(&mut props, property::PGROUP, "PG");
        properties::append(&mut props, property::REAL_TOPIC, "forged");
        let half = half_properties(&props, "Orders", 3);
        let rec = stored("RMQ_SYS_TRANS_HALF_TOPIC", &half, 0);
        let v = RecordView::parse(&rec, true).unwrap();
        let info = HalfInfo::read(&v).unwrap();
        assert_eq!(info.transaction_id, "U1");
        assert_eq!(info.real_topic, "Orders");
        assert_eq!(info.real_queue_id, 3);
        assert_eq!(info.producer_group, "PG");
        assert_eq!(info.check_times, None);
        assert_eq!(text_property(&v, property::TRANSACTION_ID), Some("U1"));
    }

    #[test]
    fn commit_drops_the_half_markers() {
        let mut props = half_properties(b"UNIQ_KEY\x01U2\x02TRAN_MSG\x01true\x02", "T", 0);
        properties::append(&mut props, property::CRC32, "0000000000");
        let rec = stored("RMQ_SYS_TRANS_HALF_TOPIC", &props, 0);
        let v = RecordView::parse(&rec, false).unwrap();
        let c = committed_properties(&v);
        for gone in [
            property::REAL_TOPIC,
            property::REAL_QID,
            property::TRAN_MSG,
            property::CRC32,
        ] {
            assert!(properties::find(&c, gone).is_none(), "{gone} kept");
        }
        assert_eq!(properties::find(&c, property::UNIQ_KEY), Some(&b"U2"[..]));
        assert_eq!(
            with_transaction_type(sysflag::MULTI_TAGS, sysflag::TRANSACTION_COMMIT_TYPE),
            sysflag::MULTI_TAGS | sysflag::TRANSACTION_COMMIT_TYPE
        );
        assert_eq!(
            with_transaction_type(sysflag::TRANSACTION_PREPARED_TYPE, 0),
            sysflag::TRANSACTION_NOT_TYPE
        );
    }

    #[test]
    fn copies_replace_the_check_count() {
        let props = half_properties(
            b"UNIQ_KEY\x01U3\x02TRANSACTION_CHECK_TIMES\x013\x02",
            "T",
            1,
        );
        let rec = stored("RMQ_SYS_TRANS_HALF_TOPIC", &props, 0);
        let v = RecordView::parse(&rec, false).unwrap();
        assert_eq!(HalfInfo::read(&v).unwrap().check_times, Some(3));
        let c = copy_properties(&v, Some(4), None);
        let again = stored("RMQ_SYS_TRANS_HALF_TOPIC", &c, 0);
        let v2 = RecordView::parse(&again, false).unwrap();
        assert_eq!(HalfInfo::read(&v2).unwrap().check_times, Some(4));
        let imm = copy_properties(&v, None, Some(5));
        assert_eq!(
            properties::find(&imm, property::TRANSACTION_PREPARED_QUEUE_OFFSET),
            Some(&b"5"[..])
        );
    }

    #[test]
    fn immunity_time_is_in_seconds_and_falls_back_on_garbage() {
        let mut info = HalfInfo {
            transaction_id: "U",
            real_topic: "T",
            real_queue_id: 0,
            producer_group: "PG",
            check_times: None,
            immunity_secs: None,
        };
        assert_eq!(info.check_after_ms(6_000), 6_000);
        info.immunity_secs = Some("20");
        assert_eq!(info.check_after_ms(6_000), 20_000);
        info.immunity_secs = Some("soon");
        assert_eq!(info.check_after_ms(6_000), 6_000);
    }

    #[test]
    fn check_body_is_the_copy_at_its_real_place() {
        let props = half_properties(b"UNIQ_KEY\x01U4\x02PGROUP\x01PG\x02", "Pay", 2);
        let rec = stored("RMQ_SYS_TRANS_HALF_TOPIC", &props, 0);
        let v = RecordView::parse(&rec, true).unwrap();
        let info = HalfInfo::read(&v).unwrap();
        let props = copy_properties(&v, Some(1), None);
        let at = StoredAt {
            queue_offset: 5,
            commit_log_offset: 4096,
            store_timestamp: 2_000,
        };
        let body = check_body(&v, &props, &info, at, host()).unwrap();
        let c = RecordView::parse(&body, true).unwrap();
        assert_eq!(c.topic_str(), "Pay");
        assert_eq!(c.queue_id, 2);
        assert_eq!(c.queue_offset, 5);
        assert_eq!(c.physical_offset, 4096);
        assert_eq!(c.store_timestamp, 2_000);
        assert_eq!(c.body, b"order-17");
        assert_eq!(c.property(property::PGROUP), Some(&b"PG"[..]));
        assert_eq!(
            c.property(property::TRANSACTION_CHECK_TIMES),
            Some(&b"1"[..])
        );
    }

    #[test]
    fn op_body_reads_back_and_skips_garbage() {
        assert_eq!(op_body(&[3, 10]), b"3,10,".to_vec());
        assert_eq!(parse_op_body(b"3,10,"), vec![3, 10]);
        assert_eq!(parse_op_body(b"7"), vec![7]);
        assert_eq!(parse_op_body(b"x,-4,,9,"), vec![9]);
        assert!(parse_op_body(b"").is_empty());
    }

    proptest! {
        #[test]
        fn op_body_round_trips(offsets in proptest::collection::vec(0i64..i64::MAX, 0..50)) {
            prop_assert_eq!(parse_op_body(&op_body(&offsets)), offsets);
        }

        #[test]
        fn op_body_parse_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_op_body(&body);
        }
    }
}
