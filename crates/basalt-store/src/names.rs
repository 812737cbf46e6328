//! What the store accepts as a queue address, whoever asks.
//!
//! A topic becomes a directory name under `consumequeue/`, and a queue id a
//! directory below it and an index into per-topic tables. The broker checks
//! names against RocketMQ's rules at its edge; the store keeps its own,
//! weaker rule as a second line: a topic must be one plain file name (so no
//! name can reach outside its directory), and a queue id must lie in
//! `0..=MAX_QUEUE_ID` (so no id can size a table).

use basalt_common::constants::property;
use basalt_common::properties;

/// Highest queue id the store places. RocketMQ topics have at most a few
/// thousand queues; the broker's own limit is lower and configurable.
pub const MAX_QUEUE_ID: i32 = 65_535;

/// Why a record or a request cannot be placed in a ConsumeQueue.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unplaceable {
    #[error("the topic is not UTF-8")]
    TopicNotUtf8,
    #[error("the topic {0:?} is not one plain file name")]
    TopicNotAFileName(String),
    #[error("queue id {0} is outside 0..={MAX_QUEUE_ID}")]
    QueueIdOutOfRange(i32),
}

/// Whether `name` can be a single directory entry: 1..=255 bytes, no `/` or
/// NUL, and neither `.` nor `..`.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name.bytes().any(|b| b == b'/' || b == 0)
}

/// Checks that `topic`/`queue_id` can name a ConsumeQueue.
pub fn check_queue_address(topic: &str, queue_id: i32) -> Result<(), Unplaceable> {
    if !is_plain_file_name(topic) {
        return Err(Unplaceable::TopicNotAFileName(topic.to_string()));
    }
    if !(0..=MAX_QUEUE_ID).contains(&queue_id) {
        return Err(Unplaceable::QueueIdOutOfRange(queue_id));
    }
    Ok(())
}

/// Checks what a put may store: a placeable address, and no `__CRC32#`
/// property, which only the store itself writes (as the record's trailer).
pub fn check_put(topic: &str, queue_id: i32, props: &[u8]) -> Result<(), String> {
    check_queue_address(topic, queue_id).map_err(|e| e.to_string())?;
    if properties::find(props, property::CRC32).is_some() {
        return Err(format!(
            "the property {} is reserved for the store's own checksum",
            property::CRC32
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_file_names() {
        for ok in ["Orders", "%DLQ%g", "a.b", &"x".repeat(255)] {
            assert!(is_plain_file_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "/x", "a\0b", &"x".repeat(256)] {
            assert!(!is_plain_file_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn queue_addresses() {
        assert!(check_queue_address("T", 0).is_ok());
        assert!(check_queue_address("T", MAX_QUEUE_ID).is_ok());
        assert_eq!(
            check_queue_address("T", -1),
            Err(Unplaceable::QueueIdOutOfRange(-1))
        );
        assert!(check_queue_address("T", 2_000_000_000).is_err());
        assert!(check_queue_address("%DLQ%/../Victim", 0).is_err());
    }

    #[test]
    fn client_crc_property_is_refused() {
        let mut props = Vec::new();
        properties::append(&mut props, "KEYS", "k");
        assert!(check_put("T", 0, &props).is_ok());
        properties::append(&mut props, property::CRC32, "0000000001");
        assert!(check_put("T", 0, &props).is_err());
    }
}
