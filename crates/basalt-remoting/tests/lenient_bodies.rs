//! Property test of the lenient JSON layer (`fastjson::from_slice`): every
//! request body the broker or the NameServer reads parses to the same value
//! in every spelling Java's broker (fastjson 1.x) accepts:
//!
//! * numbers as JSON numbers, integral floats (`7.0`), strings (`"7"`,
//!   `" 7 "`), and a zero also as null, `""` or `false`;
//! * booleans as JSON booleans, strings in any case, `"1"`/`"0"`, `1`/`0`,
//!   and false also as null or `""`;
//! * enums by name or by Java ordinal, and the default also as null;
//! * strings that are canonical integers also as JSON numbers;
//! * a field at its Java default absent (and empty collections null);
//! * keys in another case (fastjson's smart match), unknown keys anywhere,
//!   and trailing whitespace after the body.

use std::collections::BTreeMap;

use basalt_remoting::fastjson;
use basalt_remoting::protocol::{
    ConsumeFromWhere, ConsumeType, ConsumerData, DataVersion, HeartbeatData, LockBatchRequestBody,
    MessageModel, MessageQueue, ProducerData, RegisterBrokerBody, SubscriptionData, TopicConfig,
    TopicConfigSerializeWrapper, TopicFilterType,
};
use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::strategy::{Union, ValueTree};
use proptest::test_runner::TestRunner;
use serde_json::{Map, Value, json};

type Spelled = BoxedStrategy<Value>;
type Field = BoxedStrategy<Option<(String, Value)>>;

fn one_of(options: Vec<Value>) -> Spelled {
    Union::new(options.into_iter().map(|v| Just(v).boxed())).boxed()
}

/// Spellings of an integer; `null_ok` when null must read as this value
/// (a non-Option field holding 0).
fn int(v: i64, null_ok: bool) -> Spelled {
    let mut options = vec![json!(v), json!(v.to_string()), json!(format!(" {v} "))];
    if v.unsigned_abs() < 1 << 53 {
        options.push(json!(v as f64));
    }
    if v == 0 || v == 1 {
        options.push(json!(v == 1));
    }
    if v == 0 {
        options.push(json!(""));
        if null_ok {
            options.push(Value::Null);
        }
    }
    one_of(options)
}

fn boolean(b: bool, null_ok: bool) -> Spelled {
    let word = if b { "true" } else { "false" };
    let mut options = vec![
        json!(b),
        json!(word),
        json!(word.to_uppercase()),
        json!(if b { "1" } else { "0" }),
        json!(b as i64),
    ];
    if !b {
        options.push(json!(""));
        if null_ok {
            options.push(Value::Null);
        }
    }
    one_of(options)
}

fn enumeration(names: &[&str], ordinal: usize, default: usize) -> Spelled {
    let mut options = vec![json!(names[ordinal]), json!(ordinal)];
    if ordinal == default {
        options.push(Value::Null);
    }
    one_of(options)
}

fn string(s: &str, null_ok: bool) -> Spelled {
    let mut options = vec![json!(s)];
    if let Ok(n) = s.parse::<i64>()
        && n.to_string() == s
    {
        options.push(json!(n));
    }
    if s.is_empty() && null_ok {
        options.push(Value::Null);
    }
    one_of(options)
}

fn array(items: Vec<Spelled>) -> Spelled {
    items.prop_map(Value::Array).boxed()
}

/// A field: present under its name or a smart-matched one, or absent when
/// the value is Java's default.
fn field(name: &'static str, spelled: Spelled, absent_ok: bool) -> Field {
    let present = (spelled, any::<bool>()).prop_map(move |(v, lower)| {
        let key = if lower {
            name.to_lowercase()
        } else {
            name.to_string()
        };
        Some((key, v))
    });
    if absent_ok {
        prop_oneof![3 => present, 1 => Just(None)].boxed()
    } else {
        present.boxed()
    }
}

/// A collection field: null and absence both mean empty.
fn collection(name: &'static str, spelled: Spelled, empty: bool) -> Field {
    let spelled = if empty {
        prop_oneof![spelled, Just(Value::Null)].boxed()
    } else {
        spelled
    };
    field(name, spelled, empty)
}

