//! `basalt admin`: runs one verb and prints its [`Report`] as tables or
//! JSON (`--json`). The verbs for day-to-day operations are in
//! `admin_ops`, those for settings and groups in `admin_verbs`.

use std::collections::BTreeMap;
use std::process::ExitCode;

use basalt_client::{Admin, ClientConfig, MessageExt, TopicConfig};
use serde_json::{Value, json};

use crate::admin_output::Report;
use crate::cli::{AdminCommand, LedgerCommand, MessageCommand, TopicCommand};

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

pub fn admin(cmd: AdminCommand, namesrv: String, json: bool) -> Result<ExitCode, String> {
    runtime()?.block_on(async move {
        let admin = Admin::new(ClientConfig::new(namesrv));
        if let AdminCommand::Ledger(l) = cmd {
            // The ledger verbs print their own tables or JSON.
            let r = ledger_verb(&admin, l, json).await;
            admin.shutdown();
            return r.map(|()| ExitCode::SUCCESS);
        }
        let r = admin_inner(&admin, cmd).await;
        admin.shutdown();
        r.map(|report| {
            report.print(json);
            ExitCode::SUCCESS
        })
    })
}

async fn ledger_verb(admin: &Admin, cmd: LedgerCommand, json: bool) -> Result<(), String> {
    match cmd {
        LedgerCommand::Status {
            cluster,
            broker_name,
        } => crate::ledger_admin::status(admin, &cluster, broker_name.as_deref(), json).await,
        LedgerCommand::Transfer {
            to,
            cluster,
            broker_name,
        } => {
            crate::ledger_admin::transfer(admin, &cluster, broker_name.as_deref(), &to, json).await
        }
    }
}

async fn admin_inner(admin: &Admin, cmd: AdminCommand) -> Result<Report, String> {
    let e = |e: basalt_client::ClientError| e.to_string();
    let mut r = Report::new();
    match cmd {
        AdminCommand::Topic(t) => return topic_verb(admin, t).await,
        AdminCommand::Cluster => cluster_table(admin, &mut r).await.map_err(e)?,
        AdminCommand::Timers => timers_table(admin, &mut r).await.map_err(e)?,
        AdminCommand::Broker { addr } => {
            let rt = admin.broker_runtime_info(&addr).await.map_err(e)?;
            let t = r.table("runtimeInfo", &["key", "value"]);
            for (k, v) in rt {
                r.row(t, vec![json!(k), json!(v)]);
            }
        }
        AdminCommand::Progress { group, topic } => {
            let p = admin
                .consume_stats(&group, topic.as_deref())
                .await
                .map_err(e)?;
            let t = r.table(
                "queues",
                &[
                    "topic",
                    "broker",
                    "queue",
                    "brokerOffset",
                    "consumerOffset",
                    "lag",
                ],
            );
            for q in &p.queues {
                r.row(
                    t,
                    vec![
                        json!(q.queue.topic),
                        json!(q.queue.broker_name),
                        json!(q.queue.queue_id),
                        json!(q.broker_offset),
                        json!(q.consumer_offset),
                        json!(q.lag()),
                    ],
                );
            }
            r.field(
                "totalLag",
                p.total_lag(),
                format!("total lag {}", p.total_lag()),
            );
            r.field(
                "consumeTps",
                p.consume_tps,
                format!("consume tps {:.2}", p.consume_tps),
            );
        }
        AdminCommand::Consumer { group } => {
            let c = admin.consumer_connections(&group).await.map_err(e)?;
            consumer_report(&group, &c, &mut r);
        }
        AdminCommand::Message(MessageCommand::Key { topic, key }) => {
            let msgs = admin
                .query_message_by_key(&topic, &key, 64, 0, i64::MAX)
                .await
                .map_err(e)?;
            let t = message_table(&mut r);
            for m in &msgs {
                message_row(&mut r, t, m);
            }
            r.field("count", msgs.len(), format!("{} message(s)", msgs.len()));
        }
        AdminCommand::Message(MessageCommand::Id { id }) => {
            let m = admin.view_message(&id).await.map_err(e)?;
            let t = message_table(&mut r);
            message_row(&mut r, t, &m);
            let p = r.table("properties", &["key", "value"]);
            for (k, v) in m.properties.iter() {
                r.row(p, vec![json!(k), json!(v)]);
            }
        }
        AdminCommand::WritePerm {
            broker_name, on, ..
        } => return crate::admin_ops::write_perm(admin, &broker_name, on).await,
        AdminCommand::ResetOffset {
            group,
            topic,
            time,
            no_force,
        } => {
            let ms = crate::admin_ops::parse_time(&time)?;
            return crate::admin_ops::reset_offset(admin, &group, &topic, ms, !no_force).await;
        }
        AdminCommand::SkipAccumulated { group, topic } => {
            return crate::admin_ops::reset_offset(admin, &group, &topic, -1, true).await;
        }
        AdminCommand::Producer { group, topic } => {
            return crate::admin_ops::producer(admin, &group, &topic).await;
        }
        AdminCommand::ConsumerStatus { group, client_id } => {
            return crate::admin_ops::consumer_status(admin, &group, client_id.as_deref()).await;
        }
        AdminCommand::Transactions {
            cluster,
            broker,
            max,
        } => {
            let brokers = match broker {
                Some(b) => vec![b],
                None => admin
                    .cluster_masters(&cluster)
                    .await
                    .map_err(e)?
                    .into_iter()
                    .map(|(_, addr)| addr)
                    .collect(),
            };
            for addr in brokers {
                let list = admin.transactions(&addr, max).await.map_err(e)?;
                transactions_report(&addr, &list, &mut r);
            }
        }
        AdminCommand::Pop {
            cluster,
            broker,
            group,
        } => {
            let brokers = match broker {
                Some(b) => vec![b],
                None => admin
                    .cluster_masters(&cluster)
                    .await
                    .map_err(e)?
                    .into_iter()
                    .map(|(_, addr)| addr)
                    .collect(),
            };
            return crate::admin_ops::pop(admin, &brokers, group.as_deref()).await;
        }
        AdminCommand::Group(g) => return crate::admin_verbs::group(admin, g).await,
        AdminCommand::BrokerConfig(c) => return crate::admin_verbs::broker_config(admin, c).await,
        AdminCommand::ConsumeQueue {
            topic,
            broker_name,
            queue,
            index,
            count,
            group,
        } => {
            return crate::admin_verbs::consume_queue(
                admin,
                &topic,
                &broker_name,
                queue,
                index,
                count,
                group.as_deref(),
            )
            .await;
        }
        AdminCommand::CloneOffset {
            src,
            dest,
            topic,
            offline,
        } => return crate::admin_verbs::clone_offset(admin, &src, &dest, &topic, offline).await,
        AdminCommand::Kv(k) => return crate::admin_verbs::kv(admin, k).await,
        AdminCommand::User(u) => return crate::admin_auth::user(admin, u).await,
        AdminCommand::Acl(a) => return crate::admin_auth::acl(admin, a).await,
        AdminCommand::Ledger(_) => unreachable!("ledger verbs are run by admin()"),
    }
    Ok(r)
}

