//! `basalt produce`, `basalt consume` and `basalt admin`: operator tools on
//! top of basalt-client.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use basalt_client::{
    Admin, ClientConfig, ConsumeStatus, Message, MessageExt, Producer, PullConsumer, PullStatus,
    PushConsumeFrom, PushConsumer, PushOptions, TopicConfig, TopicQueue,
};
use bytes::Bytes;

use crate::cli::{
    AdminCommand, ConsumeArgs, LedgerCommand, MessageCommand, ProduceArgs, TopicCommand,
};

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

pub fn produce(a: ProduceArgs) -> Result<ExitCode, String> {
    runtime()?.block_on(async move {
        let producer = Producer::new(a.group.clone(), ClientConfig::new(a.namesrv.clone()));
        producer
            .start()
            .await
            .map_err(|e| format!("producer: {e}"))?;
        let make = |body: Bytes, i: u64| {
            let mut m = Message::new(a.topic.clone(), body);
            if let Some(t) = &a.tags {
                m = m.with_tags(t.clone());
            }
            if let Some(k) = &a.keys {
                m = m.with_key(k.replace("{i}", &i.to_string()));
            }
            for p in &a.property {
                if let Some((k, v)) = p.split_once('=') {
                    m = m.with_property(k, v);
                }
            }
            if a.delay_level > 0 {
                m = m.with_delay_level(a.delay_level);
            }
            m
        };
        let mut sent = 0u64;
        let mut failed = 0u64;
        // Stored by the broker but not (yet) flushed or replicated as its
        // flushDiskType / brokerRole promise: FLUSH_DISK_TIMEOUT,
        // FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE.
        let mut not_ok = 0u64;
        let mut report = |r: Result<basalt_client::SendResult, basalt_client::ClientError>,
                          verbose: bool| match r {
            Ok(r) => {
                sent += 1;
                if r.status != basalt_client::SendStatus::SendOk {
                    not_ok += 1;
                }
                if verbose {
                    println!(
                        "{} msgId={} queue={}:{} offset={}",
                        r.status.name(),
                        r.msg_id,
                        r.queue.broker_name,
                        r.queue.queue_id,
                        r.queue_offset
                    );
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("send failed: {e}");
            }
        };
        if a.stdin {
            let lines: Vec<String> = std::io::stdin()
                .lock()
                .lines()
                .map_while(Result::ok)
                .collect();
            for (i, l) in lines.into_iter().enumerate() {
                let r = producer
                    .send(&make(Bytes::from(l.into_bytes()), i as u64))
                    .await;
                report(r, true);
            }
        } else {
            let verbose = a.count <= 20;
            for i in 0..a.count {
                let body = if let Some(b) = &a.body {
                    Bytes::from(b.clone().into_bytes())
                } else {
                    let mut b = format!("message {i} ").into_bytes();
                    b.resize(a.size.max(b.len()), b'x');
                    Bytes::from(b)
                };
                let r = producer.send(&make(body, i)).await;
                report(r, verbose);
            }
        }
        if not_ok > 0 {
            println!("sent {sent} ({not_ok} of them not SEND_OK), failed {failed}");
        } else {
            println!("sent {sent}, failed {failed}");
        }
        producer.shutdown().await;
        Ok(if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    })
}

fn print_message(m: &MessageExt, body: bool) {
    let text = String::from_utf8_lossy(&m.body);
    let shown: String = text.chars().take(200).collect();
    print!(
        "{}:{} offset={} msgId={} tags={} keys={} size={}",
        m.broker_name,
        m.queue_id,
        m.queue_offset,
        m.msg_id,
        m.tags.as_deref().unwrap_or("-"),
        if m.keys.is_empty() {
            "-".to_string()
        } else {
            m.keys.join(" ")
        },
        m.body.len()
    );
    if body {
        print!(" body={shown:?}");
    }
    println!();
}

pub fn consume(a: ConsumeArgs) -> Result<ExitCode, String> {
    runtime()?.block_on(async move {
        if let Some(q) = a.queue {
            return consume_pull(&a, q).await;
        }
        let from = match a.from.as_str() {
            "first" => PushConsumeFrom::FirstOffset,
            "last" => PushConsumeFrom::LastOffset,
            other => return Err(format!("--from {other:?}: expected first or last")),
        };
        let opts = PushOptions {
            consume_from_where: from,
            ..Default::default()
        };
        let consumer =
            PushConsumer::with_options(a.group.clone(), ClientConfig::new(a.namesrv.clone()), opts);
        consumer
            .subscribe(&a.topic, a.tags.as_deref().unwrap_or("*"))
            .map_err(|e| e.to_string())?;
        let count = Arc::new(AtomicU64::new(0));
        let done = Arc::new(tokio::sync::Notify::new());
        {
            let count = Arc::clone(&count);
            let done = Arc::clone(&done);
            let (quiet, want, body) = (a.quiet, a.count, !a.no_body);
            consumer.register_listener(move |msgs, _ctx| {
                for m in msgs {
                    if !quiet {
                        print_message(m, body);
                    }
                }
                let n = count.fetch_add(msgs.len() as u64, Ordering::Relaxed) + msgs.len() as u64;
                if want > 0 && n >= want {
                    done.notify_one();
                }
                ConsumeStatus::Success
            });
        }
        consumer
            .start()
            .await
            .map_err(|e| format!("consumer: {e}"))?;
        let wait = async {
            match a.timeout {
                Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = done.notified() => {}
            _ = wait => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        consumer.shutdown().await;
        println!("consumed {}", count.load(Ordering::Relaxed));
        Ok(ExitCode::SUCCESS)
    })
}

async fn consume_pull(a: &ConsumeArgs, queue: i32) -> Result<ExitCode, String> {
    let consumer = PullConsumer::new(a.group.clone(), ClientConfig::new(a.namesrv.clone()));
    consumer
        .start()
        .await
        .map_err(|e| format!("consumer: {e}"))?;
    let queues = consumer
        .fetch_queues(&a.topic)
        .await
        .map_err(|e| e.to_string())?;
    let mq: TopicQueue = queues
        .into_iter()
        .find(|q| q.queue_id == queue && a.broker.as_deref().is_none_or(|b| q.broker_name == b))
        .ok_or_else(|| format!("topic {} has no queue {queue}", a.topic))?;
    let mut offset = match a.offset {
        Some(o) => o,
        None if a.from == "last" => consumer.max_offset(&mq).await.map_err(|e| e.to_string())?,
        None => consumer.min_offset(&mq).await.map_err(|e| e.to_string())?,
    };
    let mut got = 0u64;
    let expr = a.tags.clone().unwrap_or_else(|| "*".into());
    while a.count == 0 || got < a.count {
        let r = consumer
            .pull(&mq, &expr, offset, 32, Duration::from_secs(10))
            .await
            .map_err(|e| e.to_string())?;
        match r.status {
            PullStatus::Found => {
                for m in &r.msgs {
                    if !a.quiet {
                        print_message(m, !a.no_body);
                    }
                    got += 1;
                }
            }
            PullStatus::NoNewMsg => break,
            _ => {}
        }
        if r.next_begin_offset == offset {
            break;
        }
        offset = r.next_begin_offset;
    }
    println!("consumed {got}, next offset {offset}");
    consumer.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

pub fn admin(cmd: AdminCommand, namesrv: String) -> Result<ExitCode, String> {
    runtime()?.block_on(async move {
        let admin = Admin::new(ClientConfig::new(namesrv));
        let r = admin_inner(&admin, cmd).await;
        admin.shutdown();
        r
    })
}

async fn admin_inner(admin: &Admin, cmd: AdminCommand) -> Result<ExitCode, String> {
    let e = |e: basalt_client::ClientError| e.to_string();
    match cmd {
        AdminCommand::Topic(TopicCommand::Create {
            topic,
            queues,
            perm,
            cluster,
            broker,
        }) => {
            let mut t = TopicConfig::new(topic.clone(), queues);
            t.perm = perm;
            match broker {
                Some(b) => admin.create_topic(&b, &t).await.map_err(e)?,
                None => {
                    let on = admin
                        .create_topic_in_cluster(&cluster, &t)
                        .await
                        .map_err(e)?;
                    println!("created on {} ({cluster})", on.join(", "));
                }
            }
            println!("topic {topic}: {queues} queues, perm {perm}");
        }
        AdminCommand::Topic(TopicCommand::List) => {
            let mut topics = admin.topic_list().await.map_err(e)?;
            topics.sort();
            for t in topics {
                println!("{t}");
            }
        }
        AdminCommand::Topic(TopicCommand::Delete { topic, cluster }) => {
            admin.delete_topic(&topic, &cluster).await.map_err(e)?;
            println!("deleted {topic}");
        }
        AdminCommand::Topic(TopicCommand::Route { topic }) => {
            let r = admin.topic_route(&topic).await.map_err(e)?;
            for b in &r.broker_datas {
                println!(
                    "broker {} ({}): {:?}",
                    b.broker_name, b.cluster, b.broker_addrs
                );
            }
            for q in &r.queue_datas {
                println!(
                    "queues on {}: read {} write {} perm {}",
                    q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm
                );
            }
        }
        AdminCommand::Topic(TopicCommand::Stats { topic }) => {
            let stats = admin.topic_stats(&topic).await.map_err(e)?;
            println!(
                "{:<20} {:>5} {:>12} {:>12}",
                "broker", "queue", "min", "max"
            );
            for s in stats {
                println!(
                    "{:<20} {:>5} {:>12} {:>12}",
                    s.queue.broker_name, s.queue.queue_id, s.min_offset, s.max_offset
                );
            }
        }
        AdminCommand::Cluster => {
            let info = admin.cluster_info().await.map_err(e)?;
            println!(
                "{:<16} {:<16} {:>3} {:<22} {:<12} {:>10} {:>10} replication",
                "cluster", "broker", "id", "address", "role", "put", "get"
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
                        let get = |k: &str| rt.get(k).cloned().unwrap_or_else(|| "-".into());
                        let repl = replication_summary(&rt);
                        println!(
                            "{:<16} {:<16} {:>3} {:<22} {:<12} {:>10} {:>10} {}",
                            cluster,
                            name,
                            id,
                            addr,
                            get("brokerRole"),
                            get("msgPutTotalTodayNow"),
                            get("msgGetTotalTodayNow"),
                            repl
                        );
                    }
                }
            }
        }
        AdminCommand::Timers => timers_table(admin).await.map_err(e)?,
        AdminCommand::Broker { addr } => {
            let rt = admin.broker_runtime_info(&addr).await.map_err(e)?;
            for (k, v) in rt {
                println!("{k:<32} {v}");
            }
        }
        AdminCommand::Progress { group, topic } => {
            let p = admin
                .consume_stats(&group, topic.as_deref())
                .await
                .map_err(e)?;
            println!(
                "{:<24} {:<16} {:>5} {:>12} {:>12} {:>10}",
                "topic", "broker", "queue", "broker-off", "consumer-off", "lag"
            );
            for q in &p.queues {
                println!(
                    "{:<24} {:<16} {:>5} {:>12} {:>12} {:>10}",
                    q.queue.topic,
                    q.queue.broker_name,
                    q.queue.queue_id,
                    q.broker_offset,
                    q.consumer_offset,
                    q.lag()
                );
            }
            println!("total lag {}", p.total_lag());
        }
        AdminCommand::Consumer { group } => {
            let c = admin.consumer_connections(&group).await.map_err(e)?;
            print_consumer(&group, &c);
        }
        AdminCommand::Message(MessageCommand::Key { topic, key }) => {
            let msgs = admin
                .query_message_by_key(&topic, &key, 64, 0, i64::MAX)
                .await
                .map_err(e)?;
            for m in &msgs {
                print_message(m, true);
            }
            println!("{} message(s)", msgs.len());
        }
        AdminCommand::Message(MessageCommand::Id { id }) => {
            let m = admin.view_message(&id).await.map_err(e)?;
            print_message(&m, true);
            for (k, v) in m.properties.iter() {
                println!("  {k} = {v}");
            }
        }
        AdminCommand::WritePerm {
            broker_name, on, ..
        } => crate::admin_ops::write_perm(admin, &broker_name, on).await?,
        AdminCommand::ResetOffset {
            group,
            topic,
            time,
            no_force,
        } => {
            let ms = crate::admin_ops::parse_time(&time)?;
            crate::admin_ops::reset_offset(admin, &group, &topic, ms, !no_force).await?
        }
        AdminCommand::SkipAccumulated { group, topic } => {
            crate::admin_ops::reset_offset(admin, &group, &topic, -1, true).await?
        }
        AdminCommand::Producer { group, topic } => {
            crate::admin_ops::producer(admin, &group, &topic).await?
        }
        AdminCommand::ConsumerStatus { group, client_id } => {
            crate::admin_ops::consumer_status(admin, &group, client_id.as_deref()).await?
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
                print_transactions(&addr, &list);
            }
        }
        AdminCommand::Ledger(LedgerCommand::Status {
            cluster,
            broker_name,
            json,
        }) => crate::ledger_admin::status(admin, &cluster, broker_name.as_deref(), json).await?,
        AdminCommand::Ledger(LedgerCommand::Transfer {
            to,
            cluster,
            broker_name,
            json,
        }) => {
            crate::ledger_admin::transfer(admin, &cluster, broker_name.as_deref(), &to, json)
                .await?
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A consumer group's members and what it subscribes to; an expression
/// the broker cannot compile is shown with the reason.
fn print_consumer(group: &str, c: &basalt_client::ConsumerConnection) {
    println!(
        "group {group}: {} {} {}",
        c.consume_type.name(),
        c.message_model.name(),
        c.consume_from_where.name()
    );
    println!(
        "{:<40} {:<22} {:<8} version",
        "client", "address", "language"
    );
    for conn in &c.connection_set {
        println!(
            "{:<40} {:<22} {:<8} {}",
            conn.client_id, conn.client_addr, conn.language, conn.version
        );
    }
    println!(
        "{:<32} {:<6} {:>15}  expression",
        "topic", "type", "sub-version"
    );
    for (topic, s) in &c.subscription_table {
        let expr_type = if s.expression_type.is_empty() {
            basalt_broker::filter::TAG
        } else {
            s.expression_type.as_str()
        };
        println!(
            "{:<32} {:<6} {:>15}  {}",
            topic, expr_type, s.sub_version, s.sub_string
        );
        let compiled = basalt_broker::filter::SubscriptionFilter::for_subscription(
            &s.expression_type,
            &s.sub_string,
            &s.tags_set,
        );
        if let Err(err) = compiled {
            println!("{:<32} ! {err}", "");
        }
    }
}

/// One broker's unresolved transactions, oldest first.
fn print_transactions(addr: &str, list: &basalt_remoting::protocol::TransactionList) {
    println!(
        "broker {addr}: {} unresolved{} (half queue checked to {} of {}, op queue read to {})",
        list.transactions.len(),
        if list.truncated { " or more" } else { "" },
        list.half_progress,
        list.half_max_offset,
        list.op_progress
    );
    if list.transactions.is_empty() {
        return;
    }
    println!(
        "{:<34} {:<20} {:<24} {:>5} {:>10} {:>6}",
        "transaction-id", "producer-group", "topic", "queue", "age", "checks"
    );
    let now = basalt_common::time::now_millis();
    for t in &list.transactions {
        let age = (now - t.born_timestamp).max(0) as f64 / 1000.0;
        println!(
            "{:<34} {:<20} {:<24} {:>5} {:>9.1}s {:>6}",
            t.transaction_id, t.producer_group, t.topic, t.queue_id, age, t.check_times
        );
    }
}

/// `basalt admin timers`: one line per broker from its runtime info.
async fn timers_table(admin: &Admin) -> Result<(), basalt_client::ClientError> {
    let info = admin.cluster_info().await?;
    println!(
        "{:<16} {:>3} {:<22} {:<8} {:>10} {:>14} {:>8} {:>8} {:>10} {:>8} {:>8}",
        "broker",
        "id",
        "address",
        "mode",
        "pending",
        "next-due",
        "read-lag",
        "enq-lag",
        "delivered",
        "enq/s",
        "deq/s"
    );
    let now = basalt_common::time::now_millis();
    let mut names: Vec<_> = info.broker_addr_table.keys().collect();
    names.sort();
    for name in names {
        let bd = &info.broker_addr_table[name];
        let addrs: BTreeMap<_, _> = bd.broker_addrs.iter().collect();
        for (id, addr) in addrs {
            let rt = admin.broker_runtime_info(addr).await.unwrap_or_default();
            let get = |k: &str| rt.get(k).cloned().unwrap_or_else(|| "-".into());
            let next = match rt.get("timerNextDueMs").and_then(|v| v.parse::<i64>().ok()) {
                Some(at) => format!("in {:.1}s", (at - now) as f64 / 1000.0),
                None => "-".into(),
            };
            println!(
                "{:<16} {:>3} {:<22} {:<8} {:>10} {:>14} {:>7}s {:>8} {:>10} {:>8} {:>8}",
                name,
                id,
                addr,
                get("timerMode"),
                get("timerCongestNum"),
                next,
                get("timerReadBehind"),
                get("timerOffsetBehind"),
                get("timerDelivered"),
                get("timerEnqueueTps"),
                get("timerDequeueTps"),
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