/// An object of `fields`, sometimes with keys no Basalt type knows.
fn object(fields: Vec<Field>) -> Spelled {
    (fields, any::<bool>())
        .prop_map(|(fields, unknown)| {
            let mut m: Map<String, Value> = fields.into_iter().flatten().collect();
            if unknown {
                m.insert("someUnknownKey42".into(), json!([1, {"x": null}, "y"]));
                m.insert("anotherUnknownFlag".into(), json!(true));
            }
            Value::Object(m)
        })
        .boxed()
}

/// A JSON object that is a map (its keys are data, so none is unknown).
fn map(entries: Vec<(String, Value)>) -> Spelled {
    Just(Value::Object(entries.into_iter().collect())).boxed()
}

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_%-]{0,10}"
}

fn subscription() -> impl Strategy<Value = (SubscriptionData, Value)> {
    (
        any::<bool>(),
        vec(any::<i32>(), 0..3),
        prop::sample::select(vec!["TAG", "SQL92"]),
        name(),
        0i64..2_000_000_000_000,
        vec(name(), 0..3),
        name(),
    )
        .prop_flat_map(|(cfm, codes, et, sub, ver, tags, topic)| {
            let spelled = object(vec![
                field("classFilterMode", boolean(cfm, true), !cfm),
                collection(
                    "codeSet",
                    array(codes.iter().map(|c| int(*c as i64, true)).collect()),
                    codes.is_empty(),
                ),
                field("expressionType", string(et, false), et == "TAG"),
                field("subString", string(&sub, true), sub.is_empty()),
                field("subVersion", int(ver, true), ver == 0),
                collection(
                    "tagsSet",
                    array(tags.iter().map(|t| string(t, false)).collect()),
                    tags.is_empty(),
                ),
                field("topic", string(&topic, true), topic.is_empty()),
            ]);
            let expected = SubscriptionData {
                class_filter_mode: cfm,
                code_set: codes,
                expression_type: et.to_string(),
                sub_string: sub,
                sub_version: ver,
                tags_set: tags,
                topic,
            };
            (Just(expected), spelled)
        })
}

fn consumer_data() -> impl Strategy<Value = (ConsumerData, Value)> {
    (
        0..ConsumeFromWhere::NAMES.len(),
        0..ConsumeType::NAMES.len(),
        name(),
        0..MessageModel::NAMES.len(),
        vec(subscription(), 0..3),
        any::<bool>(),
    )
        .prop_flat_map(|(cfw, ct, group, mm, subs, unit)| {
            let (subs, spelled_subs): (Vec<_>, Vec<_>) = subs.into_iter().unzip();
            let spelled = object(vec![
                field(
                    "consumeFromWhere",
                    enumeration(ConsumeFromWhere::NAMES, cfw, 0),
                    cfw == 0,
                ),
                field(
                    "consumeType",
                    enumeration(ConsumeType::NAMES, ct, 1),
                    ct == 1,
                ),
                field("groupName", string(&group, true), group.is_empty()),
                field(
                    "messageModel",
                    enumeration(MessageModel::NAMES, mm, 1),
                    mm == 1,
                ),
                collection(
                    "subscriptionDataSet",
                    Just(Value::Array(spelled_subs.clone())).boxed(),
                    subs.is_empty(),
                ),
                field("unitMode", boolean(unit, true), !unit),
            ]);
            let expected = ConsumerData {
                consume_from_where: ConsumeFromWhere::from_name(ConsumeFromWhere::NAMES[cfw]),
                consume_type: ConsumeType::from_name(ConsumeType::NAMES[ct]),
                group_name: group,
                message_model: MessageModel::from_name(MessageModel::NAMES[mm]),
                subscription_data_set: subs,
                unit_mode: unit,
            };
            (Just(expected), spelled)
        })
}

