//! JSON bodies of the remoting protocol (serde), shaped as fastjson writes them:
//! camelCase keys, Java enum names, unknown keys ignored, nulls read as absent.
//! Bodies where Java emits bare numeric keys have dedicated writers.

pub mod client;
pub mod lenient;
pub mod route;
pub mod stats;
pub mod topic;
pub mod transaction;

pub use client::{
    ConsumeFromWhere, ConsumeType, ConsumerData, ConsumerListBody, HeartbeatData,
    LockBatchRequestBody, LockBatchResponseBody, MessageModel, MessageQueue, ProducerData,
    SubscriptionData, UnlockBatchRequestBody,
};
pub use route::{BrokerData, ClusterInfo, QueueData, TopicList, TopicRouteData};
pub use stats::{ConsumeStats, KvTable, OffsetWrapper, TopicOffset, TopicStatsTable};
pub use topic::{
    DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType,
};
pub use transaction::{PendingTransaction, TransactionList};

/// A body that could not be decoded or encoded.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("invalid JSON body: {0}")]
    Json(String),
    #[error("invalid fastjson body: {0}")]
    FastJson(#[from] crate::fastjson::FastJsonError),
    #[error("invalid compressed body: {0}")]
    Compressed(String),
}

/// Declares a Java enum that serializes by name and keeps unknown names
/// (fastjson would read them as null; keeping the text is kinder to logs).
macro_rules! java_enum {
    ($(#[$m:meta])* pub enum $name:ident { $( $(#[$vm:meta])* $variant:ident = $text:literal ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            $( $(#[$vm])* $variant, )*
            /// A name this version of Basalt does not know.
            Unknown(String),
        }

        impl $name {
            pub fn name(&self) -> &str {
                match self {
                    $( Self::$variant => $text, )*
                    Self::Unknown(s) => s,
                }
            }

            pub fn from_name(s: &str) -> Self {
                match s {
                    $( $text => Self::$variant, )*
                    other => Self::Unknown(other.to_string()),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <Option<String> as serde::Deserialize>::deserialize(d)?;
                Ok(s.map(|s| Self::from_name(&s)).unwrap_or_default())
            }
        }
    };
}
pub(crate) use java_enum;

#[cfg(test)]
mod tests;