/// `basalt admin topic ...`.
async fn topic_verb(admin: &Admin, cmd: TopicCommand) -> Result<Report, String> {
    let e = |e: basalt_client::ClientError| e.to_string();
    let mut r = Report::new();
    match cmd {
        TopicCommand::Create {
            topic,
            queues,
            perm,
            cluster,
            broker,
        } => {
            let mut t = TopicConfig::new(topic.clone(), queues);
            t.perm = perm;
            let on = match broker {
                Some(b) => {
                    admin.create_topic(&b, &t).await.map_err(e)?;
                    vec![b]
                }
                None => {
                    let on = admin
                        .create_topic_in_cluster(&cluster, &t)
                        .await
                        .map_err(e)?;
                    r.text(format!("created on {} ({cluster})", on.join(", ")));
                    on
                }
            };
            let b = r.json_table("brokers", &["broker"]);
            for addr in on {
                r.row(b, vec![json!(addr)]);
            }
            r.field(
                "topic",
                json!({"topic": topic, "queues": queues, "perm": perm}),
                format!("topic {topic}: {queues} queues, perm {perm}"),
            );
        }
        TopicCommand::List => {
            let mut topics = admin.topic_list().await.map_err(e)?;
            topics.sort();
            let t = r.table("topics", &["topic"]);
            for topic in topics {
                r.row(t, vec![json!(topic)]);
            }
        }
        TopicCommand::Delete { topic, cluster } => {
            admin.delete_topic(&topic, &cluster).await.map_err(e)?;
            r.field("deleted", topic.clone(), format!("deleted {topic}"));
        }
        TopicCommand::Route { topic } => {
            let route = admin.topic_route(&topic).await.map_err(e)?;
            let b = r.table("brokers", &["broker", "cluster", "id", "address"]);
            for bd in &route.broker_datas {
                let addrs: BTreeMap<_, _> = bd.broker_addrs.iter().collect();
                for (id, addr) in addrs {
                    r.row(
                        b,
                        vec![
                            json!(bd.broker_name),
                            json!(bd.cluster),
                            json!(id),
                            json!(addr),
                        ],
                    );
                }
            }
            let q = r.table("queues", &["broker", "read", "write", "perm"]);
            for qd in &route.queue_datas {
                r.row(
                    q,
                    vec![
                        json!(qd.broker_name),
                        json!(qd.read_queue_nums),
                        json!(qd.write_queue_nums),
                        json!(qd.perm),
                    ],
                );
            }
            if let Some(conf) = &route.order_topic_conf {
                r.field("orderTopicConf", conf.clone(), format!("order conf {conf}"));
            }
        }
        TopicCommand::Stats { topic } => {
            let stats = admin.topic_stats(&topic).await.map_err(e)?;
            let t = r.table("queues", &["broker", "queue", "min", "max"]);
            for s in stats {
                r.row(
                    t,
                    vec![
                        json!(s.queue.broker_name),
                        json!(s.queue.queue_id),
                        json!(s.min_offset),
                        json!(s.max_offset),
                    ],
                );
            }
        }
    }
    Ok(r)
}

