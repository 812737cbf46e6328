//! Connected clients: consumer groups (members, subscriptions) and producer
//! groups, kept from HEART_BEAT, dropped on UNREGISTER_CLIENT, channel close
//! or after `channelExpiredTimeout` without a heartbeat.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use basalt_remoting::Channel;
use basalt_remoting::protocol::{ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData};

use crate::filter::{FilterError, SubscriptionFilter};

/// What a consumer group subscribes to on one topic, as its heartbeats
/// said: the broker's own copy of the wire's `SubscriptionData`, with its
/// expression compiled. Invariant: `filter` is what `expression_type`,
/// `expression` and `tags` compile to; it is built once per version.
#[derive(Debug, Clone)]
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
    /// The compiled expression, or why it does not compile (a heartbeat
    /// is accepted either way, as in RocketMQ; pulls are refused).
    pub filter: Result<Arc<SubscriptionFilter>, FilterError>,
}

impl Subscription {
    pub fn from_wire(s: SubscriptionData) -> Self {
        let filter =
            SubscriptionFilter::for_subscription(&s.expression_type, &s.sub_string, &s.tags_set)
                .map(Arc::new);
        Subscription {
            topic: s.topic,
            expression_type: s.expression_type,
            expression: s.sub_string,
            tags: s.tags_set,
            tag_codes: s.code_set,
            version: s.sub_version,
            filter,
        }
    }

