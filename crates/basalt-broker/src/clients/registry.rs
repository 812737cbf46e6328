//! Connected clients: consumer groups (members, subscriptions) and producer
//! groups, kept from HEART_BEAT, dropped on UNREGISTER_CLIENT, channel close
//! or after `channelExpiredTimeout` without a heartbeat.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use basalt_remoting::Channel;
use basalt_remoting::protocol::{ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData};

/// What a consumer group subscribes to on one topic, as its heartbeats
/// said: the broker's own copy of the wire's `SubscriptionData`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub topic: String,
    /// `TAG` or `SQL92`.
    pub expression_type: String,
    /// The expression as the client wrote it (`*`, `A || B`, SQL).
    pub expression: String,
    /// The tags of a TAG expression, and their Java hash codes.
    pub tags: Vec<String>,
    pub tag_codes: Vec<i32>,
    /// The client's version stamp of this subscription.
    pub version: i64,
}

impl Subscription {
    pub fn from_wire(s: SubscriptionData) -> Self {
        Subscription {
            topic: s.topic,
            expression_type: s.expression_type,
            expression: s.sub_string,
            tags: s.tags_set,
            tag_codes: s.code_set,
            version: s.sub_version,
        }
    }

    pub fn to_wire(&self) -> SubscriptionData {
        SubscriptionData {
            class_filter_mode: false,
            code_set: self.tag_codes.clone(),
            expression_type: self.expression_type.clone(),
            sub_string: self.expression.clone(),
            sub_version: self.version,
            tags_set: self.tags.clone(),
            topic: self.topic.clone(),
        }
    }
}
use parking_lot::RwLock;

/// One connected client of a group.
#[derive(Debug, Clone)]
pub struct ClientChannel {
    pub channel: Channel,
    pub client_id: String,
    pub last_update: Instant,
}

/// A consumer group: its members and what they subscribe to.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    /// By channel id.
    pub members: HashMap<u64, ClientChannel>,
    pub subscriptions: HashMap<String, Subscription>,
    pub consume_type: ConsumeType,
    pub message_model: MessageModel,
    pub consume_from_where: ConsumeFromWhere,
}

