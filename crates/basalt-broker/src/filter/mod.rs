//! Subscription filters: which messages a pull returns
//! (docs/sql92-filter.md).
//!
//! * [`tag`] — TAG expressions (`TagA || TagB`), checked on the
//!   ConsumeQueue's tags hash first;
//! * [`sql92`] — SQL92 selectors over message properties;
//! * [`cache`] — compiled selectors of pulls that carry their own
//!   expression.
//!
//! A heartbeat's subscription is compiled once per version and kept with it
//! (`clients::registry::Subscription`); a pull only evaluates.

pub mod cache;
pub mod sql92;
pub mod tag;

use basalt_common::record::RecordView;
use basalt_store::MessageFilter;

pub use cache::FilterCache;
pub use sql92::Sql92Filter;
pub use tag::TagFilter;

/// The expression type of tag subscriptions.
pub const TAG: &str = "TAG";
/// The expression type of property selectors.
pub const SQL92: &str = "SQL92";

/// RocketMQ's `ExpressionType.isTagType`: empty or exactly `TAG`.
pub fn is_tag_type(expression_type: &str) -> bool {
    expression_type.is_empty() || expression_type == TAG
}

/// Why a subscription expression cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("the expression type {0} is not supported; use TAG or SQL92")]
    UnsupportedType(String),
    #[error(transparent)]
    Sql92(#[from] sql92::ParseError),
}

/// A compiled subscription expression, ready to be evaluated per message.
#[derive(Debug, Clone)]
pub enum SubscriptionFilter {
    Tag(TagFilter),
    Sql92(Sql92Filter),
}

impl SubscriptionFilter {
    /// Compiles an expression a pull carries itself.
    pub fn compile(expression_type: &str, expression: &str) -> Result<Self, FilterError> {
        Self::for_subscription(expression_type, expression, &[])
    }

    /// Compiles a heartbeat's subscription (a TAG one by its tags set when
    /// it has one).
    pub fn for_subscription(
        expression_type: &str,
        expression: &str,
        tags: &[String],
    ) -> Result<Self, FilterError> {
        if is_tag_type(expression_type) {
            Ok(SubscriptionFilter::Tag(TagFilter::from_parts(
                expression, tags,
            )))
        } else if expression_type == SQL92 {
            Ok(SubscriptionFilter::Sql92(Sql92Filter::compile(expression)?))
        } else {
            Err(FilterError::UnsupportedType(expression_type.to_string()))
        }
    }

    /// Whether this is a property filter (what `enablePropertyFilter` gates).
    pub fn is_property_filter(&self) -> bool {
        matches!(self, SubscriptionFilter::Sql92(_))
    }

    /// Whether every message matches (a `*` tag subscription): the store
    /// need not look at the messages.
    pub fn matches_all(&self) -> bool {
        match self {
            SubscriptionFilter::Tag(t) => t.matches_all(),
            SubscriptionFilter::Sql92(_) => false,
        }
    }
}

impl MessageFilter for SubscriptionFilter {
    fn matches_tags_code(&self, tags_code: i64) -> bool {
        match self {
            SubscriptionFilter::Tag(t) => t.matches_tags_code(tags_code),
            // The tags hash says nothing about properties.
            SubscriptionFilter::Sql92(_) => true,
        }
    }

    fn matches_record(&self, record: &[u8]) -> bool {
        match self {
            SubscriptionFilter::Tag(t) => t.matches_record(record),
            SubscriptionFilter::Sql92(f) => match RecordView::parse(record, false) {
                Ok(v) => f.matches_encoded(v.properties),
                // Unparseable records are the client's to reject.
                Err(_) => true,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_common::hash::java_string_hash;

    #[test]
    fn expression_types_as_rocketmq_names_them() {
        assert!(is_tag_type(""));
        assert!(is_tag_type("TAG"));
        assert!(!is_tag_type("tag"));
        let f = SubscriptionFilter::compile("", "A || B").unwrap();
        assert!(!f.is_property_filter());
        assert!(f.matches_tags_code(java_string_hash("A") as i64));
        let f = SubscriptionFilter::compile("SQL92", "a > 1").unwrap();
        assert!(f.is_property_filter());
        assert!(!f.matches_all());
        assert!(f.matches_tags_code(12345));
        assert_eq!(
            SubscriptionFilter::compile("sql92", "a > 1").unwrap_err(),
            FilterError::UnsupportedType("sql92".into())
        );
        assert!(matches!(
            SubscriptionFilter::compile("SQL92", "a >"),
            Err(FilterError::Sql92(_))
        ));
    }

    #[test]
    fn heartbeat_tag_subscriptions_use_their_tags_set() {
        let f = SubscriptionFilter::for_subscription("TAG", "ignored", &["X".into()]).unwrap();
        assert!(f.matches_tags_code(java_string_hash("X") as i64));
        assert!(!f.matches_tags_code(java_string_hash("ignored") as i64));
        assert!(
            SubscriptionFilter::for_subscription("TAG", "*", &[])
                .unwrap()
                .matches_all()
        );
    }
}
