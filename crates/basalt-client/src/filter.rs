//! Tag subscriptions (`FilterAPI.buildSubscriptionData`) and the client-side
//! re-filtering of pulled messages.

use basalt_common::hash::java_string_hash;
use basalt_remoting::protocol::SubscriptionData;

use crate::error::ClientError;
use crate::message::MessageExt;

/// The expression that matches every tag.
pub const SUB_ALL: &str = "*";

/// Builds the subscription of `topic` for a tag expression such as
/// `"TagA || TagB"` or `"*"`: each tag trimmed, empty ones dropped, with its
/// Java hash code in `codeSet` (what the broker compares to the ConsumeQueue
/// tags code). `subVersion` is the current time in ms, as in Java.
pub fn build_subscription(topic: &str, expression: &str) -> Result<SubscriptionData, ClientError> {
    let expr = expression.trim();
    let mut data = SubscriptionData {
        class_filter_mode: false,
        code_set: Vec::new(),
        expression_type: "TAG".into(),
        sub_string: SUB_ALL.into(),
        sub_version: basalt_common::time::now_millis(),
        tags_set: Vec::new(),
        topic: topic.to_string(),
    };
    if expr.is_empty() || expr == SUB_ALL {
        return Ok(data);
    }
    data.sub_string = expression.to_string();
    for tag in expression
        .split("||")
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        if !data.tags_set.iter().any(|t| t == tag) {
            data.tags_set.push(tag.to_string());
        }
        let code = java_string_hash(tag);
        if !data.code_set.contains(&code) {
            data.code_set.push(code);
        }
    }
    if data.tags_set.is_empty() {
        return Err(ClientError::InvalidArgument(format!(
            "the subscription expression {expression:?} names no tag"
        )));
    }
    Ok(data)
}

/// Whether a message passes the subscription's tag set: everything passes an
/// empty set (`*`); otherwise the message's tag must be in it.
pub fn matches_tags(sub: &SubscriptionData, msg: &MessageExt) -> bool {
    if sub.tags_set.is_empty() || sub.class_filter_mode {
        return true;
    }
    match &msg.tags {
        Some(t) => sub.tags_set.iter().any(|s| s == t),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_and_empty_subscribe_to_everything() {
        for e in ["*", "", "  ", " * "] {
            let s = build_subscription("T", e).unwrap();
            assert_eq!(s.sub_string, "*");
            assert!(s.tags_set.is_empty() && s.code_set.is_empty());
            assert_eq!(s.expression_type, "TAG");
        }
    }

    #[test]
    fn tags_are_split_trimmed_and_hashed() {
        let s = build_subscription("T", "TagA || TagB||  TagA ||").unwrap();
        assert_eq!(s.sub_string, "TagA || TagB||  TagA ||");
        assert_eq!(s.tags_set, ["TagA", "TagB"]);
        assert_eq!(s.code_set, [2598919, 2598920]);
        assert!(build_subscription("T", "||").is_err());
    }
}
