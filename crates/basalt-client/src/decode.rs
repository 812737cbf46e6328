//! Turning stored records (pull, query and view bodies) into [`MessageExt`],
//! as Java's `MessageDecoder.decodesBatch(…, isClient=true)` does.

use std::io::Read;

use basalt_common::CodecError;
use basalt_common::batch;
use basalt_common::constants::property;
use basalt_common::msgid;
use basalt_common::properties::Properties;
use basalt_common::record::RecordView;
use basalt_common::sysflag;
use bytes::Bytes;

use crate::message::MessageExt;

/// Largest body a compressed record may inflate to; a bigger one is left
/// compressed (with its COMPRESSED flag) rather than exhausting memory.
const MAX_INFLATED_BODY: u64 = 64 * 1024 * 1024;

/// Decodes a concatenation of stored records. Bodies are slices of `buf`
/// (not copies) unless they had to be decompressed.
///
/// Like Java, decoding stops at the first record that does not parse: the
/// messages before it are returned together with the error.
pub fn decode_messages(buf: &Bytes) -> (Vec<MessageExt>, Option<CodecError>) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < buf.len() {
        match RecordView::parse(&buf[at..], false) {
            Ok(view) => {
                let len = view.total_size();
                push_record(buf, &view, &mut out);
                at += len;
            }
            Err(e) => return (out, Some(basalt_common::record::shift(e, at))),
        }
    }
    (out, None)
}

fn push_record(buf: &Bytes, view: &RecordView<'_>, out: &mut Vec<MessageExt>) {
    let properties = Properties::decode(view.properties);
    let mut sys_flag = view.sys_flag;
    let mut body = buf.slice_ref(view.body);
    if sys_flag & sysflag::COMPRESSED != 0 {
        let kind = (sys_flag & sysflag::COMPRESSION_TYPE_MASK) >> 8;
        match kind {
            // 0 is the pre-4.9.4 flag without a type: zlib, as 3 is.
            0 | 3 => match inflate(&body) {
                Ok(plain) => {
                    body = Bytes::from(plain);
                    sys_flag &= !(sysflag::COMPRESSED | sysflag::COMPRESSION_TYPE_MASK);
                }
                Err(e) => tracing::warn!(
                    offset = view.physical_offset,
                    error = %e,
                    "cannot inflate a compressed body; delivering it compressed"
                ),
            },
            other => tracing::warn!(
                offset = view.physical_offset,
                compression = other,
                "LZ4/ZSTD bodies are not supported; delivering it compressed"
            ),
        }
    }
    let offset_msg_id = msgid::encode(view.store_host, view.physical_offset);
    let unwrap = sys_flag & sysflag::INNER_BATCH != 0 && sys_flag & sysflag::NEED_UNWRAP != 0;
    if unwrap {
        // A 5.x inner batch: the body is a batch body, one message per entry
        // at consecutive queue offsets.
        match batch::decode(&body) {
            Ok(entries) => {
                for (i, e) in entries.into_iter().enumerate() {
                    let props = Properties::decode(&e.properties);
                    let mut m = build(view, props, e.body, offset_msg_id.clone());
                    m.flag = e.flag;
                    m.sys_flag = sys_flag & !(sysflag::INNER_BATCH | sysflag::NEED_UNWRAP);
                    m.queue_offset = view.queue_offset + i as i64;
                    out.push(m);
                }
                return;
            }
            Err(e) => tracing::warn!(
                offset = view.physical_offset,
                error = %e,
                "cannot unwrap an inner batch; delivering it whole"
            ),
        }
    }
    let mut m = build(view, properties, body, offset_msg_id);
    m.sys_flag = sys_flag;
    out.push(m);
}

