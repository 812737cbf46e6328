//! The broker settings an operator may change while the broker runs
//! (UPDATE_BROKER_CONFIG, docs/protocol.md#broker-settings). Everything
//! else in [`BrokerConfig`] is fixed at start: it sized files, bound ports
//! or chose the replication mode.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use basalt_common::constants::perm;
use parking_lot::Mutex;

use crate::config::{BrokerConfig, ConfigError};

/// The keys [`LiveBrokerConfig::update`] accepts, in `broker.conf` spelling.
pub const LIVE_KEYS: &[&str] = &[
    "maxMessageSize",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "brokerPermission",
    "rejectTransactionMessage",
    "longPollingEnable",
    "shortPollingTimeMills",
    "maxLongPollingSuspendMillis",
    "slaveReadEnable",
    "notifyConsumerIdsChangedEnable",
];

/// Keys Java's `configBlackList` refuses as well; never changeable.
const BLACK_LIST: &[&str] = &["configBlackList", "brokerConfigPath"];

/// Why an update was refused; nothing of it was applied.
#[derive(Debug, thiserror::Error)]
pub enum LiveConfigError {
    #[error("{key} is not a broker setting")]
    UnknownKey { key: String },
    #[error(
        "{key} cannot change while the broker runs (it is fixed at start); \
         edit broker.conf and restart. Changeable keys: {}",
        LIVE_KEYS.join(", ")
    )]
    NotLive { key: String },
    #[error(transparent)]
    Invalid(#[from] ConfigError),
}

/// The live values, read on every request with relaxed atomics. Invariant:
/// `max_message_size` stays within 1..=`max_message_size_ceiling` (the
/// limit the store was opened with); `broker_permission` only holds the
/// read and write bits. Updates are serialised by `update_lock`, so the
/// `version` counter and the values move together.
#[derive(Debug)]
pub struct LiveBrokerConfig {
    max_message_size: AtomicUsize,
    max_message_size_ceiling: usize,
    auto_create_topic_enable: AtomicBool,
    auto_create_subscription_group: AtomicBool,
    broker_permission: AtomicI32,
    reject_transaction_message: AtomicBool,
    long_polling_enable: AtomicBool,
    short_polling_ms: AtomicU64,
    max_long_polling_suspend_ms: AtomicU64,
    slave_read_enable: AtomicBool,
    notify_consumer_ids_changed_enable: AtomicBool,
    /// Accepted updates so far (GET_BROKER_CONFIG's data version counter).
    version: AtomicU64,
    /// Accepted updates that changed `brokerPermission`.
    permission_version: AtomicU64,
    update_lock: Mutex<()>,
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

impl LiveBrokerConfig {
    /// The live values as `config` sets them at start.
    pub fn new(config: &BrokerConfig) -> Self {
        let ceiling = config.store_config().max_message_size.max(1);
        LiveBrokerConfig {
            max_message_size: AtomicUsize::new(config.max_message_size.clamp(1, ceiling)),
            max_message_size_ceiling: ceiling,
            auto_create_topic_enable: AtomicBool::new(config.auto_create_topic_enable),
            auto_create_subscription_group: AtomicBool::new(config.auto_create_subscription_group),
            broker_permission: AtomicI32::new(config.broker_permission),
            reject_transaction_message: AtomicBool::new(config.reject_transaction_message),
            long_polling_enable: AtomicBool::new(config.long_polling_enable),
            short_polling_ms: AtomicU64::new(millis(config.short_polling_time_mills)),
            max_long_polling_suspend_ms: AtomicU64::new(millis(config.max_long_polling_suspend)),
            slave_read_enable: AtomicBool::new(config.slave_read_enable),
            notify_consumer_ids_changed_enable: AtomicBool::new(
                config.notify_consumer_ids_changed_enable,
            ),
            version: AtomicU64::new(0),
            permission_version: AtomicU64::new(0),
            update_lock: Mutex::new(()),
        }
    }