impl ConsumerGroup {
    /// Client ids of live members, sorted.
    pub fn client_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.members.values().map(|m| m.client_id.clone()).collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// All consumer and producer groups. See the module documentation.
#[derive(Debug, Default)]
pub struct ClientManager {
    consumers: RwLock<HashMap<String, ConsumerGroup>>,
    producers: RwLock<HashMap<String, HashMap<u64, ClientChannel>>>,
}

impl ClientManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or refreshes) a consumer. Returns true when the group's set
    /// of members changed (its consumers must rebalance).
    pub fn register_consumer(
        &self,
        group: &str,
        client: ClientChannel,
        consume_type: ConsumeType,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere,
        subscriptions: Vec<SubscriptionData>,
    ) -> bool {
        let mut all = self.consumers.write();
        let g = all
            .entry(group.to_string())
            .or_insert_with(|| ConsumerGroup {
                members: HashMap::new(),
                subscriptions: HashMap::new(),
                consume_type: consume_type.clone(),
                message_model: message_model.clone(),
                consume_from_where: consume_from_where.clone(),
            });
        g.consume_type = consume_type;
        g.message_model = message_model;
        g.consume_from_where = consume_from_where;
        let before = g.client_ids();
        g.members.insert(client.channel.id(), client);
        for s in subscriptions.into_iter().map(Subscription::from_wire) {
            match g.subscriptions.get(&s.topic) {
                // Keep the newest version of each topic's subscription.
                Some(old) if old.version > s.version => {}
                _ => {
                    g.subscriptions.insert(s.topic.clone(), s);
                }
            }
        }
        before != g.client_ids()
    }

    /// Removes a client from a consumer group. Returns true if that changed it.
    pub fn unregister_consumer(&self, group: &str, channel_id: u64) -> bool {
        let mut all = self.consumers.write();
        let Some(g) = all.get_mut(group) else {
            return false;
        };
        let before = g.client_ids();
        g.members.remove(&channel_id);
        let changed = before != g.client_ids();
        if g.members.is_empty() {
            all.remove(group);
        }
        changed
    }

    pub fn register_producer(&self, group: &str, client: ClientChannel) {
        self.producers
            .write()
            .entry(group.to_string())
            .or_default()
            .insert(client.channel.id(), client);
    }

    pub fn unregister_producer(&self, group: &str, channel_id: u64) {
        let mut all = self.producers.write();
        if let Some(g) = all.get_mut(group) {
            g.remove(&channel_id);
            if g.is_empty() {
                all.remove(group);
            }
        }
    }

    /// Forgets a closed connection everywhere. Returns the consumer groups
    /// whose members changed.
    pub fn channel_closed(&self, channel_id: u64) -> Vec<String> {
        let groups: Vec<String> = self
            .consumers
            .read()
            .iter()
            .filter(|(_, g)| g.members.contains_key(&channel_id))
            .map(|(n, _)| n.clone())
            .collect();
        let changed = groups
            .into_iter()
            .filter(|g| self.unregister_consumer(g, channel_id))
            .collect();
        let mut prods = self.producers.write();
        prods.retain(|_, m| {
            m.remove(&channel_id);
            !m.is_empty()
        });
        changed
    }

    /// Drops members silent for longer than `timeout` (closing their
    /// channels). Returns the consumer groups that changed.
    pub fn expire(&self, timeout: Duration) -> Vec<String> {
        let now = Instant::now();
        let mut expired = Vec::new();
        for (name, g) in self.consumers.read().iter() {
            for (id, m) in &g.members {
                if now.duration_since(m.last_update) > timeout {
                    expired.push((name.clone(), *id, m.channel.clone()));
                }
            }
        }
        let mut changed = Vec::new();
        for (group, id, ch) in expired {
            tracing::warn!(group, client = %ch.remote_addr(), "consumer expired without heartbeat");
            ch.close();
            if self.unregister_consumer(&group, id) {
                changed.push(group);
            }
        }
        let mut prods = self.producers.write();
        prods.retain(|_, m| {
            m.retain(|_, c| now.duration_since(c.last_update) <= timeout);
            !m.is_empty()
        });
        changed.sort();
        changed.dedup();
        changed
    }

    pub fn consumer_group(&self, group: &str) -> Option<ConsumerGroup> {
        self.consumers.read().get(group).cloned()
    }

    pub fn subscription(&self, group: &str, topic: &str) -> Option<Subscription> {
        self.consumers
            .read()
            .get(group)
            .and_then(|g| g.subscriptions.get(topic).cloned())
    }

    /// Member channels of a consumer group.
    pub fn consumer_channels(&self, group: &str) -> Vec<Channel> {
        self.consumers
            .read()
            .get(group)
            .map(|g| g.members.values().map(|m| m.channel.clone()).collect())
            .unwrap_or_default()
    }

    pub fn consumer_group_names(&self) -> Vec<String> {
        self.consumers.read().keys().cloned().collect()
    }

    pub fn producer_group_names(&self) -> Vec<String> {
        self.producers.read().keys().cloned().collect()
    }

    /// An open connection of a producer group, picked at random among its
    /// members (RocketMQ's `getAvailableChannel`): where a transaction
    /// check goes.
    pub fn producer_channel(&self, group: &str) -> Option<Channel> {
        let all = self.producers.read();
        let open: Vec<&ClientChannel> = all
            .get(group)?
            .values()
            .filter(|c| !c.channel.is_closed())
            .collect();
        if open.is_empty() {
            return None;
        }
        let pick = rand::random_range(0..open.len());
        Some(open[pick].channel.clone())
    }

    /// The open connection a client (by client id) heartbeats over, as a
    /// producer or else as a consumer: where a reply to its request goes.
    pub fn client_channel(&self, client_id: &str) -> Option<Channel> {
        let find = |members: &mut dyn Iterator<Item = &ClientChannel>| {
            members
                .filter(|c| c.client_id == client_id && !c.channel.is_closed())
                .max_by_key(|c| c.last_update)
                .map(|c| c.channel.clone())
        };
        let from_producers = find(&mut self.producers.read().values().flat_map(|m| m.values()));
        from_producers.or_else(|| {
            find(
                &mut self
                    .consumers
                    .read()
                    .values()
                    .flat_map(|g| g.members.values()),
            )
        })
    }
}
