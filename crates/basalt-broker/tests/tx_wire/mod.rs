//! Raw requests of a transactional producer, for wire tests: a half
//! message and END_TRANSACTION (docs/protocol.md#transactions).
#![allow(dead_code)]

use basalt_common::properties::Properties;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::request;
use basalt_remoting::header::{
    CommandHeader, EndTransactionRequestHeader, SendMessageRequestHeader, SendMessageResponseHeader,
};

/// The producer group of the test transactions.
pub const GROUP: &str = "PG";

/// A half message of group [`GROUP`] to `topic` queue 0; its unique key
/// (the transaction id) is `TX-<body>`.
pub fn half_request(topic: &str, body: &[u8]) -> RemotingCommand {
    let mut p = Properties::new();
    p.set("TRAN_MSG", "true");
    p.set("PGROUP", GROUP);
    p.set("UNIQ_KEY", format!("TX-{}", String::from_utf8_lossy(body)));
    let h = SendMessageRequestHeader {
        producer_group: GROUP.into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 1,
        queue_id: 0,
        sys_flag: basalt_common::sysflag::TRANSACTION_PREPARED_TYPE,
        born_timestamp: basalt_common::time::now_millis(),
        properties: Some(String::from_utf8(p.encode()).expect("utf-8 properties")),
        ..Default::default()
    };
    RemotingCommand::request(request::SEND_MESSAGE_V2)
        .with_ext(h.to_ext_v2())
        .with_body(body.to_vec())
}

/// The CommitLog offset of the half a send response names.
pub fn half_log_offset(sent: &SendMessageResponseHeader) -> i64 {
    basalt_common::msgid::decode(&sent.msg_id)
        .expect("an offset msgId")
        .1
}

/// END_TRANSACTION about the half `sent` names, as its producer sends it,
/// with `group`, `queue_offset` and `decision` (0, 8, 12) as given.
pub fn end_request(
    sent: &SendMessageResponseHeader,
    group: &str,
    queue_offset: i64,
    decision: i32,
) -> RemotingCommand {
    let h = EndTransactionRequestHeader {
        topic: None,
        producer_group: group.into(),
        tran_state_table_offset: queue_offset,
        commit_log_offset: half_log_offset(sent),
        commit_or_rollback: decision,
        from_transaction_check: Some(false),
        msg_id: sent.msg_id.clone(),
        transaction_id: sent.transaction_id.clone(),
    };
    RemotingCommand::request(request::END_TRANSACTION).with_ext(h.to_ext())
}
