//! Java `BrokerStatsManager`'s stats items, which VIEW_BROKER_STATS_DATA
//! (315, mqadmin `statsAll`) reads and GET_CONSUME_STATS takes its
//! `consumeTps` from: per topic what was stored (TOPIC_PUT_NUMS,
//! TOPIC_PUT_SIZE), per `topic@group` what was pulled (GROUP_GET_NUMS,
//! GROUP_GET_SIZE, GROUP_GET_LATENCY) and sent back (SNDBCK_PUT_NUMS), and
//! the broker's totals (BROKER_PUT_NUMS, BROKER_GET_NUMS, keyed by the
//! cluster name).
//!
//! Each item answers a sum, a rate and an average per call over three
//! windows: the last minute (sampled every 10 s), hour (every 10 min) and
//! day (every hour), as Java's `StatsItem` does. Two differences, both so
//! that a fresh figure is not 0: a window ends now (the live counters)
//! rather than at its last sample, and an item not sampled yet counts from
//! one sampling interval before now (Java's first sample is such a zero).
//!
//! Cost: the request paths add to counters in a table sharded by thread
//! ([`LabelTable::sharded`]): one read lock of the thread's own shard and a
//! few relaxed adds per request, never a lock shared with other workers.
//! Only the sampler (every 10 s) and admin readers touch the windows.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::metrics::table::LabelTable;

/// Java's stats names this broker answers.
pub mod names {
    pub const TOPIC_PUT_NUMS: &str = "TOPIC_PUT_NUMS";
    pub const TOPIC_PUT_SIZE: &str = "TOPIC_PUT_SIZE";
    pub const GROUP_GET_NUMS: &str = "GROUP_GET_NUMS";
    pub const GROUP_GET_SIZE: &str = "GROUP_GET_SIZE";
    pub const GROUP_GET_LATENCY: &str = "GROUP_GET_LATENCY";
    pub const SNDBCK_PUT_NUMS: &str = "SNDBCK_PUT_NUMS";
    pub const BROKER_PUT_NUMS: &str = "BROKER_PUT_NUMS";
    pub const BROKER_GET_NUMS: &str = "BROKER_GET_NUMS";
}

/// Most keys per table; traffic of further keys is not counted here.
const MAX_KEYS: usize = 200_000;
const SECOND: i64 = 1_000;

/// What each counter slot of a [`Tally`] holds.
const NUMS: usize = 0;
const SIZE: usize = 1;
const LATENCY: usize = 2;
const TIMES: usize = 3;
type Values = [u64; 4];

/// One key's counters on one shard: messages, bytes, milliseconds of pull
/// latency, and calls (Java's `value` is one of the first three, `times`
/// the last).
#[derive(Debug, Default)]
struct Tally([AtomicU64; 4]);

impl Tally {
    fn add(&self, v: Values) {
        for (c, n) in self.0.iter().zip(v) {
            if n != 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    fn load(&self) -> Values {
        std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed))
    }
}

fn plus(a: Values, b: Values) -> Values {
    std::array::from_fn(|i| a[i] + b[i])
}

/// The three windows, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    Minute = 0,
    Hour = 1,
    Day = 2,
}

impl Window {
    const ALL: [Window; 3] = [Window::Minute, Window::Hour, Window::Day];

    /// How often the window is sampled, and how far back it reaches.
    fn interval_and_span(self) -> (i64, i64) {
        match self {
            Window::Minute => (10 * SECOND, 60 * SECOND),
            Window::Hour => (600 * SECOND, 3_600 * SECOND),
            Window::Day => (3_600 * SECOND, 86_400 * SECOND),
        }
    }
}

/// One window's samples of one key, oldest first: `(at_ms, counters)`.
/// Invariant: it keeps the newest sample at or before the window's start
/// and every later one, except that of three equal neighbours the middle
/// one is dropped (an idle key keeps two samples, not one per interval).
#[derive(Debug, Default, Clone)]
struct Samples(VecDeque<(i64, Values)>);

impl Samples {
    fn push(&mut self, at: i64, v: Values, span: i64) {
        let q = &mut self.0;
        let n = q.len();
        if n >= 2 && q[n - 1].1 == v && q[n - 2].1 == v {
            q[n - 1].0 = at;
        } else {
            q.push_back((at, v));
        }
        while q.len() > 2 && q[1].0 <= at - span {
            q.pop_front();
        }
    }

    /// The counters and time the window starts from: the value at the
    /// window's start, or the oldest sample of a younger key.
    fn base(&self, now: i64, span: i64) -> Option<(i64, Values)> {
        let start = now - span;
        match self.0.iter().rev().find(|(at, _)| *at <= start) {
            Some((_, v)) => Some((start, *v)),
            None => self.0.front().copied(),
        }
    }
}