/// `basalt admin cluster`: one row per broker with its traffic and
/// replication state.
async fn cluster_table(admin: &Admin, r: &mut Report) -> Result<(), basalt_client::ClientError> {
    let info = admin.cluster_info().await?;
    let t = r.table(
        "brokers",
        &[
            "cluster",
            "broker",
            "id",
            "address",
            "role",
            "put",
            "get",
            "replication",
        ],
    );
    for (cluster, names) in &info.cluster_addr_table {
        let mut names: Vec<_> = names.iter().collect();
        names.sort();
        for name in names {
            let Some(bd) = info.broker_addr_table.get(name.as_str()) else {
                continue;
            };
            let addrs: BTreeMap<_, _> = bd.broker_addrs.iter().collect();
            for (id, addr) in addrs {
                let rt = admin.broker_runtime_info(addr).await.unwrap_or_default();
                let get = |k: &str| rt.get(k).cloned().map_or(Value::Null, Value::String);
                r.row(
                    t,
                    vec![
                        json!(cluster),
                        json!(name),
                        json!(id),
                        json!(addr),
                        get("brokerRole"),
                        get("msgPutTotalTodayNow"),
                        get("msgGetTotalTodayNow"),
                        json!(replication_summary(&rt)),
                    ],
                );
            }
        }
    }
    Ok(())
}

/// A consumer group's members and what it subscribes to; an expression
/// the broker cannot compile is shown with the reason.
fn consumer_report(group: &str, c: &basalt_client::ConsumerConnection, r: &mut Report) {
    r.field(
        "group",
        json!({
            "group": group,
            "consumeType": c.consume_type.name(),
            "messageModel": c.message_model.name(),
            "consumeFromWhere": c.consume_from_where.name(),
        }),
        format!(
            "group {group}: {} {} {}",
            c.consume_type.name(),
            c.message_model.name(),
            c.consume_from_where.name()
        ),
    );
    let t = r.table("connections", &["client", "address", "language", "version"]);
    for conn in &c.connection_set {
        r.row(
            t,
            vec![
                json!(conn.client_id),
                json!(conn.client_addr),
                json!(conn.language),
                json!(conn.version),
            ],
        );
    }
    let t = r.table(
        "subscriptions",
        &["topic", "type", "subVersion", "expression", "error"],
    );
    for (topic, s) in &c.subscription_table {
        let expr_type = if s.expression_type.is_empty() {
            basalt_broker::filter::TAG
        } else {
            s.expression_type.as_str()
        };
        let compiled = basalt_broker::filter::SubscriptionFilter::for_subscription(
            &s.expression_type,
            &s.sub_string,
            &s.tags_set,
        );
        let error = compiled.err().map_or(Value::Null, |e| json!(e.to_string()));
        r.row(
            t,
            vec![
                json!(topic),
                json!(expr_type),
                json!(s.sub_version),
                json!(s.sub_string),
                error,
            ],
        );
    }
}

fn message_table(r: &mut Report) -> crate::admin_output::TableId {
    r.table(
        "messages",
        &[
            "broker", "queue", "offset", "msgId", "tags", "keys", "size", "body",
        ],
    )
}

fn message_row(r: &mut Report, t: crate::admin_output::TableId, m: &MessageExt) {
    let text = String::from_utf8_lossy(&m.body);
    let shown: String = text.chars().take(200).collect();
    r.row(
        t,
        vec![
            json!(m.broker_name),
            json!(m.queue_id),
            json!(m.queue_offset),
            json!(m.msg_id),
            m.tags.as_deref().map_or(Value::Null, |t| json!(t)),
            if m.keys.is_empty() {
                Value::Null
            } else {
                json!(m.keys.join(" "))
            },
            json!(m.body.len()),
            json!(format!("{shown:?}")),
        ],
    );
}

