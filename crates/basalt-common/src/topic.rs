//! Topic and group name rules (RocketMQ's `TopicValidator`), applied to every
//! name a client sends before it reaches a table or the disk.
//!
//! Names are `^[%|a-zA-Z0-9_-]+$`: no `/`, `.`, NUL or other byte that could
//! make a name into a path. Topics are at most 127 bytes, as in RocketMQ.
//! Groups are at most [`MAX_GROUP_LEN`] bytes: RocketMQ allows 255, but a
//! group's retry and dead-letter topics (`%RETRY%<group>`, `%DLQ%<group>`)
//! become directory names, which the file system limits to 255 bytes.

use crate::CodecError;
use crate::constants::topic as reserved;

/// Longest topic name RocketMQ accepts (V1 records store the length in a signed byte).
pub const MAX_TOPIC_LEN: usize = 127;

/// Longest group name accepted: 255 (a file name) minus `%RETRY%`.
pub const MAX_GROUP_LEN: usize = 255 - reserved::RETRY_GROUP_PREFIX.len();

/// Checks a topic name: 1..=127 bytes of `[%|a-zA-Z0-9_-]`.
pub fn validate_topic(topic: &str) -> Result<(), CodecError> {
    if topic.is_empty() {
        return Err(CodecError::Invalid {
            what: "topic",
            detail: "the topic name is empty".into(),
        });
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err(CodecError::TooLarge {
            what: "topic name",
            len: topic.len(),
            max: MAX_TOPIC_LEN,
        });
    }
    if let Some(bad) = topic.chars().find(|c| !is_name_char(*c)) {
        return Err(CodecError::Invalid {
            what: "topic",
            detail: format!(
                "the topic name {topic:?} contains the illegal character {bad:?}; only ^[%|a-zA-Z0-9_-]+$ is allowed"
            ),
        });
    }
    Ok(())
}

/// Checks a producer or consumer group name: 1..=[`MAX_GROUP_LEN`] bytes of
/// `[%|a-zA-Z0-9_-]`.
pub fn validate_group(group: &str) -> Result<(), CodecError> {
    if group.is_empty() || group.len() > MAX_GROUP_LEN {
        return Err(CodecError::Invalid {
            what: "group",
            detail: format!(
                "the group name must be 1..={MAX_GROUP_LEN} bytes, got {}",
                group.len()
            ),
        });
    }
    if let Some(bad) = group.chars().find(|c| !is_name_char(*c)) {
        return Err(CodecError::Invalid {
            what: "group",
            detail: format!(
                "the group name {group:?} contains the illegal character {bad:?}; only ^[%|a-zA-Z0-9_-]+$ is allowed"
            ),
        });
    }
    Ok(())
}

/// Checks a topic the broker derives or replicates rather than one a client
/// names: the same characters, up to 255 bytes (a retry or dead-letter topic
/// of a long group name).
pub fn validate_internal_topic(topic: &str) -> Result<(), CodecError> {
    if topic.len() <= MAX_TOPIC_LEN {
        return validate_topic(topic);
    }
    if topic.len() > 255 || topic.chars().any(|c| !is_name_char(c)) {
        return Err(CodecError::Invalid {
            what: "topic",
            detail: format!("{topic:?} is not a valid topic name"),
        });
    }
    Ok(())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')
}

/// Whether `topic` is one of the system's own (`TopicValidator.isSystemTopic`):
/// it cannot be created or deleted by hand.
pub fn is_system_topic(topic: &str) -> bool {
    matches!(
        topic,
        reserved::AUTO_CREATE_TOPIC
            | reserved::SCHEDULE_TOPIC
            | reserved::SCHEDULE_TOPIC_V2
            | reserved::BENCHMARK_TOPIC
            | reserved::TRANS_HALF_TOPIC
            | reserved::TRACE_TOPIC
            | reserved::TRANS_OP_HALF_TOPIC
            | reserved::TRANS_CHECK_MAX_TIME_TOPIC
            | reserved::SELF_TEST_TOPIC
            | reserved::OFFSET_MOVED_EVENT
    ) || topic.starts_with(reserved::SYSTEM_TOPIC_PREFIX)
}

/// Whether producers may not send to `topic` directly
/// (`TopicValidator.isNotAllowedSendTopic`, plus the timer topic, which
/// RocketMQ leaves open: a message sent there would be a forged timer).
pub fn is_not_allowed_send_topic(topic: &str) -> bool {
    matches!(
        topic,
        reserved::SCHEDULE_TOPIC
            | reserved::TIMER_TOPIC
            | reserved::SCHEDULE_TOPIC_V2
            | reserved::TRANS_HALF_TOPIC
            | reserved::TRANS_OP_HALF_TOPIC
            | reserved::TRANS_CHECK_MAX_TIME_TOPIC
            | reserved::SELF_TEST_TOPIC
            | reserved::OFFSET_MOVED_EVENT
    )
}

/// The retry topic of a consumer group: `%RETRY%<group>`.
pub fn retry_topic(group: &str) -> String {
    format!("{}{}", reserved::RETRY_GROUP_PREFIX, group)
}

/// The dead-letter topic of a consumer group: `%DLQ%<group>`.
pub fn dlq_topic(group: &str) -> String {
    format!("{}{}", reserved::DLQ_GROUP_PREFIX, group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_rocketmq_names() {
        for t in ["TopicTest", "%RETRY%CG", "a|b", "x_y-z", &"t".repeat(127)] {
            validate_topic(t).unwrap();
        }
        validate_group(&"g".repeat(MAX_GROUP_LEN)).unwrap();
        validate_internal_topic(&retry_topic(&"g".repeat(MAX_GROUP_LEN))).unwrap();
        validate_internal_topic(&dlq_topic(&"g".repeat(MAX_GROUP_LEN))).unwrap();
    }

    #[test]
    fn rejects_bad_names() {
        assert!(validate_topic("").is_err());
        assert!(validate_topic("has space").is_err());
        assert!(validate_topic("dot.ted").is_err());
        assert!(validate_topic("../x").is_err());
        assert!(validate_topic("a\0b").is_err());
        assert!(validate_topic(&"t".repeat(128)).is_err());
        assert!(validate_group("").is_err());
        assert!(validate_group("/../Victim").is_err());
        assert!(validate_group(&"g".repeat(MAX_GROUP_LEN + 1)).is_err());
        assert!(validate_internal_topic(&"t".repeat(256)).is_err());
        assert!(validate_internal_topic("%DLQ%/../../commitlog").is_err());
    }

    #[test]
    fn system_topics() {
        assert!(is_system_topic("TBW102"));
        assert!(is_system_topic("rmq_sys_anything"));
        assert!(!is_system_topic("Orders"));
        assert!(is_not_allowed_send_topic("SCHEDULE_TOPIC_XXXX"));
        assert!(is_not_allowed_send_topic("rmq_sys_wheel_timer"));
        assert!(!is_not_allowed_send_topic("TBW102"));
    }
}
