//! Bodies of the fuzz targets, shared with plain tests so CI exercises them
//! without cargo-fuzz. Each must never panic, whatever the input.

use bytes::{Bytes, BytesMut};

use crate::codec::{FrameDecoder, encode_frame};
use crate::command::ExtFields;
use crate::header::*;

/// Decodes frames from raw bytes; every decoded command must re-encode and
/// decode to itself.
pub fn frame_decode(data: &[u8]) {
    // The input as a bare JSON header: the fast parser must agree with serde.
    crate::codec::check_header_parser_agrees(data);
    let decoder = FrameDecoder::new(1 << 20);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(cmd)) = decoder.decode(&mut buf) {
        // Headers decoded from the binary form hold only what it can carry,
        // so they re-encode; JSON headers may hold codes the binary form
        // cannot, which then fails cleanly.
        if let Ok(mut again) = encode_frame(&cmd) {
            let back = decoder
                .decode(&mut again)
                .expect("re-encoded frame decodes")
                .expect("re-encoded frame is complete");
            assert_eq!(back, cmd);
        }
    }
}

/// Builds ext fields from raw bytes: `key=value` lines.
pub fn ext_from_bytes(data: &[u8]) -> ExtFields {
    let text = String::from_utf8_lossy(data);
    let mut ext = ExtFields::new();
    for line in text.split('\n') {
        let (k, v) = line.split_once('=').unwrap_or((line, ""));
        ext.insert(k, v);
    }
    ext
}

fn check<H: CommandHeader + PartialEq + std::fmt::Debug>(ext: &ExtFields) {
    if let Ok(h) = H::from_ext(ext) {
        assert_eq!(H::from_ext(&h.to_ext()).as_ref(), Ok(&h));
    }
}

/// Parses ext fields as every typed header; whatever parses must round-trip.
pub fn parse_all_headers(ext: &ExtFields) {
    check::<SendMessageRequestHeader>(ext);
    if let Ok(h) = SendMessageRequestHeader::from_ext_v2(ext) {
        assert_eq!(SendMessageRequestHeader::from_ext_v2(&h.to_ext_v2()), Ok(h));
    }
    check::<SendMessageResponseHeader>(ext);
    check::<PullMessageRequestHeader>(ext);
    check::<PullMessageResponseHeader>(ext);
    check::<QueryConsumerOffsetRequestHeader>(ext);
    check::<OffsetResponseHeader>(ext);
    check::<UpdateConsumerOffsetRequestHeader>(ext);
    check::<GetMaxOffsetRequestHeader>(ext);
    check::<GetMinOffsetRequestHeader>(ext);
    check::<GetEarliestMsgStoretimeRequestHeader>(ext);
    check::<GetEarliestMsgStoretimeResponseHeader>(ext);
    check::<SearchOffsetRequestHeader>(ext);
    check::<UnregisterClientRequestHeader>(ext);
    check::<GetConsumerListByGroupRequestHeader>(ext);
    check::<NotifyConsumerIdsChangedRequestHeader>(ext);
    check::<ConsumerSendMsgBackRequestHeader>(ext);
    check::<QueryMessageRequestHeader>(ext);
    check::<QueryMessageResponseHeader>(ext);
    check::<ViewMessageRequestHeader>(ext);
    check::<GetRouteInfoRequestHeader>(ext);
    check::<RegisterBrokerRequestHeader>(ext);
    check::<RegisterBrokerResponseHeader>(ext);
    check::<UnregisterBrokerRequestHeader>(ext);
    check::<CreateTopicRequestHeader>(ext);
    check::<DeleteTopicRequestHeader>(ext);
    check::<DeleteTopicFromNamesrvRequestHeader>(ext);
    check::<RegisterTopicRequestHeader>(ext);
    check::<GetTopicsByClusterRequestHeader>(ext);
    check::<GetTopicStatsInfoRequestHeader>(ext);
    check::<GetConsumeStatsRequestHeader>(ext);
    check::<EndTransactionRequestHeader>(ext);
    check::<CheckTransactionStateRequestHeader>(ext);
    check::<GetConsumerRunningInfoRequestHeader>(ext);
}

/// Decodes a batch body; whatever decodes must re-encode to bytes of the same
/// length (MAGICCODE and BODYCRC are ignored on input and written as 0) that
/// decode to the same entries.
pub fn batch_decode(data: &[u8]) {
    let body = Bytes::copy_from_slice(data);
    if let Ok(entries) = basalt_common::batch::decode(&body) {
        let again = basalt_common::batch::encode(&entries).expect("decoded batch re-encodes");
        assert_eq!(again.len(), data.len());
        let back =
            basalt_common::batch::decode(&Bytes::from(again)).expect("re-encoded batch decodes");
        assert_eq!(back, entries);
    }
}

/// Runs the fastjson reader and the route/cluster/register decoders; what
/// parses must survive our writers.
pub fn route_json(data: &[u8]) {
    use crate::protocol::*;
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(n) = crate::fastjson::normalize(text)
    {
        // Normalized output is stable.
        assert_eq!(crate::fastjson::normalize(&n).as_deref(), Ok(&*n));
    }
    if let Ok(r) = TopicRouteData::decode(data) {
        for bare in [false, true] {
            assert_eq!(
                TopicRouteData::decode(&r.encode(bare)).ok().as_ref(),
                Some(&r)
            );
        }
    }
    if let Ok(c) = ClusterInfo::decode(data) {
        assert_eq!(ClusterInfo::decode(&c.encode()).ok().as_ref(), Some(&c));
    }
    let _ = RegisterBrokerBody::decode(data, false, 401);
    let _ = RegisterBrokerBody::decode(data, true, 479);
    let _ = crate::fastjson::from_slice::<HeartbeatData>(data);
    let _ = ConsumeStats::decode(data);
}