fn build(
    view: &RecordView<'_>,
    properties: Properties,
    body: Bytes,
    offset_msg_id: String,
) -> MessageExt {
    let tags = properties.get(property::TAGS).map(str::to_string);
    let keys = properties
        .get(property::KEYS)
        .map(|k| {
            k.split(property::KEY_SEPARATOR)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let uniq = properties.get(property::UNIQ_KEY).map(str::to_string);
    let transaction_id = match properties.get(property::TRAN_MSG) {
        Some(v) if v.eq_ignore_ascii_case("true") => uniq.clone(),
        _ => None,
    };
    MessageExt {
        topic: view.topic_str().into_owned(),
        queue_id: view.queue_id,
        queue_offset: view.queue_offset,
        body,
        tags,
        keys,
        msg_id: uniq.unwrap_or_else(|| offset_msg_id.clone()),
        offset_msg_id,
        properties,
        flag: view.flag,
        sys_flag: view.sys_flag,
        born_timestamp: view.born_timestamp,
        born_host: view.born_host,
        store_timestamp: view.store_timestamp,
        store_host: view.store_host,
        reconsume_times: view.reconsume_times,
        commit_log_offset: view.physical_offset,
        prepared_transaction_offset: view.prepared_transaction_offset,
        body_crc: view.body_crc,
        broker_name: String::new(),
        transaction_id,
    }
}

fn inflate(body: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(body.len() * 4);
    flate2::read::ZlibDecoder::new(body)
        .take(MAX_INFLATED_BODY + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > MAX_INFLATED_BODY {
        return Err(std::io::Error::other(format!(
            "inflates to more than {MAX_INFLATED_BODY} bytes"
        )));
    }
    Ok(out)
}

/// Compresses a body as Java's producer does (zlib, level 5).
pub(crate) fn deflate(body: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let mut enc = flate2::write::ZlibEncoder::new(
        Vec::with_capacity(body.len() / 2 + 64),
        flate2::Compression::new(5),
    );
    enc.write_all(body)?;
    enc.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_common::record::{RecordDraft, stamp};

    pub(crate) fn record(
        topic: &str,
        queue_offset: i64,
        phys: i64,
        body: &[u8],
        props: &str,
    ) -> Vec<u8> {
        record_with(topic, queue_offset, phys, body, props, 0)
    }

    fn record_with(
        topic: &str,
        queue_offset: i64,
        phys: i64,
        body: &[u8],
        props: &str,
        sys_flag: i32,
    ) -> Vec<u8> {
        let draft = RecordDraft {
            topic,
            queue_id: 3,
            flag: 7,
            sys_flag,
            born_timestamp: 1_700_000_000_000,
            born_host: "10.0.0.9:5555".parse().unwrap(),
            store_host: "10.0.0.1:10911".parse().unwrap(),
            reconsume_times: 2,
            prepared_transaction_offset: 0,
            body,
            properties: props.as_bytes(),
        };
        let mut out = Vec::new();
        draft.encode_into(&mut out).unwrap();
        stamp(&mut out, queue_offset, phys, 1_700_000_000_123);
        out
    }

    #[test]
    fn decodes_concatenated_records_without_copying_bodies() {
        let mut buf = record(
            "T",
            5,
            1000,
            b"hello",
            "UNIQ_KEY\u{1}ABC\u{2}TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}",
        );
        buf.extend(record("T", 6, 2000, b"world", ""));
        let bytes = Bytes::from(buf);
        let (msgs, err) = decode_messages(&bytes);
        assert!(err.is_none());
        assert_eq!(msgs.len(), 2);
        let a = &msgs[0];
        assert_eq!(a.topic, "T");
        assert_eq!(a.queue_id, 3);
        assert_eq!(a.queue_offset, 5);
        assert_eq!(a.commit_log_offset, 1000);
        assert_eq!(&a.body[..], b"hello");
        assert_eq!(a.tags.as_deref(), Some("TagA"));
        assert_eq!(a.keys, ["k1", "k2"]);
        assert_eq!(a.msg_id, "ABC");
        assert_eq!(a.offset_msg_id, "0A00000100002A9F00000000000003E8");
        assert_eq!(a.reconsume_times, 2);
        assert_eq!(a.flag, 7);
        assert_eq!(a.store_timestamp, 1_700_000_000_123);
        assert_eq!(a.born_host.to_string(), "10.0.0.9:5555");
        // No UNIQ_KEY: the msg id is the offset msg id.
        assert_eq!(msgs[1].msg_id, msgs[1].offset_msg_id);
        // The body is a view into the response buffer.
        let base = bytes.as_ptr() as usize;
        let p = a.body.as_ptr() as usize;
        assert!(p >= base && p < base + bytes.len());
    }

    #[test]
    fn stops_at_first_bad_record_and_keeps_the_good_ones() {
        let mut buf = record("T", 0, 0, b"a", "");
        let good_len = buf.len();
        buf.extend(record("T", 1, 100, b"b", ""));
        buf[good_len + 4] ^= 0xFF; // break the second record's magic
        let (msgs, err) = decode_messages(&Bytes::from(buf));
        assert_eq!(msgs.len(), 1);
        assert!(matches!(err, Some(CodecError::BadMagic { at, .. }) if at == good_len + 4));
    }

    #[test]
    fn inflates_zlib_bodies() {
        let plain = b"x".repeat(10_000);
        let packed = deflate(&plain).unwrap();
        let buf = record_with("T", 0, 0, &packed, "", sysflag::COMPRESSED | (3 << 8));
        let (msgs, err) = decode_messages(&Bytes::from(buf));
        assert!(err.is_none());
        assert_eq!(&msgs[0].body[..], &plain[..]);
        assert_eq!(msgs[0].sys_flag & sysflag::COMPRESSED, 0);
        // Legacy flag without a type is zlib as well.
        let buf = record_with("T", 0, 0, &packed, "", sysflag::COMPRESSED);
        let (msgs, _) = decode_messages(&Bytes::from(buf));
        assert_eq!(&msgs[0].body[..], &plain[..]);
    }

    #[test]
    fn unwraps_inner_batches() {
        let entries = vec![
            batch::BatchEntry {
                flag: 1,
                body: Bytes::from_static(b"one"),
                properties: Bytes::from_static(b"UNIQ_KEY\x01U1\x02"),
            },
            batch::BatchEntry {
                flag: 2,
                body: Bytes::from_static(b"two"),
                properties: Bytes::from_static(b"UNIQ_KEY\x01U2\x02"),
            },
        ];
        let body = batch::encode(&entries).unwrap();
        let buf = record_with(
            "T",
            40,
            0,
            &body,
            "",
            sysflag::INNER_BATCH | sysflag::NEED_UNWRAP,
        );
        let (msgs, _) = decode_messages(&Bytes::from(buf));
        assert_eq!(msgs.len(), 2);
        assert_eq!((msgs[0].queue_offset, msgs[1].queue_offset), (40, 41));
        assert_eq!(&msgs[1].body[..], b"two");
        assert_eq!(msgs[1].msg_id, "U2");
        assert_eq!(msgs[1].flag, 2);
    }

    #[test]
    fn transaction_id_is_the_uniq_key_of_half_messages() {
        let buf = record(
            "T",
            0,
            0,
            b"a",
            "TRAN_MSG\u{1}true\u{2}UNIQ_KEY\u{1}TX1\u{2}",
        );
        let (msgs, _) = decode_messages(&Bytes::from(buf));
        assert_eq!(msgs[0].transaction_id.as_deref(), Some("TX1"));
    }
}
