//! `basalt admin` verbs for settings and groups: `group`, `broker-config`,
//! `consume-queue`, `clone-offset`, `kv` (docs/protocol.md#operations).
//! Each builds a [`Report`].

use basalt_client::Admin;
use serde_json::{Value, json};

use crate::admin_output::Report;
use crate::cli::{BrokerConfigCommand, GroupCommand, KvCommand};

fn err(e: basalt_client::ClientError) -> String {
    e.to_string()
}

/// The brokers a group verb works on: one address, or every master of
/// the cluster.
async fn masters(
    admin: &Admin,
    cluster: &str,
    broker: Option<String>,
) -> Result<Vec<String>, String> {
    match broker {
        Some(b) => Ok(vec![b]),
        None => {
            let m: Vec<String> = admin
                .cluster_masters(cluster)
                .await
                .map_err(err)?
                .into_iter()
                .map(|(_, addr)| addr)
                .collect();
            if m.is_empty() {
                return Err(format!("cluster {cluster} has no master"));
            }
            Ok(m)
        }
    }
}

/// `basalt admin group create|delete|list`.
pub async fn group(admin: &Admin, cmd: GroupCommand) -> Result<Report, String> {
    let mut r = Report::new();
    match cmd {
        GroupCommand::Create {
            group,
            cluster,
            broker,
            retry_queue_nums,
            retry_max_times,
            consume_disable,
            no_broadcast,
            orderly,
        } => {
            let config = json!({
                "groupName": group,
                "consumeEnable": !consume_disable,
                "consumeBroadcastEnable": !no_broadcast,
                "consumeFromMinEnable": true,
                "retryQueueNums": retry_queue_nums,
                "retryMaxTimes": retry_max_times,
                "consumeMessageOrderly": orderly,
                "brokerId": 0,
                "whichBrokerWhenConsumeSlowly": 1,
                "notifyConsumerIdsChangedEnable": true,
            });
            let t = r.table("brokers", &["broker"]);
            for addr in masters(admin, &cluster, broker).await? {
                admin.create_group(&addr, &config).await.map_err(err)?;
                r.row(t, vec![json!(addr)]);
            }
            r.field("group", config, format!("group {group} created or updated"));
        }
        GroupCommand::Delete {
            group,
            cluster,
            broker,
        } => {
            let t = r.table("brokers", &["broker"]);
            for addr in masters(admin, &cluster, broker).await? {
                admin.delete_group(&addr, &group).await.map_err(err)?;
                r.row(t, vec![json!(addr)]);
            }
            r.field("deleted", group.clone(), format!("group {group} deleted"));
        }
        GroupCommand::List { cluster, broker } => {
            let t = r.table(
                "groups",
                &[
                    "broker",
                    "group",
                    "consume",
                    "broadcast",
                    "retryQueues",
                    "retryMaxTimes",
                ],
            );
            for addr in masters(admin, &cluster, broker).await? {
                for (name, g) in admin.groups(&addr).await.map_err(err)? {
                    let get = |k: &str| g.get(k).cloned().unwrap_or(Value::Null);
                    r.row(
                        t,
                        vec![
                            json!(addr),
                            json!(name),
                            get("consumeEnable"),
                            get("consumeBroadcastEnable"),
                            get("retryQueueNums"),
                            get("retryMaxTimes"),
                        ],
                    );
                }
            }
        }
    }
    Ok(r)
}

/// `KEY=VALUE` arguments.
fn parse_settings(settings: &[String]) -> Result<Vec<(String, String)>, String> {
    settings
        .iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(format!("{s:?} is not KEY=VALUE")),
        })
        .collect()
}