/// What one item reports for one window (Java `StatsSnapshot`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StatsFigure {
    pub sum: u64,
    pub tps: f64,
    pub avgpt: f64,
}

/// The windows of every key of one table, kept by the sampler.
type WindowTable = HashMap<String, [Samples; 3]>;

/// One table of keyed items: sharded counters and their sampled windows.
#[derive(Debug)]
struct ItemSet {
    counters: LabelTable<String, Tally>,
    windows: Mutex<WindowTable>,
}

impl Default for ItemSet {
    fn default() -> Self {
        ItemSet {
            counters: LabelTable::sharded(MAX_KEYS),
            windows: Mutex::new(HashMap::new()),
        }
    }
}

impl ItemSet {
    fn add(&self, key: &str, v: Values) {
        self.counters.with(key, Tally::default, |t| t.add(v));
    }

    /// Every key's counters, added up over the shards.
    fn totals(&self) -> HashMap<String, Values> {
        let mut out: HashMap<String, Values> = HashMap::new();
        self.counters.for_each(|k, t| {
            let v = t.load();
            match out.get_mut(k.as_str()) {
                Some(sum) => *sum = plus(*sum, v),
                None => {
                    out.insert(k.clone(), v);
                }
            }
        });
        out
    }

    fn live(&self, key: &str) -> Option<Values> {
        let mut sum = None;
        self.counters
            .for_key(key, |t| sum = Some(plus(sum.unwrap_or_default(), t.load())));
        sum
    }

    fn sample(&self, windows: &[Window], now: i64) {
        let totals = self.totals();
        let mut table = self.windows.lock();
        table.retain(|k, _| totals.contains_key(k));
        for (key, v) in totals {
            let w = table.entry(key).or_insert_with(|| {
                // A new key: its counters grew from 0 over the last interval.
                std::array::from_fn(|i| {
                    let (interval, _) = Window::ALL[i].interval_and_span();
                    Samples(VecDeque::from([(now - interval, [0; 4])]))
                })
            });
            for &win in windows {
                let (_, span) = win.interval_and_span();
                w[win as usize].push(now, v, span);
            }
        }
    }

    /// `slot`'s figure of `key` over `win`; None for a key never counted.
    fn figure(&self, key: &str, slot: usize, win: Window, now: i64) -> Option<StatsFigure> {
        let live = self.live(key)?;
        let (interval, span) = win.interval_and_span();
        let base = self
            .windows
            .lock()
            .get(key)
            .and_then(|w| w[win as usize].base(now, span))
            .unwrap_or((now - interval, [0; 4]));
        Some(figure_between(base, (now, live), slot))
    }

    fn forget(&self, keep: impl Fn(&str) -> bool) {
        self.counters.retain(|k| keep(k));
        self.windows.lock().retain(|k, _| keep(k));
    }
}

fn figure_between(
    (from, base): (i64, Values),
    (to, live): (i64, Values),
    slot: usize,
) -> StatsFigure {
    let sum = live[slot].saturating_sub(base[slot]);
    let times = live[TIMES].saturating_sub(base[TIMES]);
    let span = (to - from).max(1);
    StatsFigure {
        sum,
        tps: sum as f64 * 1000.0 / span as f64,
        avgpt: if times > 0 {
            sum as f64 / times as f64
        } else {
            0.0
        },
    }
}

/// The broker's stats items (see the module documentation). Invariant:
/// counting never blocks on the sampler or a reader.
#[derive(Debug, Default)]
pub struct StatsItems {
    /// By topic.
    puts: ItemSet,
    /// By `topic@group`.
    gets: ItemSet,
    /// By `topic@group`.
    send_backs: ItemSet,
    /// The broker's put and get totals, sampled from its own counters.
    broker: Mutex<[[Samples; 3]; 2]>,
}

/// Java's `topic@group` key.
pub fn group_key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

impl StatsItems {
    /// `count` messages of `bytes` in all stored to `topic` by one request.
    pub fn record_put(&self, topic: &str, count: u64, bytes: u64) {
        self.puts.add(topic, [count, bytes, 0, 1]);
    }

    /// One pull by `group` of `topic` answered `count` messages of `bytes`
    /// in `latency_ms`.
    pub fn record_get(&self, group: &str, topic: &str, count: u64, bytes: u64, latency_ms: u64) {
        self.gets
            .add(&group_key(topic, group), [count, bytes, latency_ms, 1]);
    }

    /// `group` sent a message of `topic` back for a retry.
    pub fn record_send_back(&self, group: &str, topic: &str) {
        self.send_backs.add(&group_key(topic, group), [1, 0, 0, 1]);
    }

