//! What a `broker.conf` key is to Basalt: one it applies, one RocketMQ has
//! and Basalt ignores on purpose (with the reason), or an unknown one, for
//! which the closest known key is suggested (`flushDiskTyp` →
//! `flushDiskType`).
//!
//! RocketMQ itself ignores unknown keys silently; Basalt applies the same
//! rule (an unknown key does not refuse start) but names every such key at
//! start, and `--strict` on the command line turns unknown keys into an
//! error. Keys of [`IGNORED_KEYS`] are never an error: a broker.conf
//! written for RocketMQ keeps working.

use crate::config::BrokerConfig;

/// Keys RocketMQ's `BrokerConfig` / `MessageStoreConfig` have that Basalt
/// reads past on purpose, each with the reason shown to the operator.
pub const IGNORED_KEYS: &[(&str, &str)] = &[
    ("rocketmqHome", "Basalt needs no installation directory"),
    ("brokerConfigPath", "the file is the one given with -c"),
    ("storePathCommitLog", "derived from storePathRootDir"),
    ("storePathConsumeQueue", "derived from storePathRootDir"),
    ("storePathIndex", "derived from storePathRootDir"),
    ("storeCheckpoint", "derived from storePathRootDir"),
    ("abortFile", "derived from storePathRootDir"),
    ("sendMessageThreadPoolNums", THREADS),
    ("putMessageFutureThreadPoolNums", THREADS),
    ("pullMessageThreadPoolNums", THREADS),
    ("litePullMessageThreadPoolNums", THREADS),
    ("ackMessageThreadPoolNums", THREADS),
    ("processReplyMessageThreadPoolNums", THREADS),
    ("queryMessageThreadPoolNums", THREADS),
    ("adminBrokerThreadPoolNums", THREADS),
    ("clientManageThreadPoolNums", THREADS),
    ("consumerManageThreadPoolNums", THREADS),
    ("loadBalanceProcessorThreadPoolNums", THREADS),
    ("heartbeatThreadPoolNums", THREADS),
    ("recoverThreadPoolNums", THREADS),
    ("endTransactionThreadPoolNums", THREADS),
    ("sendThreadPoolQueueCapacity", QUEUES),
    ("putThreadPoolQueueCapacity", QUEUES),
    ("pullThreadPoolQueueCapacity", QUEUES),
    ("litePullThreadPoolQueueCapacity", QUEUES),
    ("ackThreadPoolQueueCapacity", QUEUES),
    ("replyThreadPoolQueueCapacity", QUEUES),
    ("queryThreadPoolQueueCapacity", QUEUES),
    ("clientManagerThreadPoolQueueCapacity", QUEUES),
    ("consumerManagerThreadPoolQueueCapacity", QUEUES),
    ("heartbeatThreadPoolQueueCapacity", QUEUES),
    ("endTransactionPoolQueueCapacity", QUEUES),
    ("adminBrokerThreadPoolQueueCapacity", QUEUES),
    ("brokerFastFailureEnable", QUEUES),
    ("waitTimeMillsInSendQueue", QUEUES),
    ("waitTimeMillsInPullQueue", QUEUES),
    ("waitTimeMillsInHeartbeatQueue", QUEUES),
    ("waitTimeMillsInTransactionQueue", QUEUES),
    ("osPageCacheBusyTimeOutMills", QUEUES),
    (
        "useReentrantLockWhenPutMessage",
        "one writer task appends; there is no put lock",
    ),
    ("flushIntervalConsumeQueue", FLUSH),
    ("flushCommitLogLeastPages", FLUSH),
    ("flushConsumeQueueLeastPages", FLUSH),
    ("flushCommitLogThoroughInterval", FLUSH),
    ("flushConsumeQueueThoroughInterval", FLUSH),
    ("commitIntervalCommitLog", FLUSH),
    ("commitCommitLogLeastPages", FLUSH),
    (
        "fetchNamesrvAddrByAddressServer",
        "no address server: give namesrvAddr",
    ),
    (
        "fetchNameSrvAddrByDnsLookup",
        "no address server: give namesrvAddr",
    ),
    ("enableCalcFilterBitMap", BLOOM),
    ("expectConsumerNumUseFilter", BLOOM),
    ("maxErrorRateOfBloomFilter", BLOOM),
    ("filterDataCleanTimeSpan", BLOOM),
    ("enableConsumeQueueExt", BLOOM),
    ("highSpeedMode", COMMERCIAL),
    ("commercialBaseCount", COMMERCIAL),
    ("commercialSizePerMsg", COMMERCIAL),
    ("accountStatsEnable", COMMERCIAL),
    ("accountStatsPrintZeroValues", COMMERCIAL),
    (
        "transferMsgByHeap",
        "pull answers are always built from the mapped files",
    ),
    ("isolateLogEnable", "Basalt logs to stderr"),
];

const THREADS: &str = "requests run on one async runtime, not per-request thread pools";
const QUEUES: &str = "no request queues: load is bounded by serverMaxInflightRequests";
const FLUSH: &str = "group commit flushes what is written; queues are flushed with the CommitLog";
const BLOOM: &str = "no ConsumeQueue extension or bloom bit maps: filters run per message";
const COMMERCIAL: &str = "RocketMQ's commercial accounting is not implemented";