    /// Whether `s` says exactly what this subscription says (so its
    /// compiled filter can be kept).
    fn same_as(&self, s: &SubscriptionData) -> bool {
        self.version == s.sub_version
            && self.expression_type == s.expression_type
            && self.expression == s.sub_string
            && self.tags == s.tags_set
            && self.tag_codes == s.code_set
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

/// Rebuilds a group's subscription table from what its live members hold
/// (`held`: each member's latest heartbeat set). A topic no live member
/// holds is removed; for a topic held by several, the highest version
/// wins, and on a tie the entry already in the table stays (Java replaces a
/// topic's subscription only with a strictly newer `subVersion`). An entry
/// whose subscription is unchanged keeps its compiled filter (filters are
/// compiled once per version, not per heartbeat). Returns true when the
/// set of topics changed (Java's `updateSubscription` result).
fn rebuild_subscriptions(
    group: &str,
    table: &mut HashMap<String, Subscription>,
    held: &HashMap<u64, Vec<SubscriptionData>>,
) -> bool {
    let mut newest: HashMap<&str, &SubscriptionData> = HashMap::new();
    for s in held.values().flatten() {
        match newest.get(s.topic.as_str()) {
            Some(best) if best.sub_version > s.sub_version => {}
            Some(best)
                if best.sub_version == s.sub_version
                    && table.get(&s.topic).is_some_and(|t| t.same_as(best)) => {}
            _ => {
                newest.insert(&s.topic, s);
            }
        }
    }
    let before = table.len();
    table.retain(|topic, old| {
        let keep = newest.contains_key(topic.as_str());
        if !keep {
            tracing::info!(group, topic = %topic, expression = %old.expression,
                "subscription removed: no live member of the group holds it");
        }
        keep
    });
    let mut added = false;
    for (topic, s) in newest {
        match table.get(topic) {
            Some(old) if old.same_as(s) => {}
            old => {
                added |= old.is_none();
                let s = Subscription::from_wire(s.clone());
                if let Err(e) = &s.filter {
                    tracing::warn!(group, topic = %s.topic, expression = %s.expression, error = %e,
                        "subscription expression does not compile; its pulls will be refused");
                }
                table.insert(s.topic.clone(), s);
            }
        }
    }
    added || table.len() != before
}

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
    /// The group's subscriptions: every topic some live member holds
    /// (see `rebuild_subscriptions`).
    pub subscriptions: HashMap<String, Subscription>,
    /// By channel id: the subscriptions of each member's latest heartbeat.
    pub held: HashMap<u64, Vec<SubscriptionData>>,
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

    /// Registers (or refreshes) a consumer; its heartbeat's subscriptions
    /// replace what it held before. Returns true when the group's set of
    /// members or of subscribed topics changed (its consumers must
    /// rebalance; Java's `registerConsumer` notifies on both).
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
                held: HashMap::new(),
                consume_type: consume_type.clone(),
                message_model: message_model.clone(),
                consume_from_where: consume_from_where.clone(),
            });
        g.consume_type = consume_type;
        g.message_model = message_model;
        g.consume_from_where = consume_from_where;
        let before = g.client_ids();
        let id = client.channel.id();
        g.members.insert(id, client);
        g.held.insert(id, subscriptions);
        let topics_changed = rebuild_subscriptions(group, &mut g.subscriptions, &g.held);
        before != g.client_ids() || topics_changed
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
        } else if g.held.remove(&channel_id).is_some() {
            // What only the departed member held goes with it.
            rebuild_subscriptions(group, &mut g.subscriptions, &g.held);
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

    /// What a pull needs of its group, without copying the group: the
    /// message model and the topic's subscription. `None` when the group
    /// has no live member.
    pub fn pull_view(
        &self,
        group: &str,
        topic: &str,
    ) -> Option<(MessageModel, Option<Subscription>)> {
        self.consumers
            .read()
            .get(group)
            .map(|g| (g.message_model.clone(), g.subscriptions.get(topic).cloned()))
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

    /// The open connections of a producer group.
    pub fn producer_members(&self, group: &str) -> Vec<ClientChannel> {
        self.producers
            .read()
            .get(group)
            .map(|m| {
                m.values()
                    .filter(|c| !c.channel.is_closed())
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(topic: &str, expression: &str, version: i64) -> SubscriptionData {
        SubscriptionData {
            topic: topic.into(),
            expression_type: "SQL92".into(),
            sub_string: expression.into(),
            sub_version: version,
            ..Default::default()
        }
    }

    fn compiled(table: &HashMap<String, Subscription>, topic: &str) -> Arc<SubscriptionFilter> {
        Arc::clone(table[topic].filter.as_ref().expect("compiles"))
    }

    /// Member `id`'s heartbeat `subs` into `held`, then the rebuild.
    fn beat(
        table: &mut HashMap<String, Subscription>,
        held: &mut HashMap<u64, Vec<SubscriptionData>>,
        id: u64,
        subs: Vec<SubscriptionData>,
    ) -> bool {
        held.insert(id, subs);
        rebuild_subscriptions("G", table, held)
    }

    fn topics(table: &HashMap<String, Subscription>) -> Vec<String> {
        let mut t: Vec<String> = table.keys().cloned().collect();
        t.sort();
        t
    }

    #[test]
    fn filters_are_compiled_once_per_version() {
        let (mut table, mut held) = (HashMap::new(), HashMap::new());
        assert!(beat(&mut table, &mut held, 1, vec![wire("T", "a > 1", 10)]));
        let first = compiled(&table, "T");
        // The same subscription again (every heartbeat): kept as compiled.
        assert!(!beat(
            &mut table,
            &mut held,
            1,
            vec![wire("T", "a > 1", 10)]
        ));
        assert!(Arc::ptr_eq(&first, &compiled(&table, "T")));
        // Another member's older version does not replace a newer one.
        assert!(!beat(&mut table, &mut held, 2, vec![wire("T", "a > 2", 9)]));
        assert_eq!(table["T"].expression, "a > 1");
        // Nor does a different subscription of the same version.
        assert!(!beat(
            &mut table,
            &mut held,
            2,
            vec![wire("T", "a > 9", 10)]
        ));
        assert!(Arc::ptr_eq(&first, &compiled(&table, "T")));
        // A new version is compiled anew.
        assert!(!beat(
            &mut table,
            &mut held,
            1,
            vec![wire("T", "a > 3", 11)]
        ));
        assert!(!Arc::ptr_eq(&first, &compiled(&table, "T")));
        assert_eq!(table["T"].expression, "a > 3");
    }

    #[test]
    fn a_topic_no_live_member_holds_is_removed() {
        let (mut table, mut held) = (HashMap::new(), HashMap::new());
        let both = vec![wire("A", "a = 1", 10), wire("B", "b = 1", 10)];
        assert!(beat(&mut table, &mut held, 1, both));
        assert_eq!(topics(&table), ["A", "B"]);
        // The consumer resubscribes: drops B, changes A's expression.
        assert!(beat(&mut table, &mut held, 1, vec![wire("A", "a = 2", 20)]));
        assert_eq!(topics(&table), ["A"]);
        assert_eq!(table["A"].expression, "a = 2");
        assert_eq!(table["A"].version, 20);
        // An empty heartbeat (a producer-only client of the group) empties it.
        assert!(beat(&mut table, &mut held, 1, vec![]));
        assert!(table.is_empty());
    }

    #[test]
    fn members_keep_what_any_of_them_holds() {
        let (mut table, mut held) = (HashMap::new(), HashMap::new());
        beat(&mut table, &mut held, 1, vec![wire("A", "a = 1", 10)]);
        // A second member on A (newer) and B.
        let second = vec![wire("A", "a = 2", 20), wire("B", "b = 1", 20)];
        assert!(beat(&mut table, &mut held, 2, second));
        assert_eq!(topics(&table), ["A", "B"]);
        assert_eq!(table["A"].expression, "a = 2");
        // Member 1's heartbeats keep B (member 2 holds it) and its older A
        // does not replace the newer one.
        assert!(!beat(
            &mut table,
            &mut held,
            1,
            vec![wire("A", "a = 1", 10)]
        ));
        assert_eq!(topics(&table), ["A", "B"]);
        assert_eq!(table["A"].expression, "a = 2");
        // Member 2 goes: B goes with it, and A is what member 1 holds.
        held.remove(&2);
        assert!(rebuild_subscriptions("G", &mut table, &held));
        assert_eq!(topics(&table), ["A"]);
        assert_eq!(table["A"].expression, "a = 1");
        assert_eq!(table["A"].version, 10);
    }

    #[test]
    fn an_expression_that_does_not_compile_is_kept_with_its_error() {
        let (mut table, mut held) = (HashMap::new(), HashMap::new());
        beat(&mut table, &mut held, 1, vec![wire("T", "a >", 1)]);
        let e = table["T"].filter.as_ref().expect_err("refused");
        assert!(e.to_string().contains("line 1, column 4"), "{e}");
        assert_eq!(table["T"].to_wire().sub_string, "a >");
    }
}