    /// Samples every window due at `now`; `tick` counts 10 s periods since
    /// start (the minute window every tick, the hour every 60th, the day
    /// every 360th). `broker_totals` are the broker's put and get counts.
    pub fn sample(&self, tick: u64, now: i64, broker_totals: (u64, u64)) {
        let mut due = vec![Window::Minute];
        if tick.is_multiple_of(60) {
            due.push(Window::Hour);
        }
        if tick.is_multiple_of(360) {
            due.push(Window::Day);
        }
        for set in [&self.puts, &self.gets, &self.send_backs] {
            set.sample(&due, now);
        }
        let mut b = self.broker.lock();
        for (i, total) in [broker_totals.0, broker_totals.1].into_iter().enumerate() {
            for &win in &due {
                let (interval, span) = win.interval_and_span();
                let s = &mut b[i][win as usize];
                if s.0.is_empty() {
                    s.0.push_back((now - interval, [0; 4]));
                }
                s.push(now, [total, 0, 0, 0], span);
            }
        }
    }

    /// Java `getStatsItem(statsName, statsKey)` read over the three
    /// windows (minute, hour, day); None when there is no such item.
    /// `cluster` is the broker's cluster name, the broker items' key;
    /// `broker_totals` as for [`Self::sample`].
    pub fn view(
        &self,
        name: &str,
        key: &str,
        cluster: &str,
        broker_totals: (u64, u64),
        now: i64,
    ) -> Option<[StatsFigure; 3]> {
        let (set, slot) = match name {
            names::TOPIC_PUT_NUMS => (&self.puts, NUMS),
            names::TOPIC_PUT_SIZE => (&self.puts, SIZE),
            names::GROUP_GET_NUMS => (&self.gets, NUMS),
            names::GROUP_GET_SIZE => (&self.gets, SIZE),
            names::GROUP_GET_LATENCY => (&self.gets, LATENCY),
            names::SNDBCK_PUT_NUMS => (&self.send_backs, NUMS),
            names::BROKER_PUT_NUMS | names::BROKER_GET_NUMS if key == cluster => {
                let (i, total) = if name == names::BROKER_PUT_NUMS {
                    (0, broker_totals.0)
                } else {
                    (1, broker_totals.1)
                };
                let b = self.broker.lock();
                return Some(Window::ALL.map(|win| {
                    let (interval, span) = win.interval_and_span();
                    let base = b[i][win as usize]
                        .base(now, span)
                        .unwrap_or((now - interval, [0; 4]));
                    figure_between(base, (now, [total, 0, 0, 0]), NUMS)
                }));
            }
            _ => return None,
        };
        let figures = Window::ALL.map(|win| set.figure(key, slot, win, now));
        match figures {
            [Some(m), Some(h), Some(d)] => Some([m, h, d]),
            _ => None,
        }
    }

    /// Messages a second `group` pulled over the last minute, from `topic`
    /// or (None) from all its topics (GET_CONSUME_STATS's `consumeTps`).
    pub fn group_get_tps(&self, group: &str, topic: Option<&str>, now: i64) -> f64 {
        let keys: Vec<String> = match topic {
            Some(t) => vec![group_key(t, group)],
            None => {
                let suffix = format!("@{group}");
                let mut keys = Vec::new();
                self.gets.counters.for_each(|k, _| {
                    if k.ends_with(&suffix) && !keys.contains(k) {
                        keys.push(k.clone());
                    }
                });
                keys
            }
        };
        keys.iter()
            .filter_map(|k| self.gets.figure(k, NUMS, Window::Minute, now))
            .map(|f| f.tps)
            .sum()
    }

    /// `(group, topic, messages, bytes)` pulled since start, every pair.
    pub fn group_get_totals(&self) -> Vec<(String, String, u64, u64)> {
        self.gets
            .totals()
            .into_iter()
            .filter_map(|(k, v)| {
                let (topic, group) = k.split_once('@')?;
                Some((group.to_string(), topic.to_string(), v[NUMS], v[SIZE]))
            })
            .collect()
    }

    /// Forgets a deleted topic's items (Java `onTopicDeleted`).
    pub fn forget_topic(&self, topic: &str) {
        let prefix = format!("{topic}@");
        self.puts.forget(|k| k != topic);
        self.gets.forget(|k| !k.starts_with(&prefix));
        self.send_backs.forget(|k| !k.starts_with(&prefix));
    }

    /// Forgets a deleted group's items (Java `onGroupDeleted`).
    pub fn forget_group(&self, group: &str) {
        let suffix = format!("@{group}");
        self.gets.forget(|k| !k.ends_with(&suffix));
        self.send_backs.forget(|k| !k.ends_with(&suffix));
    }
}

#[cfg(test)]
#[path = "stats_items_tests.rs"]
mod tests;