fn heartbeat() -> impl Strategy<Value = (HeartbeatData, Value)> {
    (
        name(),
        vec(consumer_data(), 0..3),
        proptest::option::of(any::<i32>()),
        vec(name(), 0..3),
        proptest::option::of(any::<bool>()),
    )
        .prop_flat_map(|(client, consumers, fingerprint, producers, without)| {
            let (consumers, spelled_consumers): (Vec<_>, Vec<_>) = consumers.into_iter().unzip();
            let optional = |v: Option<Spelled>| match v {
                Some(s) => s,
                None => Just(Value::Null).boxed(),
            };
            let spelled = object(vec![
                field("clientID", string(&client, true), client.is_empty()),
                collection(
                    "consumerDataSet",
                    Just(Value::Array(spelled_consumers)).boxed(),
                    consumers.is_empty(),
                ),
                field(
                    "heartbeatFingerprint",
                    optional(fingerprint.map(|f| int(f as i64, false))),
                    fingerprint.is_none(),
                ),
                collection(
                    "producerDataSet",
                    array(
                        producers
                            .iter()
                            .map(|p| {
                                object(vec![field("groupName", string(p, true), p.is_empty())])
                            })
                            .collect(),
                    ),
                    producers.is_empty(),
                ),
                field(
                    "withoutSub",
                    optional(without.map(|b| boolean(b, false))),
                    without.is_none(),
                ),
            ]);
            let expected = HeartbeatData {
                client_id: client,
                consumer_data_set: consumers,
                heartbeat_fingerprint: fingerprint,
                producer_data_set: producers
                    .into_iter()
                    .map(|group_name| ProducerData { group_name })
                    .collect(),
                without_sub: without,
            };
            (Just(expected), spelled)
        })
}

fn message_queue() -> impl Strategy<Value = (MessageQueue, Value)> {
    (name(), any::<i32>(), name()).prop_flat_map(|(broker, qid, topic)| {
        let spelled = object(vec![
            field("brokerName", string(&broker, true), broker.is_empty()),
            field("queueId", int(qid as i64, true), qid == 0),
            field("topic", string(&topic, true), topic.is_empty()),
        ]);
        (Just(MessageQueue::new(topic, broker, qid)), spelled)
    })
}

fn lock_body() -> impl Strategy<Value = (LockBatchRequestBody, Value)> {
    (name(), name(), vec(message_queue(), 0..4), any::<bool>()).prop_flat_map(
        |(client, group, mqs, only)| {
            let (mqs, spelled_mqs): (Vec<_>, Vec<_>) = mqs.into_iter().unzip();
            let spelled = object(vec![
                field("clientId", string(&client, true), client.is_empty()),
                field("consumerGroup", string(&group, true), group.is_empty()),
                collection(
                    "mqSet",
                    Just(Value::Array(spelled_mqs)).boxed(),
                    mqs.is_empty(),
                ),
                field("onlyThisBroker", boolean(only, true), !only),
            ]);
            let expected = LockBatchRequestBody {
                client_id: client,
                consumer_group: group,
                mq_set: mqs,
                only_this_broker: only,
            };
            (Just(expected), spelled)
        },
    )
}

fn topic_config() -> impl Strategy<Value = (TopicConfig, Value)> {
    (
        btree_map(name(), name(), 0..3),
        any::<bool>(),
        0i32..8,
        0i32..64,
        0..TopicFilterType::NAMES.len(),
        name(),
        0i32..4,
        0i32..64,
    )
        .prop_flat_map(|(attrs, order, perm, rq, tft, topic, sys, wq)| {
            let attr_entries = attrs.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            let spelled = object(vec![
                collection("attributes", map(attr_entries), attrs.is_empty()),
                field("order", boolean(order, true), !order),
                field("perm", int(perm as i64, false), perm == 6),
                field("readQueueNums", int(rq as i64, false), rq == 16),
                field(
                    "topicFilterType",
                    enumeration(TopicFilterType::NAMES, tft, 0),
                    tft == 0,
                ),
                field("topicName", string(&topic, true), topic.is_empty()),
                field("topicSysFlag", int(sys as i64, true), sys == 0),
                field("writeQueueNums", int(wq as i64, false), wq == 16),
            ]);
            let expected = TopicConfig {
                attributes: attrs,
                order,
                perm,
                read_queue_nums: rq,
                topic_filter_type: TopicFilterType::from_name(TopicFilterType::NAMES[tft]),
                topic_name: topic,
                topic_sys_flag: sys,
                write_queue_nums: wq,
            };
            (Just(expected), spelled)
        })
}

