//! The narrow handles request processors work through. Each holds only the
//! parts of the broker its requests need; none holds the whole broker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use basalt_common::msgid::UniqKeyGenerator;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::request;
use basalt_remoting::header::{CommandHeader, NotifyConsumerIdsChangedRequestHeader};
use basalt_store::MessageStore;
use basalt_store::dispatch::DelayLevels;

use crate::clients::locks::LockManager;
use crate::clients::registry::ClientManager;
use crate::clients::waiters::PullWaiters;
use crate::config::BrokerConfig;
use crate::filter::FilterCache;
use crate::live_config::LiveBrokerConfig;
use crate::metadata::groups::SubscriptionGroupManager;
use crate::metadata::offsets::ConsumerOffsetManager;
use crate::metadata::topics::TopicConfigManager;
use crate::registration::Registrar;
use crate::replication::Replication;
use crate::schedule::{DelayOffsets, TimerService};
use crate::transaction::Transactions;
use crate::writer::MessageWriter;

/// Counters for runtime info.
#[derive(Debug, Default)]
pub struct BrokerStats {
    pub put_messages: AtomicU64,
    pub put_bytes: AtomicU64,
    pub get_messages: AtomicU64,
    pub get_bytes: AtomicU64,
    pub put_failures: AtomicU64,
    /// Pulls answered without messages (Java `getMessageTimesTotalMiss`).
    pub get_misses: AtomicU64,
    /// Java's sampled stats items: per topic, per topic and group, per
    /// broker (VIEW_BROKER_STATS_DATA, `consumeTps`).
    pub items: crate::stats_items::StatsItems,
    /// What the Prometheus exporter and the dashboard read.
    pub metrics: crate::metrics::BrokerMetrics,
}

impl BrokerStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// What producers' requests reach (send, batch, send-back): topics to
/// route or auto-create, group retry settings, and the write path.
#[derive(Debug, Clone)]
pub struct SendPath {
    pub(crate) config: Arc<BrokerConfig>,
    pub(crate) live: Arc<LiveBrokerConfig>,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) writer: MessageWriter,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) registrar: Arc<Registrar>,
    pub(crate) uniq: Arc<UniqKeyGenerator>,
    pub(crate) delays: DelayLevels,
    pub(crate) stats: Arc<BrokerStats>,
}

/// What pulls reach: the store's queues, topic and group settings, the
/// consumer's subscription (or the compiled selectors of pulls that bring
/// their own), offsets it commits on the way, held pulls.
#[derive(Debug, Clone)]
pub struct PullPath {
    pub(crate) config: Arc<BrokerConfig>,
    pub(crate) live: Arc<LiveBrokerConfig>,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) replication: Arc<Replication>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) clients: Arc<ClientManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
    pub(crate) waiters: Arc<PullWaiters>,
    pub(crate) filter_cache: Arc<FilterCache>,
    pub(crate) stats: Arc<BrokerStats>,
    pub(crate) shutting_down: Arc<AtomicBool>,
}

/// What clients' membership requests reach: heartbeats, consumer lists,
/// offsets, queue locks.
#[derive(Debug, Clone)]
pub struct ClientPath {
    pub(crate) config: Arc<BrokerConfig>,
    pub(crate) live: Arc<LiveBrokerConfig>,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) replication: Arc<Replication>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) clients: Arc<ClientManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
    pub(crate) locks: Arc<LockManager>,
    pub(crate) registrar: Arc<Registrar>,
    pub(crate) request_modes: Arc<crate::metadata::request_modes::RequestModes>,
}

/// What operators' requests reach: everything, read-mostly.
#[derive(Debug, Clone)]
pub struct AdminPath {
    pub(crate) config: Arc<BrokerConfig>,
    pub(crate) live: Arc<LiveBrokerConfig>,
    pub(crate) store: Arc<MessageStore>,
    pub(crate) replication: Arc<Replication>,
    pub(crate) topics: Arc<TopicConfigManager>,
    pub(crate) groups: Arc<SubscriptionGroupManager>,
    pub(crate) offsets: Arc<ConsumerOffsetManager>,
    pub(crate) clients: Arc<ClientManager>,
    pub(crate) waiters: Arc<PullWaiters>,
    pub(crate) delay_offsets: Arc<DelayOffsets>,
    pub(crate) timers: Option<Arc<TimerService>>,
    pub(crate) registrar: Arc<Registrar>,
    pub(crate) stats: Arc<BrokerStats>,
    pub(crate) rates: Arc<crate::runtime_stats::RateSampler>,
    pub(crate) transactions: Arc<Transactions>,
    pub(crate) started_at: Instant,
}

/// What reply messages (request-reply) reach: the send path to store them
/// and the connected clients to push them to.
#[derive(Debug, Clone)]
pub struct ReplyPath {
    pub(crate) send: SendPath,
    pub(crate) clients: Arc<ClientManager>,
}

impl ClientPath {
    /// Tells every member of a consumer group that the membership changed.
    pub fn notify_consumer_ids_changed(&self, group: &str) {
        if !self.live.notify_consumer_ids_changed_enable() {
            return;
        }
        if let Some(g) = self.groups.get(group)
            && !g.notify_consumer_ids_changed_enable
        {
            return;
        }
        let header = NotifyConsumerIdsChangedRequestHeader {
            consumer_group: group.to_string(),
        };
        for ch in self.clients.consumer_channels(group) {
            let cmd = RemotingCommand::request(request::NOTIFY_CONSUMER_IDS_CHANGED)
                .with_ext(header.to_ext());
            tokio::spawn(async move {
                if let Err(e) = ch.send_oneway(cmd).await {
                    tracing::debug!(error = %e, "could not notify a consumer");
                }
            });
        }
    }
}
