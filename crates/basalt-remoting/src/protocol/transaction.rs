//! The body of Basalt's LIST_TRANSACTIONS answer: the half messages a broker
//! still waits on a decision for (docs/protocol.md#transactions).

use serde::{Deserialize, Serialize};

/// One unresolved transactional message: where its latest half copy is and
/// how often the broker has asked its producer about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PendingTransaction {
    /// The message's unique key (`UNIQ_KEY`), which is its transaction id.
    pub transaction_id: String,
    pub producer_group: String,
    /// The topic and queue the message goes to when committed.
    pub topic: String,
    pub queue_id: i32,
    /// The half copy's offset in `RMQ_SYS_TRANS_HALF_TOPIC` and in the log.
    pub half_queue_offset: i64,
    pub commit_log_offset: i64,
    pub born_timestamp: i64,
    /// Checks sent so far (`TRANSACTION_CHECK_TIMES`).
    pub check_times: i32,
}

/// A broker's unresolved transactional messages, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct TransactionList {
    /// Where the check has read the half and op queues up to (queue 0).
    pub half_progress: i64,
    pub op_progress: i64,
    /// One past the last half message stored.
    pub half_max_offset: i64,
    pub transactions: Vec<PendingTransaction>,
    /// More unresolved messages exist than were listed.
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_java_style_keys() {
        let list = TransactionList {
            half_progress: 3,
            op_progress: 2,
            half_max_offset: 9,
            transactions: vec![PendingTransaction {
                transaction_id: "AB".into(),
                producer_group: "PG".into(),
                topic: "T".into(),
                queue_id: 1,
                half_queue_offset: 4,
                commit_log_offset: 1024,
                born_timestamp: 7,
                check_times: 2,
            }],
            truncated: false,
        };
        let text = serde_json::to_string(&list).unwrap();
        assert!(text.contains("\"transactionId\":\"AB\""), "{text}");
        assert!(text.contains("\"halfQueueOffset\":4"), "{text}");
        let back: TransactionList = serde_json::from_str(&text).unwrap();
        assert_eq!(back, list);
        let sparse: TransactionList = serde_json::from_str("{\"halfProgress\":1}").unwrap();
        assert_eq!(sparse.half_progress, 1);
        assert!(sparse.transactions.is_empty());
    }
}