/// One broker's unresolved transactions, oldest first.
fn transactions_report(
    addr: &str,
    list: &basalt_remoting::protocol::TransactionList,
    r: &mut Report,
) {
    r.text(format!(
        "broker {addr}: {} unresolved{} (half queue checked to {} of {}, op queue read to {})",
        list.transactions.len(),
        if list.truncated { " or more" } else { "" },
        list.half_progress,
        list.half_max_offset,
        list.op_progress
    ));
    let b = r.json_table(
        "brokers",
        &[
            "broker",
            "unresolved",
            "truncated",
            "halfProgress",
            "halfMaxOffset",
            "opProgress",
        ],
    );
    r.row(
        b,
        vec![
            json!(addr),
            json!(list.transactions.len()),
            json!(list.truncated),
            json!(list.half_progress),
            json!(list.half_max_offset),
            json!(list.op_progress),
        ],
    );
    if list.transactions.is_empty() {
        return;
    }
    let t = r.table(
        "transactions",
        &[
            "broker",
            "transactionId",
            "producerGroup",
            "topic",
            "queue",
            "ageSecs",
            "checks",
        ],
    );
    let now = basalt_common::time::now_millis();
    for tx in &list.transactions {
        let age = (now - tx.born_timestamp).max(0) as f64 / 1000.0;
        r.row(
            t,
            vec![
                json!(addr),
                json!(tx.transaction_id),
                json!(tx.producer_group),
                json!(tx.topic),
                json!(tx.queue_id),
                json!((age * 10.0).round() / 10.0),
                json!(tx.check_times),
            ],
        );
    }
}

/// `basalt admin timers`: one row per broker from its runtime info.
async fn timers_table(admin: &Admin, r: &mut Report) -> Result<(), basalt_client::ClientError> {
    let info = admin.cluster_info().await?;
    let t = r.table(
        "brokers",
        &[
            "broker",
            "id",
            "address",
            "mode",
            "pending",
            "nextDueInSecs",
            "readLagSecs",
            "enqueueLag",
            "delivered",
            "enqueueTps",
            "dequeueTps",
        ],
    );
    let now = basalt_common::time::now_millis();
    let mut names: Vec<_> = info.broker_addr_table.keys().collect();
    names.sort();
    for name in names {
        let bd = &info.broker_addr_table[name];
        let addrs: BTreeMap<_, _> = bd.broker_addrs.iter().collect();
        for (id, addr) in addrs {
            let rt = admin.broker_runtime_info(addr).await.unwrap_or_default();
            let get = |k: &str| rt.get(k).cloned().map_or(Value::Null, Value::String);
            let next = match rt.get("timerNextDueMs").and_then(|v| v.parse::<i64>().ok()) {
                Some(at) => json!(((at - now) as f64 / 100.0).round() / 10.0),
                None => Value::Null,
            };
            r.row(
                t,
                vec![
                    json!(name),
                    json!(id),
                    json!(addr),
                    get("timerMode"),
                    get("timerCongestNum"),
                    next,
                    get("timerReadBehind"),
                    get("timerOffsetBehind"),
                    get("timerDelivered"),
                    get("timerEnqueueTps"),
                    get("timerDequeueTps"),
                ],
            );
        }
    }
    Ok(())
}

/// One cell describing a broker's replication state from its runtime info.
fn replication_summary(rt: &BTreeMap<String, String>) -> String {
    let get = |k: &str| rt.get(k).map(String::as_str);
    if let Some(role) = get("ledgerRole") {
        let followers = match get("ledgerFollowerLag") {
            Some(f) if !f.is_empty() => format!(" follower lag {f}"),
            _ => String::new(),
        };
        return format!(
            "ledger {} {} term {} leader {} end {} committed {} lag {}{followers}",
            get("ledgerSelfId").unwrap_or("-"),
            role,
            get("ledgerTerm").unwrap_or("-"),
            get("ledgerLeaderId")
                .filter(|l| !l.is_empty())
                .unwrap_or("-"),
            get("ledgerEndIndex").unwrap_or("-"),
            get("ledgerCommittedIndex").unwrap_or("-"),
            get("ledgerLag").unwrap_or("-")
        );
    }
    if let Some(n) = get("haConnections") {
        return format!(
            "master: {n} slave(s), slave lag {} bytes",
            get("slaveFallBehindBytes").unwrap_or("-")
        );
    }
    if let Some(m) = get("haMasterAddr") {
        return format!(
            "slave of {m} ({}), lag {} bytes",
            if get("haConnected") == Some("true") {
                "connected"
            } else {
                "disconnected"
            },
            get("slaveFallBehindBytes").unwrap_or("-")
        );
    }
    "-".into()
}
