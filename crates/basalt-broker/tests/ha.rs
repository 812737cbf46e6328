//! Master/slave HA in one process: SYNC_MASTER waits for the slave, the
//! slave's CommitLog becomes byte-identical, metadata follows, and a master
//! without its slave answers SLAVE_NOT_AVAILABLE; transactions end on the
//! master only and their decisions reach the slave.
#![allow(clippy::field_reassign_with_default)] // configs read like broker.conf, one key a line

mod tx_wire;

use std::time::{Duration, Instant};

use basalt_broker::{BrokerConfig, BrokerHandle};
use basalt_common::config::BrokerRole;
use basalt_common::properties::Properties;
use basalt_namesrv::{NameServer, NamesrvConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, PullMessageRequestHeader, PullMessageResponseHeader, SendMessageRequestHeader,
    SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
};
use basalt_remoting::{RemotingClient, RemotingClientConfig, RemotingCommand};

fn config(dir: &std::path::Path, ns: &str, role: BrokerRole) -> BrokerConfig {
    let mut cfg = BrokerConfig::default();
    // Tests must not depend on how full the machine's disk is.
    cfg.disk_space_warning_level_ratio = 100;
    cfg.disk_space_clean_forcibly_ratio = 100;
    cfg.store_path_root_dir = dir.to_path_buf();
    cfg.listen_addr = "127.0.0.1".parse().unwrap();
    cfg.listen_port = 0;
    cfg.namesrv_addr = Some(ns.to_string());
    cfg.mapped_file_size_commit_log = 256 * 1024;
    cfg.mapped_file_size_consume_queue = 1000 * 20;
    cfg.max_message_size = 64 * 1024;
    cfg.broker_role = role;
    cfg.sync_flush_timeout = Duration::from_secs(3);
    cfg.slave_sync_interval = Duration::from_millis(300);
    cfg.register_name_server_period = Duration::from_millis(300);
    cfg.enable_property_filter = true;
    if role == BrokerRole::Slave {
        cfg.broker_id = 1;
    }
    cfg
}

async fn send(client: &RemotingClient, addr: &str, topic: &str, body: Vec<u8>) -> RemotingCommand {
    let mut p = Properties::new();
    p.set("TAGS", "T");
    // The message number in the body ("msg-17-xxx"), for SQL92 selectors.
    let n = String::from_utf8_lossy(&body)
        .split('-')
        .nth(1)
        .unwrap_or_default()
        .to_string();
    p.set("n", n);
    let h = SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: -1,
        born_timestamp: basalt_common::time::now_millis(),
        properties: Some(String::from_utf8(p.encode()).unwrap()),
        ..Default::default()
    };
    client
        .invoke(
            addr,
            RemotingCommand::request(request::SEND_MESSAGE_V2)
                .with_ext(h.to_ext_v2())
                .with_body(body),
            Duration::from_secs(10),
        )
        .await
        .unwrap()
}

fn commit_log_bytes(dir: &std::path::Path, upto: i64) -> Vec<u8> {
    let mut files: Vec<_> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        out.extend(std::fs::read(f).unwrap());
    }
    out.truncate(upto as usize);
    out
}

