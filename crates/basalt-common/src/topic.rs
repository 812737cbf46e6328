//! Topic and group name rules (`TopicValidator`).

use crate::CodecError;

/// Longest topic name RocketMQ accepts (V1 records store the length in a signed byte).
pub const MAX_TOPIC_LEN: usize = 127;

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
            detail: format!("the topic name {topic:?} contains the illegal character {bad:?}"),
        });
    }
    Ok(())
}

/// Checks a producer or consumer group name with the same character rules.
pub fn validate_group(group: &str) -> Result<(), CodecError> {
    if group.is_empty() || group.len() > 255 {
        return Err(CodecError::Invalid {
            what: "group",
            detail: format!("the group name must be 1..=255 bytes, got {}", group.len()),
        });
    }
    if let Some(bad) = group.chars().find(|c| !is_name_char(*c)) {
        return Err(CodecError::Invalid {
            what: "group",
            detail: format!("the group name {group:?} contains the illegal character {bad:?}"),
        });
    }
    Ok(())
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')
}

/// The retry topic of a consumer group: `%RETRY%<group>`.
pub fn retry_topic(group: &str) -> String {
    format!("{}{}", crate::constants::topic::RETRY_GROUP_PREFIX, group)
}

/// The dead-letter topic of a consumer group: `%DLQ%<group>`.
pub fn dlq_topic(group: &str) -> String {
    format!("{}{}", crate::constants::topic::DLQ_GROUP_PREFIX, group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_rocketmq_names() {
        for t in ["TopicTest", "%RETRY%CG", "a|b", "x_y-z", &"t".repeat(127)] {
            validate_topic(t).unwrap();
        }
    }

    #[test]
    fn rejects_bad_names() {
        assert!(validate_topic("").is_err());
        assert!(validate_topic("has space").is_err());
        assert!(validate_topic("dot.ted").is_err());
        assert!(validate_topic(&"t".repeat(128)).is_err());
        assert!(validate_group("").is_err());
    }
}