/// Old spellings `set` accepts, with the key they stand for.
const ALIASES: &[(&str, &str)] = &[
    ("warmMapedFileEnable", "warmMappedFileEnable"),
    ("haSlaveFallbehindMax", "haMaxGapNotInSync"),
    ("dLegerPreferredLeader", "preferredLeaderId"),
];

/// What Basalt does with one configuration key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    /// Applied.
    Known,
    /// A RocketMQ key Basalt ignores on purpose, with the reason.
    Ignored(&'static str),
    /// Not a key Basalt or RocketMQ knows; the closest known key, if one
    /// is close enough to be a likely typo.
    Unknown { suggestion: Option<String> },
}

/// Whether `set` applies `key` (probed on a throwaway config: an unknown
/// key is the only case `set` answers `Ok(false)`).
pub fn is_known_key(key: &str) -> bool {
    !matches!(BrokerConfig::default().set(key, ""), Ok(false))
}

/// The canonical name of a key: itself, or what an alias stands for.
pub fn canonical_key(key: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == key)
        .map_or(key, |(_, k)| k)
}

/// Sorts a key into [`KeyKind`].
pub fn classify_key(key: &str) -> KeyKind {
    if is_known_key(key) {
        return KeyKind::Known;
    }
    if let Some((_, reason)) = IGNORED_KEYS.iter().find(|(k, _)| *k == key) {
        return KeyKind::Ignored(reason);
    }
    KeyKind::Unknown {
        suggestion: closest_key(key),
    }
}

/// The known (or deliberately ignored) key nearest to `key` by edit
/// distance, ignoring case, when it is within a third of the key's length
/// (at least 1, at most 4 edits).
pub fn closest_key(key: &str) -> Option<String> {
    let lower = key.to_ascii_lowercase();
    let limit = (key.chars().count() / 3).clamp(1, 4);
    let props = BrokerConfig::default().properties();
    let candidates = props
        .iter()
        .map(|(k, _)| *k)
        .chain(IGNORED_KEYS.iter().map(|(k, _)| *k));
    candidates
        .map(|c| (edit_distance(&lower, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}

/// Levenshtein distance over chars (insert, delete, substitute = 1).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The warning text for a key that is not applied, `None` for a known key.
/// `origin` says where the key was found ("broker.conf", "--set").
pub fn key_warning(key: &str, origin: &str) -> Option<String> {
    match classify_key(key) {
        KeyKind::Known => None,
        KeyKind::Ignored(reason) => Some(format!(
            "{key} ({origin}) is a RocketMQ setting Basalt ignores: {reason}"
        )),
        KeyKind::Unknown {
            suggestion: Some(s),
        } => Some(format!(
            "unknown setting {key} ({origin}) ignored; did you mean {s}?"
        )),
        KeyKind::Unknown { suggestion: None } => {
            Some(format!("unknown setting {key} ({origin}) ignored"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_gets_the_closest_key() {
        assert_eq!(
            closest_key("flushDiskTyp").as_deref(),
            Some("flushDiskType")
        );
        assert_eq!(closest_key("listenport").as_deref(), Some("listenPort"));
        assert_eq!(
            closest_key("brokerClustername").as_deref(),
            Some("brokerClusterName")
        );
        assert_eq!(closest_key("completelyDifferentThing"), None);
        let w = key_warning("flushDiskTyp", "broker.conf").unwrap();
        assert!(w.contains("did you mean flushDiskType?"), "{w}");
    }

    #[test]
    fn keys_are_sorted_into_kinds() {
        assert_eq!(classify_key("flushDiskType"), KeyKind::Known);
        assert_eq!(classify_key("warmMapedFileEnable"), KeyKind::Known);
        assert!(matches!(
            classify_key("sendMessageThreadPoolNums"),
            KeyKind::Ignored(_)
        ));
        assert!(matches!(classify_key("nope"), KeyKind::Unknown { .. }));
        assert!(key_warning("brokerName", "x").is_none());
    }

    #[test]
    fn ignored_keys_are_not_applied_keys() {
        for (k, _) in IGNORED_KEYS {
            assert!(
                !is_known_key(k),
                "{k} is applied; drop it from IGNORED_KEYS"
            );
        }
    }

    #[test]
    fn aliases_are_applied_and_point_at_a_property() {
        let props = BrokerConfig::default().properties();
        for (alias, key) in ALIASES {
            assert!(is_known_key(alias), "{alias}");
            assert!(props.iter().any(|(k, _)| k == key), "{key}");
            assert_eq!(canonical_key(alias), *key);
        }
    }

    /// Every key `set` matches (read from its source) is a property, so
    /// print-config shows it and it can be suggested.
    #[test]
    fn every_applied_key_is_a_property() {
        let src = include_str!("config.rs");
        let body = src
            .split("pub fn set(")
            .nth(1)
            .and_then(|s| s.split("_ => return Ok(false)").next())
            .expect("set() in config.rs");
        let props = BrokerConfig::default().properties();
        let mut seen = 0;
        for line in body.lines() {
            let l = line.trim_start();
            if !l.starts_with('"') || !l.contains("=>") {
                continue;
            }
            for key in l.split("=>").next().unwrap_or("").split('|') {
                let key = key.trim().trim_matches('"');
                seen += 1;
                assert!(
                    props.iter().any(|(k, _)| *k == canonical_key(key)),
                    "{key} is applied but not in properties()"
                );
            }
        }
        assert!(seen > 70, "only {seen} keys found in set()");
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