fn register_body() -> impl Strategy<Value = (RegisterBrokerBody, Value)> {
    (
        vec(name(), 0..3),
        (0i64..1000, 0i64..1000, 0i64..2_000_000_000_000),
        btree_map(name(), topic_config(), 0..4),
    )
        .prop_flat_map(|(filters, (counter, state, ts), table)| {
            let version = object(vec![
                field("counter", int(counter, true), counter == 0),
                field("stateVersion", int(state, true), state == 0),
                field("timestamp", int(ts, true), ts == 0),
            ]);
            let table_entries = table
                .iter()
                .map(|(k, (_, v))| (k.clone(), v.clone()))
                .collect();
            let wrapper = object(vec![
                field(
                    "dataVersion",
                    version,
                    counter == 0 && state == 0 && ts == 0,
                ),
                collection("topicConfigTable", map(table_entries), table.is_empty()),
            ]);
            let spelled = object(vec![
                collection(
                    "filterServerList",
                    array(filters.iter().map(|f| string(f, false)).collect()),
                    filters.is_empty(),
                ),
                field("topicConfigSerializeWrapper", wrapper, false),
            ]);
            let expected = RegisterBrokerBody {
                filter_server_list: filters,
                topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                    data_version: DataVersion {
                        counter,
                        state_version: state,
                        timestamp: ts,
                    },
                    topic_config_table: table.into_iter().map(|(k, (tc, _))| (k, tc)).collect(),
                },
            };
            (Just(expected), spelled)
        })
}

/// The body text: the spelled JSON and some trailing whitespace.
fn text(v: &Value, trailing: &str) -> String {
    serde_json::to_string(v).unwrap() + trailing
}

const TRAILING: &str = "[ \t\r\n]{0,3}";

proptest! {
    #[test]
    fn heartbeat_in_every_spelling((expected, spelled) in heartbeat(), ws in TRAILING) {
        let body = text(&spelled, &ws);
        let got: HeartbeatData = fastjson::from_slice(body.as_bytes())
            .map_err(|e| TestCaseError::fail(format!("{e}: {body}")))?;
        prop_assert_eq!(got, expected, "{}", body);
    }

    #[test]
    fn lock_body_in_every_spelling((expected, spelled) in lock_body(), ws in TRAILING) {
        let body = text(&spelled, &ws);
        let got: LockBatchRequestBody = fastjson::from_slice(body.as_bytes())
            .map_err(|e| TestCaseError::fail(format!("{e}: {body}")))?;
        prop_assert_eq!(got, expected, "{}", body);
    }

    #[test]
    fn register_body_in_every_spelling((expected, spelled) in register_body(), ws in TRAILING) {
        let body = text(&spelled, &ws);
        let got = RegisterBrokerBody::decode(body.as_bytes(), false, 317)
            .map_err(|e| TestCaseError::fail(format!("{e}: {body}")))?;
        prop_assert_eq!(got, expected, "{}", body);
    }
}

/// The generators do produce the spellings the module doc promises (a
/// property test whose generator never makes them would prove nothing).
#[test]
fn generators_cover_the_alternative_spellings() {
    let mut runner = TestRunner::deterministic();
    let mut seen = BTreeMap::<&str, bool>::new();
    for _ in 0..300 {
        let (_, v) = heartbeat().new_tree(&mut runner).unwrap().current();
        let t = v.to_string();
        for (what, needle) in [
            ("ordinal", "\"consumeType\":0"),
            ("enum name", "CONSUME_PASSIVELY"),
            ("numeric string", "\"subVersion\":\""),
            ("bool as digit", "\"unitMode\":\"1\""),
            ("smart-matched key", "\"clientid\""),
            ("unknown key", "someUnknownKey42"),
            ("null collection", "\"codeSet\":null"),
        ] {
            *seen.entry(what).or_default() |= t.contains(needle);
        }
    }
    let missing: Vec<_> = seen.iter().filter(|(_, s)| !**s).map(|(w, _)| *w).collect();
    assert!(missing.is_empty(), "never generated: {missing:?}");
}