    pub fn max_message_size(&self) -> usize {
        self.max_message_size.load(Ordering::Relaxed)
    }
    pub fn auto_create_topic_enable(&self) -> bool {
        self.auto_create_topic_enable.load(Ordering::Relaxed)
    }
    pub fn auto_create_subscription_group(&self) -> bool {
        self.auto_create_subscription_group.load(Ordering::Relaxed)
    }
    pub fn broker_permission(&self) -> i32 {
        self.broker_permission.load(Ordering::Relaxed)
    }
    pub fn reject_transaction_message(&self) -> bool {
        self.reject_transaction_message.load(Ordering::Relaxed)
    }
    pub fn long_polling_enable(&self) -> bool {
        self.long_polling_enable.load(Ordering::Relaxed)
    }
    pub fn short_polling_time(&self) -> Duration {
        Duration::from_millis(self.short_polling_ms.load(Ordering::Relaxed))
    }
    pub fn max_long_polling_suspend(&self) -> Duration {
        Duration::from_millis(self.max_long_polling_suspend_ms.load(Ordering::Relaxed))
    }
    pub fn slave_read_enable(&self) -> bool {
        self.slave_read_enable.load(Ordering::Relaxed)
    }
    pub fn notify_consumer_ids_changed_enable(&self) -> bool {
        self.notify_consumer_ids_changed_enable
            .load(Ordering::Relaxed)
    }
    /// How many updates were accepted since start.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }
    /// How many accepted updates changed `brokerPermission` (Java bumps
    /// the topic table's data version for those alone).
    pub fn permission_version(&self) -> u64 {
        self.permission_version.load(Ordering::Relaxed)
    }

    /// `base` with the live values in place of the start-up ones: what the
    /// broker runs with now.
    pub fn current(&self, base: &BrokerConfig) -> BrokerConfig {
        let mut c = base.clone();
        c.max_message_size = self.max_message_size();
        c.auto_create_topic_enable = self.auto_create_topic_enable();
        c.auto_create_subscription_group = self.auto_create_subscription_group();
        c.broker_permission = self.broker_permission();
        c.reject_transaction_message = self.reject_transaction_message();
        c.long_polling_enable = self.long_polling_enable();
        c.short_polling_time_mills = self.short_polling_time();
        c.max_long_polling_suspend = self.max_long_polling_suspend();
        c.slave_read_enable = self.slave_read_enable();
        c.notify_consumer_ids_changed_enable = self.notify_consumer_ids_changed_enable();
        c
    }

    /// Applies `pairs` all together or not at all: every key must be one of
    /// [`LIVE_KEYS`] and every value must parse and pass the checks start
    /// applies. Returns the keys whose value changed.
    pub fn update(
        &self,
        base: &BrokerConfig,
        pairs: &[(String, String)],
    ) -> Result<Vec<String>, LiveConfigError> {
        let _serialised = self.update_lock.lock();
        let before = self.current(base);
        let mut next = before.clone();
        for (key, value) in pairs {
            if BLACK_LIST.contains(&key.as_str()) {
                return Err(LiveConfigError::NotLive { key: key.clone() });
            }
            let mut probe = next.clone();
            if !probe.set(key, value)? {
                return Err(LiveConfigError::UnknownKey { key: key.clone() });
            }
            if !LIVE_KEYS.contains(&key.as_str()) {
                return Err(LiveConfigError::NotLive { key: key.clone() });
            }
            next = probe;
        }
        self.check(&next)?;
        let changed: Vec<String> = LIVE_KEYS
            .iter()
            .filter(|k| live_value(&before, k) != live_value(&next, k))
            .map(|k| k.to_string())
            .collect();
        self.store(&next);
        self.version.fetch_add(1, Ordering::Relaxed);
        if changed.iter().any(|k| k == "brokerPermission") {
            self.permission_version.fetch_add(1, Ordering::Relaxed);
        }
        Ok(changed)
    }

    /// The bounds a live value must keep.
    fn check(&self, next: &BrokerConfig) -> Result<(), ConfigError> {
        let invalid = |key: &str, value: String, reason: String| ConfigError::Invalid {
            key: key.into(),
            value,
            reason,
        };
        let ceiling = self.max_message_size_ceiling;
        if !(1..=ceiling).contains(&next.max_message_size) {
            return Err(invalid(
                "maxMessageSize",
                next.max_message_size.to_string(),
                format!(
                    "must be in 1..={ceiling} (the limit the store was opened with; \
                     raising it needs a restart)"
                ),
            ));
        }
        if next.broker_permission & !(perm::READ | perm::WRITE) != 0 {
            return Err(invalid(
                "brokerPermission",
                next.broker_permission.to_string(),
                "must combine only READ (4) and WRITE (2): 0, 2, 4 or 6".into(),
            ));
        }
        let max_hold = Duration::from_secs(3600);
        for (key, d) in [
            ("shortPollingTimeMills", next.short_polling_time_mills),
            ("maxLongPollingSuspendMillis", next.max_long_polling_suspend),
        ] {
            if d > max_hold {
                return Err(invalid(
                    key,
                    d.as_millis().to_string(),
                    "must be at most 3600000 (one hour)".into(),
                ));
            }
        }
        Ok(())
    }