/// The bodies a SQL92 pull gets from every queue of `topic`, sorted.
async fn pull_sql(client: &RemotingClient, addr: &str, topic: &str, sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    for queue_id in 0..4 {
        let mut offset = 0;
        loop {
            let h = PullMessageRequestHeader {
                consumer_group: "G".into(),
                topic: topic.into(),
                queue_id,
                queue_offset: offset,
                max_msg_nums: 32,
                sys_flag: 0x4,
                commit_offset: 0,
                suspend_timeout_millis: 0,
                subscription: Some(sql.into()),
                sub_version: 0,
                expression_type: Some("SQL92".into()),
                max_msg_bytes: None,
            };
            let r = client
                .invoke(
                    addr,
                    RemotingCommand::request(request::PULL_MESSAGE).with_ext(h.to_ext()),
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
            match r.code {
                response::SUCCESS => {
                    for m in basalt_common::record::decode_all(&r.body, true).unwrap() {
                        out.push(String::from_utf8_lossy(&m.body).chars().take(6).collect());
                    }
                }
                response::PULL_RETRY_IMMEDIATELY => {}
                _ => break,
            }
            offset = PullMessageResponseHeader::from_ext(&r.ext_fields)
                .unwrap()
                .next_begin_offset;
        }
    }
    out.sort();
    out
}

async fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_master_replicates_and_reports_a_missing_slave() {
    if let Ok(f) = std::env::var("BASALT_LOG") {
        let _ = tracing_subscriber::fmt().with_env_filter(f).try_init();
    }

    let ns = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let ns_addr = ns.local_addr().to_string();
    let mdir = tempfile::tempdir().unwrap();
    let sdir = tempfile::tempdir().unwrap();
    let master = basalt_broker::start(config(mdir.path(), &ns_addr, BrokerRole::SyncMaster))
        .await
        .unwrap();
    let maddr = master.broker().broker_addr();
    let client = RemotingClient::new(RemotingClientConfig::default());

    // No slave yet: the message is stored but the answer says so.
    let r = send(&client, &maddr, "HaTopic", b"first".to_vec()).await;
    assert_eq!(r.code, response::SLAVE_NOT_AVAILABLE);

    // The slave finds its master through the NameServer and catches up from zero.
    let slave: BrokerHandle =
        basalt_broker::start(config(sdir.path(), &ns_addr, BrokerRole::Slave))
            .await
            .unwrap();
    let ha = master.broker().replication().ha_master().unwrap().clone();
    wait_until(
        "the slave to connect and catch up",
        Duration::from_secs(20),
        || ha.slave_in_sync(),
    )
    .await;

    for i in 0..600 {
        let r = send(
            &client,
            &maddr,
            "HaTopic",
            format!("msg-{i}-{}", "x".repeat(500)).into_bytes(),
        )
        .await;
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    }
    let mend = master.broker().store().commit_log().max_offset();
    // A SYNC_MASTER ack means the slave had it: its log reaches the end.
    let slog = slave.broker().store().commit_log().clone();
    wait_until("the slave log", Duration::from_secs(10), || {
        slog.max_offset() >= mend
    })
    .await;
    assert!(
        master.broker().store().commit_log().files().file_count() > 1,
        "several files crossed"
    );

    // Metadata follows: a consumer offset committed on the master.
    let upd = UpdateConsumerOffsetRequestHeader {
        consumer_group: "G".into(),
        topic: "HaTopic".into(),
        queue_id: 1,
        commit_offset: 7,
    };
    client
        .invoke(
            &maddr,
            RemotingCommand::request(request::UPDATE_CONSUMER_OFFSET).with_ext(upd.to_ext()),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    let sb = slave.broker().clone();
    wait_until("offset sync", Duration::from_secs(10), || {
        sb.consumer_offsets().query("G", "HaTopic", 1) == Some(7)
    })
    .await;
    assert!(sb.topics().contains("HaTopic"));
    // The slave serves property filters over what it copied.
    let store = sb.store().clone();
    let dispatched =
        tokio::task::spawn_blocking(move || store.wait_dispatched(mend, Duration::from_secs(10)))
            .await
            .unwrap();
    assert!(dispatched, "the slave dispatched what it copied");
    let selected = pull_sql(&client, &sb.broker_addr(), "HaTopic", "n < 5 OR n = 599").await;
    let want = ["msg-0-", "msg-1-", "msg-2-", "msg-3-", "msg-4-"];
    assert_eq!(&selected[..5], &want[..]);
    assert_eq!(selected.len(), 6, "{selected:?}");
    assert!(selected[5].starts_with("msg-59"), "{selected:?}");
    // The slave refuses sends.
    let r = send(
        &client,
        &slave.broker().broker_addr(),
        "HaTopic",
        b"no".to_vec(),
    )
    .await;
    assert_eq!(r.code, response::SERVICE_NOT_AVAILABLE);

    slave.shutdown().await;
    master.shutdown().await;
    // Byte-identical up to the master's end.
    assert_eq!(
        commit_log_bytes(mdir.path(), mend),
        commit_log_bytes(sdir.path(), mend)
    );

    // A master whose slave is gone answers SLAVE_NOT_AVAILABLE, not success.
    let master = basalt_broker::start(config(mdir.path(), &ns_addr, BrokerRole::SyncMaster))
        .await
        .unwrap();
    let r = send(
        &client,
        &master.broker().broker_addr(),
        "HaTopic",
        b"alone".to_vec(),
    )
    .await;
    assert_eq!(r.code, response::SLAVE_NOT_AVAILABLE);
    master.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_end_on_the_master_and_their_decisions_reach_the_slave() {
    use basalt_common::constants::topic::{TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC};
    use basalt_common::sysflag::TRANSACTION_COMMIT_TYPE;

    let ns = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let ns_addr = ns.local_addr().to_string();
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = basalt_broker::start(config(mdir.path(), &ns_addr, BrokerRole::SyncMaster))
        .await
        .unwrap();
    let slave = basalt_broker::start(config(sdir.path(), &ns_addr, BrokerRole::Slave))
        .await
        .unwrap();
    let ha = master.broker().replication().ha_master().unwrap().clone();
    wait_until("the slave in sync", Duration::from_secs(20), || {
        ha.slave_in_sync()
    })
    .await;
    let (maddr, saddr) = (master.broker().broker_addr(), slave.broker().broker_addr());
    let client = RemotingClient::new(RemotingClientConfig::default());
    let call = async |addr: &str, cmd: RemotingCommand| {
        client
            .invoke(addr, cmd, Duration::from_secs(10))
            .await
            .unwrap()
    };

    // A half under SYNC_MASTER is acknowledged once the slave has it.
    let r = call(&maddr, tx_wire::half_request("HaTx", b"order-1")).await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let sent = SendMessageResponseHeader::from_ext(&r.ext_fields).unwrap();
    let end = tx_wire::end_request(
        &sent,
        tx_wire::GROUP,
        sent.queue_offset,
        TRANSACTION_COMMIT_TYPE,
    );
    // The slave does not decide.
    let r = call(&saddr, end.clone()).await;
    assert_eq!(r.code, response::SLAVE_NOT_AVAILABLE, "{:?}", r.remark);
    let r = call(&maddr, end).await;
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);

    // The committed message and the op are in the slave's log and queues.
    let s = slave.broker().store().clone();
    wait_until("the decision on the slave", Duration::from_secs(10), || {
        s.max_offset_in_queue("HaTx", 0) == 1 && s.max_offset_in_queue(TRANS_OP_HALF_TOPIC, 0) == 1
    })
    .await;
    assert_eq!(s.max_offset_in_queue(TRANS_HALF_TOPIC, 0), 1);
    let m = master.broker().store().clone();
    assert_eq!(m.max_offset_in_queue("HaTx", 0), 1, "stored once");

    slave.shutdown().await;
    master.shutdown().await;
    ns.shutdown().await;
}
