//! Configuration enums shared by the store and the broker, spelled as in
//! RocketMQ's broker.conf.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// When an append is acknowledged relative to fsync (`flushDiskType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FlushDiskType {
    /// Acknowledge after the group commit that covers the message's end.
    SyncFlush,
    /// Acknowledge at once; a background service flushes on an interval.
    #[default]
    AsyncFlush,
}

/// The replication role of a broker (`brokerRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BrokerRole {
    /// Master that acknowledges once a slave has the message.
    SyncMaster,
    /// Master that acknowledges at once and replicates in the background.
    #[default]
    AsyncMaster,
    /// Read-only copy of a master.
    Slave,
}

/// A configuration word that is not one of the accepted spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a valid {what}; expected one of {expected}")]
pub struct ParseEnumError {
    pub what: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl FromStr for FlushDiskType {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            "SYNC_FLUSH" => Ok(Self::SyncFlush),
            "ASYNC_FLUSH" => Ok(Self::AsyncFlush),
            _ => Err(ParseEnumError {
                what: "flushDiskType",
                value: s.to_string(),
                expected: "SYNC_FLUSH, ASYNC_FLUSH",
            }),
        }
    }
}

impl fmt::Display for FlushDiskType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SyncFlush => "SYNC_FLUSH",
            Self::AsyncFlush => "ASYNC_FLUSH",
        })
    }
}

impl FromStr for BrokerRole {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            "SYNC_MASTER" => Ok(Self::SyncMaster),
            "ASYNC_MASTER" => Ok(Self::AsyncMaster),
            "SLAVE" => Ok(Self::Slave),
            _ => Err(ParseEnumError {
                what: "brokerRole",
                value: s.to_string(),
                expected: "SYNC_MASTER, ASYNC_MASTER, SLAVE",
            }),
        }
    }
}

impl fmt::Display for BrokerRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SyncMaster => "SYNC_MASTER",
            Self::AsyncMaster => "ASYNC_MASTER",
            Self::Slave => "SLAVE",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_broker_conf_spellings() {
        assert_eq!(
            "SYNC_FLUSH".parse::<FlushDiskType>().unwrap(),
            FlushDiskType::SyncFlush
        );
        assert_eq!(
            "async_flush".parse::<FlushDiskType>().unwrap(),
            FlushDiskType::AsyncFlush
        );
        assert_eq!("SLAVE".parse::<BrokerRole>().unwrap(), BrokerRole::Slave);
        let err = "SYNC".parse::<BrokerRole>().unwrap_err();
        assert!(err.to_string().contains("brokerRole"));
    }
}