    fn store(&self, c: &BrokerConfig) {
        let r = Ordering::Relaxed;
        self.max_message_size.store(c.max_message_size, r);
        self.auto_create_topic_enable
            .store(c.auto_create_topic_enable, r);
        self.auto_create_subscription_group
            .store(c.auto_create_subscription_group, r);
        self.broker_permission.store(c.broker_permission, r);
        self.reject_transaction_message
            .store(c.reject_transaction_message, r);
        self.long_polling_enable.store(c.long_polling_enable, r);
        self.short_polling_ms
            .store(millis(c.short_polling_time_mills), r);
        self.max_long_polling_suspend_ms
            .store(millis(c.max_long_polling_suspend), r);
        self.slave_read_enable.store(c.slave_read_enable, r);
        self.notify_consumer_ids_changed_enable
            .store(c.notify_consumer_ids_changed_enable, r);
    }
}

/// One live key's value in `broker.conf` text.
fn live_value(c: &BrokerConfig, key: &str) -> Option<String> {
    c.properties()
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        crate::config::properties_pairs(text)
    }

    #[test]
    fn live_keys_change_together_and_report_what_changed() {
        let base = BrokerConfig::default();
        let live = LiveBrokerConfig::new(&base);
        let changed = live
            .update(
                &base,
                &pairs("maxMessageSize=1024\nbrokerPermission=4\nlongPollingEnable=true"),
            )
            .unwrap();
        assert_eq!(changed, vec!["maxMessageSize", "brokerPermission"]);
        assert_eq!(live.max_message_size(), 1024);
        assert_eq!(live.broker_permission(), 4);
        assert_eq!(live.version(), 1);
        assert_eq!(live.permission_version(), 1);
        let now = live.current(&base);
        assert_eq!(now.max_message_size, 1024);
        assert_eq!(now.broker_name, base.broker_name);
        // Another key alone leaves the permission version (and so the topic
        // table's registered version) as it was.
        live.update(&base, &pairs("maxMessageSize=2048")).unwrap();
        assert_eq!((live.version(), live.permission_version()), (2, 1));
    }

    #[test]
    fn a_fixed_key_refuses_the_whole_update() {
        let base = BrokerConfig::default();
        let live = LiveBrokerConfig::new(&base);
        let e = live
            .update(&base, &pairs("maxMessageSize=1024\nlistenPort=1234"))
            .unwrap_err();
        assert!(matches!(&e, LiveConfigError::NotLive { key } if key == "listenPort"));
        assert!(e.to_string().contains("restart"), "{e}");
        assert_eq!(live.max_message_size(), base.max_message_size);
        assert_eq!(live.version(), 0);
        let e = live.update(&base, &pairs("noSuchKey=1")).unwrap_err();
        assert!(matches!(e, LiveConfigError::UnknownKey { .. }));
        let e = live.update(&base, &pairs("configBlackList=x")).unwrap_err();
        assert!(matches!(e, LiveConfigError::NotLive { .. }));
    }

    #[test]
    fn values_are_bounded() {
        let base = BrokerConfig::default();
        let live = LiveBrokerConfig::new(&base);
        let ceiling = base.store_config().max_message_size;
        for bad in [
            format!("maxMessageSize={}", ceiling + 1),
            "maxMessageSize=0".into(),
            "maxMessageSize=-5".into(),
            "brokerPermission=7".into(),
            "brokerPermission=-1".into(),
            "autoCreateTopicEnable=maybe".into(),
            "maxLongPollingSuspendMillis=99999999999".into(),
        ] {
            let e = live.update(&base, &pairs(&bad)).unwrap_err();
            assert!(matches!(e, LiveConfigError::Invalid(_)), "{bad}: {e}");
        }
        assert_eq!(live.version(), 0);
        assert_eq!(live.broker_permission(), 6);
    }
}
