//! The receipt handle of a popped message: RocketMQ's `POP_CK` extra-info
//! string (ExtraInfoUtil), eight fields separated by one space:
//! `ckOffset popTime invisibleTime reviveQid retryFlag brokerName queueId
//! queueOffset` (docs/pop.md#receipt-handle).

use super::PopError;

/// `retryFlag` of a message read from the topic itself.
pub const NORMAL_TOPIC: &str = "0";
/// `retryFlag` of a message read from the group's POP retry topic.
pub const RETRY_TOPIC: &str = "1";
/// `retryFlag` of a message read from a v2 POP retry topic (`+` form).
pub const RETRY_TOPIC_V2: &str = "2";

/// The POP retry topic of a group and topic (RocketMQ 5's v1 form, the
/// default): `%RETRY%<group>_<topic>`.
pub fn pop_retry_topic(group: &str, topic: &str) -> String {
    format!(
        "{}{group}_{topic}",
        basalt_common::constants::topic::RETRY_GROUP_PREFIX
    )
}

/// A parsed receipt handle. Invariant: `pop_time` and `invisible_ms` are
/// those of the checkpoint that made the message invisible; a handle whose
/// pop time is not the message's current one is spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraInfo {
    /// Queue offset the checkpoint starts at (`startOffset`).
    pub ck_offset: i64,
    pub pop_time: i64,
    pub invisible_ms: i64,
    pub revive_qid: i32,
    /// `0`, `1` (v1 retry topic) or `2` (v2 retry topic).
    pub retry_flag: String,
    pub broker_name: String,
    pub queue_id: i32,
    pub queue_offset: i64,
}

fn field<T: std::str::FromStr>(parts: &[&str], i: usize, name: &str) -> Result<T, PopError> {
    let raw = parts
        .get(i)
        .ok_or_else(|| PopError::BadHandle(format!("no {name} (field {})", i + 1)))?;
    raw.parse()
        .map_err(|_| PopError::BadHandle(format!("{name} is not a number: {raw:?}")))
}

impl ExtraInfo {
    /// Parses a handle. `offset` stands in for a missing eighth field (the
    /// seven-field form a remoting ack pairs with its `offset` header).
    pub fn parse(s: &str, offset: Option<i64>) -> Result<Self, PopError> {
        let parts: Vec<&str> = s.split(' ').collect();
        if parts.len() < 7 {
            return Err(PopError::BadHandle(format!(
                "{} fields, expected 8: {s:?}",
                parts.len()
            )));
        }
        let retry_flag = parts[4].to_string();
        if ![NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2].contains(&retry_flag.as_str()) {
            return Err(PopError::BadHandle(format!("retry flag {retry_flag:?}")));
        }
        let queue_offset = match parts.get(7) {
            Some(_) => field(&parts, 7, "queue offset")?,
            None => offset.ok_or_else(|| PopError::BadHandle("no queue offset".into()))?,
        };
        Ok(ExtraInfo {
            ck_offset: field(&parts, 0, "checkpoint offset")?,
            pop_time: field(&parts, 1, "pop time")?,
            invisible_ms: field(&parts, 2, "invisible time")?,
            revive_qid: field(&parts, 3, "revive queue id")?,
            retry_flag,
            broker_name: parts[5].to_string(),
            queue_id: field(&parts, 6, "queue id")?,
            queue_offset,
        })
    }

    /// The handle's text.
    pub fn encode(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {}",
            self.ck_offset,
            self.pop_time,
            self.invisible_ms,
            self.revive_qid,
            self.retry_flag,
            self.broker_name,
            self.queue_id,
            self.queue_offset
        )
    }

    /// The topic the message was read from: `topic` itself or the group's
    /// POP retry topic. Java clients name the retry topic themselves
    /// (ExtraInfoUtil.getRealTopic); the gRPC layer names the topic.
    pub fn stored_topic(&self, topic: &str, group: &str) -> String {
        if topic.starts_with(basalt_common::constants::topic::RETRY_GROUP_PREFIX) {
            return topic.to_string();
        }
        match self.retry_flag.as_str() {
            RETRY_TOPIC => pop_retry_topic(group, topic),
            RETRY_TOPIC_V2 => format!(
                "{}{group}+{topic}",
                basalt_common::constants::topic::RETRY_GROUP_PREFIX
            ),
            _ => topic.to_string(),
        }
    }

    /// When the message becomes visible again.
    pub fn deadline(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_ms)
    }
}

/// The retry flag for a message stored in `stored_topic`.
pub fn retry_flag_of(stored_topic: &str) -> &'static str {
    if stored_topic.starts_with(basalt_common::constants::topic::RETRY_GROUP_PREFIX) {
        RETRY_TOPIC
    } else {
        NORMAL_TOPIC
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_real_topic() {
        let h = ExtraInfo::parse("5 1700000000000 30000 0 1 broker-a 0 7", None).unwrap();
        assert_eq!(h.queue_offset, 7);
        assert_eq!(h.deadline(), 1700000030000);
        assert_eq!(h.stored_topic("T", "G"), "%RETRY%G_T");
        assert_eq!(h.stored_topic("%RETRY%G_T", "G"), "%RETRY%G_T");
        assert_eq!(ExtraInfo::parse(&h.encode(), None).unwrap(), h);
        let seven = ExtraInfo::parse("5 1 2 0 0 b 3", Some(9)).unwrap();
        assert_eq!(
            (seven.queue_offset, seven.stored_topic("T", "G")),
            (9, "T".into())
        );
    }

    #[test]
    fn bad_handles_are_refused() {
        for bad in [
            "",
            "1 2 3",
            "x 1 2 0 0 b 3 4",
            "1 2 3 0 9 b 3 4",
            "1 2 3 0 0 b q 4",
        ] {
            assert!(
                matches!(ExtraInfo::parse(bad, None), Err(PopError::BadHandle(_))),
                "{bad}"
            );
        }
    }
}
