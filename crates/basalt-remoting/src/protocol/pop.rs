//! The body of Basalt's POP_STATUS answer: a broker's POP consumption, the
//! messages popped and not yet acked per group and topic, and how late its
//! revive is (docs/pop.md#operations).

use serde::{Deserialize, Serialize};

/// One group's messages in flight on one topic it reads (the topic or its
/// POP retry topic `%RETRY%group_topic`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PopGroupStatus {
    pub group: String,
    pub topic: String,
    /// Popped, neither acked nor put back yet.
    pub in_flight: u64,
}

/// A broker's POP consumption now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct PopStatus {
    /// Messages popped and not acked, FIFO batches included (these are not
    /// in `groups`).
    pub in_flight: u64,
    /// How far the oldest unacked popped message is past its invisible
    /// time, ms (0 when none is).
    pub revive_lag_ms: i64,
    /// By group, then topic.
    pub groups: Vec<PopGroupStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_camel_case_json_and_reads_back() {
        let s = PopStatus {
            in_flight: 5,
            revive_lag_ms: 0,
            groups: vec![PopGroupStatus {
                group: "G".into(),
                topic: "T".into(),
                in_flight: 4,
            }],
        };
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(
            text,
            r#"{"inFlight":5,"reviveLagMs":0,"groups":[{"group":"G","topic":"T","inFlight":4}]}"#
        );
        assert_eq!(serde_json::from_str::<PopStatus>(&text).unwrap(), s);
        let empty: PopStatus = serde_json::from_str("{}").unwrap();
        assert!(empty.groups.is_empty());
    }
}
