//! JSON bodies of the remoting protocol (serde), shaped as fastjson writes them:
//! camelCase keys, Java enum names, unknown keys ignored, nulls read as absent.
//! Bodies where Java emits bare numeric keys have dedicated writers.

pub mod client;
pub mod ledger;
pub mod pop;
pub mod route;
pub mod stats;
pub mod topic;
pub mod transaction;

pub use client::{
    CheckClientRequestBody, ConsumeFromWhere, ConsumeType, ConsumerData, ConsumerListBody,
    HeartbeatData, LockBatchRequestBody, LockBatchResponseBody, MessageModel, MessageQueue,
    ProducerData, SubscriptionData, UnlockBatchRequestBody,
};
pub use ledger::{LedgerGroupStatus, LedgerPeerStatus};
pub use pop::{PopGroupStatus, PopStatus};
pub use route::{BrokerData, ClusterInfo, QueueData, TopicList, TopicRouteData};
pub use stats::{
    BrokerStatsData, BrokerStatsItem, ConsumeStats, KvTable, OffsetWrapper, ResetOffsetBody,
    TopicOffset, TopicStatsTable,
};
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

/// Declares a Java enum that serializes by name and reads a name or an
/// ordinal (variants are declared in Java's order, so `i` is Java's
/// `ordinal()`). Unknown names are kept (fastjson would read them as null;
/// keeping the text is kinder to logs); null reads as the default.
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
            /// Java's constant names, in ordinal order.
            pub const NAMES: &'static [&'static str] = &[$( $text, )*];

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
                d.deserialize_enum(
                    stringify!($name),
                    Self::NAMES,
                    $crate::protocol::JavaEnumVisitor::new(Self::NAMES, Self::from_name),
                )
            }
        }
    };
}
pub(crate) use java_enum;

/// Reads a [`java_enum!`] value from whatever the deserializer offers: a
/// variant name (`visit_enum`, or a plain string), an ordinal, or null.
#[doc(hidden)]
pub struct JavaEnumVisitor<T> {
    names: &'static [&'static str],
    from_name: fn(&str) -> T,
}

impl<T> JavaEnumVisitor<T> {
    pub fn new(names: &'static [&'static str], from_name: fn(&str) -> T) -> Self {
        JavaEnumVisitor { names, from_name }
    }
}

impl<'de, T: Default> serde::de::Visitor<'de> for JavaEnumVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "one of {:?} or its ordinal", self.names)
    }

    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<T, A::Error> {
        use serde::de::VariantAccess;
        let (name, variant): (String, _) = data.variant()?;
        variant.unit_variant()?;
        Ok((self.from_name)(&name))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        Ok((self.from_name)(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<T, E> {
        usize::try_from(v)
            .ok()
            .and_then(|i| self.names.get(i))
            .map(|n| (self.from_name)(n))
            .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(v), &self)),
        }
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
}

#[cfg(test)]
mod tests;
