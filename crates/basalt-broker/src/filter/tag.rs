//! Tag subscriptions: the broker-side filter of a pull.
//!
//! The ConsumeQueue holds each message's tags hash; a subscription is a set
//! of tags (`"TagA || TagB"`) or `*`. The broker compares hashes first and the
//! tag text second (hashes can collide); the client checks again.

use std::collections::HashSet;

use basalt_common::constants::property;
use basalt_common::hash::java_string_hash;
use basalt_common::record::RecordView;
use basalt_store::MessageFilter;

/// A parsed TAG subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagFilter {
    /// `None`: everything matches (`*` or empty).
    tags: Option<HashSet<String>>,
    codes: HashSet<i64>,
}

impl TagFilter {
    /// Parses a subscription expression (`*`, `TagA`, `TagA || TagB`).
    pub fn parse(expr: &str) -> TagFilter {
        let expr = expr.trim();
        if expr.is_empty() || expr == "*" {
            return TagFilter {
                tags: None,
                codes: HashSet::new(),
            };
        }
        let tags: HashSet<String> = expr
            .split("||")
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        if tags.is_empty() || tags.contains("*") {
            return TagFilter {
                tags: None,
                codes: HashSet::new(),
            };
        }
        let codes = tags.iter().map(|t| java_string_hash(t) as i64).collect();
        TagFilter {
            tags: Some(tags),
            codes,
        }
    }

    /// From a heartbeat's subscription: its tags set when it has one, else
    /// its expression.
    pub fn from_parts(expression: &str, tags: &[String]) -> TagFilter {
        if expression.trim() == "*" || expression.trim().is_empty() {
            return Self::parse("*");
        }
        if !tags.is_empty() {
            return Self::parse(&tags.join("||"));
        }
        Self::parse(expression)
    }

    pub fn matches_all(&self) -> bool {
        self.tags.is_none()
    }
}

impl MessageFilter for TagFilter {
    fn matches_tags_code(&self, tags_code: i64) -> bool {
        match &self.tags {
            None => true,
            Some(_) => self.codes.contains(&tags_code),
        }
    }

    fn matches_record(&self, record: &[u8]) -> bool {
        let Some(tags) = &self.tags else {
            return true;
        };
        match RecordView::parse(record, false) {
            Ok(v) => v
                .property(property::TAGS)
                .and_then(|t| std::str::from_utf8(t).ok())
                .map(|t| tags.contains(t))
                .unwrap_or(false),
            // Unparseable records are the client's to reject.
            Err(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_expressions() {
        assert!(TagFilter::parse("*").matches_all());
        assert!(TagFilter::parse("").matches_all());
        let f = TagFilter::parse("TagA || TagB");
        assert!(f.matches_tags_code(java_string_hash("TagA") as i64));
        assert!(f.matches_tags_code(java_string_hash("TagB") as i64));
        assert!(!f.matches_tags_code(java_string_hash("TagC") as i64));
        assert!(!f.matches_tags_code(0));
    }
}