/// `basalt admin broker-config get|set`.
pub async fn broker_config(admin: &Admin, cmd: BrokerConfigCommand) -> Result<Report, String> {
    let mut r = Report::new();
    match cmd {
        BrokerConfigCommand::Get { broker } => {
            let t = r.table("settings", &["key", "value"]);
            for (k, v) in admin.broker_config(&broker).await.map_err(err)? {
                r.row(t, vec![json!(k), json!(v)]);
            }
        }
        BrokerConfigCommand::Set {
            broker,
            cluster,
            settings,
        } => {
            let pairs = parse_settings(&settings)?;
            let brokers = match (broker, cluster) {
                (Some(b), _) => vec![b],
                (None, Some(c)) => admin.cluster_brokers(&c).await.map_err(err)?,
                (None, None) => return Err("give --broker or --cluster".into()),
            };
            let t = r.table("brokers", &["broker"]);
            for addr in brokers {
                admin
                    .update_broker_config(&addr, &pairs)
                    .await
                    .map_err(|e| format!("{addr}: {e}"))?;
                r.row(t, vec![json!(addr)]);
            }
            let set: serde_json::Map<String, Value> =
                pairs.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            let text = pairs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            r.field("set", Value::Object(set), format!("set {text}"));
        }
    }
    Ok(r)
}

/// `basalt admin consume-queue`: the units and the queue's bounds.
#[allow(clippy::too_many_arguments)]
pub async fn consume_queue(
    admin: &Admin,
    topic: &str,
    broker_name: &str,
    queue: i32,
    index: i64,
    count: i32,
    group: Option<&str>,
) -> Result<Report, String> {
    let v = admin
        .query_consume_queue(topic, broker_name, queue, index, count, group)
        .await
        .map_err(err)?;
    let mut r = Report::new();
    r.field(
        "minQueueIndex",
        v.min_queue_index,
        format!(
            "queue {topic}:{broker_name}:{queue} holds offsets {} to {}",
            v.min_queue_index,
            v.max_queue_index - 1
        ),
    );
    r.field("maxQueueIndex", v.max_queue_index, "");
    if let Some(s) = &v.subscription_data {
        r.field(
            "subscription",
            json!({"expressionType": s.expression_type, "subString": s.sub_string}),
            format!(
                "{} subscribes {} {}",
                group.unwrap_or("-"),
                s.expression_type,
                s.sub_string
            ),
        );
    }
    if let Some(f) = &v.filter_data {
        r.field("filterData", f.clone(), f.clone());
    }
    let t = r.table("units", &["offset", "commitLogOffset", "size", "tagsCode"]);
    for (i, u) in v.queue_data.iter().enumerate() {
        r.row(
            t,
            vec![
                json!(index + i as i64),
                json!(u.physic_offset),
                json!(u.physic_size),
                json!(u.tags_code),
            ],
        );
    }
    Ok(r)
}

/// `basalt admin clone-offset`.
pub async fn clone_offset(
    admin: &Admin,
    src: &str,
    dest: &str,
    topic: &str,
    offline: bool,
) -> Result<Report, String> {
    let brokers = admin
        .clone_group_offset(src, dest, topic, offline)
        .await
        .map_err(err)?;
    let mut r = Report::new();
    let t = r.table("brokers", &["broker"]);
    for b in brokers {
        r.row(t, vec![json!(b)]);
    }
    r.text(format!("offsets of {src} on {topic} copied to {dest}"));
    Ok(r)
}

/// `basalt admin kv get|put|delete|list`.
pub async fn kv(admin: &Admin, cmd: KvCommand) -> Result<Report, String> {
    let mut r = Report::new();
    match cmd {
        KvCommand::Get { namespace, key } => {
            match admin.kv_config(&namespace, &key).await.map_err(err)? {
                Some(v) => r.field("value", v.clone(), v),
                None => return Err(format!("no value for {key} in namespace {namespace}")),
            }
        }
        KvCommand::Put {
            namespace,
            key,
            value,
        } => {
            let t = r.table("namesrvs", &["namesrv"]);
            for ns in admin
                .put_kv_config(&namespace, &key, &value)
                .await
                .map_err(err)?
            {
                r.row(t, vec![json!(ns)]);
            }
            r.text(format!("{namespace} {key} = {value}"));
        }
        KvCommand::Delete { namespace, key } => {
            let t = r.table("namesrvs", &["namesrv"]);
            for ns in admin
                .delete_kv_config(&namespace, &key)
                .await
                .map_err(err)?
            {
                r.row(t, vec![json!(ns)]);
            }
            r.text(format!("{namespace} {key} deleted"));
        }
        KvCommand::List { namespace } => {
            let t = r.table("entries", &["key", "value"]);
            for (k, v) in admin.kv_namespace(&namespace).await.map_err(err)? {
                r.row(t, vec![json!(k), json!(v)]);
            }
        }
    }
    Ok(r)
}
