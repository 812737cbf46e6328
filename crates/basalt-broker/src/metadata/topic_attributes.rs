//! Topic attributes (RocketMQ 5): the `attributes` field of
//! UPDATE_AND_CREATE_TOPIC is a modification, `+key=value` to add or change
//! and `-key` to remove, comma-separated, applied to the topic's current
//! attributes; topics.json keeps the result without the signs
//! (`{"message.type":"NORMAL"}`). Basalt stores them and serves them back
//! (GET_ALL_TOPIC_CONFIG, topics.json) but gives none of them a meaning.

use std::collections::BTreeMap;

/// The attribute keys RocketMQ 5.5 accepts on a topic; any other is refused
/// as Java refuses it.
pub const KNOWN_KEYS: [&str; 5] = [
    "queue.type",
    "cleanup.policy",
    "message.type",
    "reserve.time",
    "lite.topic.expiration",
];

/// Applies `modification` to `current` (`None` when the topic is being
/// created, where only additions are allowed). Errors name the offending
/// key, as Java's do.
pub fn apply(
    current: Option<&BTreeMap<String, String>>,
    modification: &str,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = current.cloned().unwrap_or_default();
    if modification.is_empty() {
        return Ok(out);
    }
    let mut seen = Vec::new();
    for kv in modification.split(',') {
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) if k.starts_with('+') => (k, Some(v)),
            Some((k, _)) => return Err(format!("add/alter attribute format is wrong: {k}")),
            None if kv.starts_with('-') => (kv, None),
            None => return Err(format!("delete attribute format is wrong: {kv}")),
        };
        let real = &key[1..];
        if !KNOWN_KEYS.contains(&real) {
            return Err(format!("unsupported key: {real}"));
        }
        if seen.contains(&real) {
            return Err(format!("key duplication: {real}"));
        }
        seen.push(real);
        match value {
            Some(v) if !v.is_empty() => {
                out.insert(real.to_string(), v.to_string());
            }
            Some(_) => return Err(format!("value of {real} is empty")),
            None if current.is_none() => {
                return Err(format!(
                    "only add attribute is supported while creating topic. key: {real}"
                ));
            }
            None => {
                if out.remove(real).is_none() {
                    return Err(format!("attempt to delete a nonexistent key: {real}"));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_changes_and_removes() {
        let created = apply(None, "+message.type=NORMAL,+queue.type=SimpleCQ").unwrap();
        assert_eq!(
            created.get("message.type").map(String::as_str),
            Some("NORMAL")
        );
        let changed = apply(Some(&created), "+message.type=FIFO,-queue.type").unwrap();
        assert_eq!(changed.len(), 1);
        assert_eq!(changed["message.type"], "FIFO");
        assert_eq!(apply(Some(&changed), "").unwrap(), changed);
    }

    #[test]
    fn refuses_what_java_refuses() {
        assert!(apply(None, "-message.type").is_err());
        assert!(apply(None, "+nope=1").is_err());
        assert!(apply(None, "message.type=NORMAL").is_err());
        assert!(apply(Some(&BTreeMap::new()), "-message.type").is_err());
        assert!(apply(None, "+message.type=A,+message.type=B").is_err());
    }
}
