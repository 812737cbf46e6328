//! Transactional messages and request-reply through the unchanged RocketMQ
//! Rust client (`rocketmq-client-rust` 1.0.0), against `basalt standalone`
//! processes with short check intervals:
//!
//! 1. a committed transaction is delivered once, a rolled-back one never,
//!    and one whose producer answered "unknown" is checked back and then
//!    delivered;
//! 2. a transaction that stays unknown is checked `transactionCheckMax`
//!    times and then moved to `TRANS_CHECK_MAX_TIME_TOPIC`; `basalt admin
//!    transactions` lists it while it is open;
//! 3. under SYNC_FLUSH the broker is killed (-9) between a half message and
//!    its commit: after the restart the check commits it once, and the
//!    decisions made before the kill hold (not stored again, not checked);
//! 4. a request gets its reply within its timeout (PUSH_REPLY_MESSAGE_TO_CLIENT);
//! 5. in ledger mode (three members) a commit made before the leader is
//!    killed holds, and a half in doubt at the kill is checked back and
//!    committed once by the new leader.
//!
//! COMPAT_CLIENT_LOG=<filter> shows the client's logs; BASALT_TEST_LOG_DIR
//! keeps the brokers' logs.

use crate::procs;
use crate::rmq_client;
use crate::standalone;

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use basalt_client::{Admin, ClientConfig, MessageExt as StoredMessage, TopicConfig};
use rocketmq_client_rust::{
    ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, DefaultMQPushConsumer,
    LocalTransactionState, MQPushConsumer, MessageUtil, TransactionListener, TransactionMQProducer,
};
use rocketmq_model::common::consumer::consume_from_where::ConsumeFromWhere;
use rocketmq_model::common::message::MessageTrait;
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;

use procs::eventually;
use procs::ledger_group::LedgerGroup;
use rmq_client::{
    Inbox, client_runtime, shutdown_producer, shutdown_push_consumer, start_producer,
};
use standalone::Standalone;

/// What a test transaction's local transaction says, when it runs and when
/// the broker checks it back. Carried in the message's `case` property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    /// Commits at once.
    Commit,
    /// Rolls back at once.
    Rollback,
    /// Unknown at first; committed when checked.
    LateCommit,
    /// Unknown, always.
    Never,
}

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::Commit => "commit",
            Case::Rollback => "rollback",
            Case::LateCommit => "late-commit",
            Case::Never => "never",
        }
    }

    fn parse(s: &str) -> Option<Case> {
        [Case::Commit, Case::Rollback, Case::LateCommit, Case::Never]
            .into_iter()
            .find(|c| c.name() == s)
    }

    fn on_execute(self) -> LocalTransactionState {
        match self {
            Case::Commit => LocalTransactionState::CommitMessage,
            Case::Rollback => LocalTransactionState::RollbackMessage,
            Case::LateCommit | Case::Never => LocalTransactionState::Unknown,
        }
    }

    fn on_check(self) -> LocalTransactionState {
        match self {
            Case::Commit | Case::LateCommit => LocalTransactionState::CommitMessage,
            Case::Rollback => LocalTransactionState::RollbackMessage,
            Case::Never => LocalTransactionState::Unknown,
        }
    }
}

/// A check the broker sent to a producer.
#[derive(Debug, Clone)]
struct Checked {
    transaction_id: String,
    /// `TRANSACTION_CHECK_TIMES` of the checked copy.
    times: String,
    topic: String,
}

/// The test's local transactions: decided by each message's case; every
/// check is recorded.
struct Listener {
    checks: Arc<Inbox<Checked>>,
}

fn case_of(m: &dyn MessageTrait) -> Case {
    m.property(&"case".into())
        .and_then(|c| Case::parse(c.as_str()))
        .expect("test messages carry a case")
}

impl TransactionListener for Listener {
    fn execute_local_transaction(
        &self,
        msg: &dyn MessageTrait,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        case_of(msg).on_execute()
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let prop = |k: &str| {
            msg.property(&k.into())
                .map(|v| v.as_str().to_string())
                .unwrap_or_default()
        };
        self.checks.push(Checked {
            transaction_id: prop("UNIQ_KEY"),
            times: prop("TRANSACTION_CHECK_TIMES"),
            topic: msg.topic().as_str().to_string(),
        });
        case_of(msg).on_check()
    }
}

/// A transactional producer of `group` that looks `topic`'s route up as it
/// starts, so that its first heartbeat (a second later) reaches the broker
/// the checks come from.
async fn start_tx_producer(
    namesrv: &str,
    group: &str,
    scope: &str,
    topic: &str,
    checks: Arc<Inbox<Checked>>,
) -> TransactionMQProducer {
    let mut p = TransactionMQProducer::builder(client_runtime(scope))
        .producer_group(group)
        .topics(vec![topic])
        .name_server_addr(namesrv)
        .send_msg_timeout(10_000)
        .transaction_listener(Listener { checks })
        .build();
    tokio::time::timeout(Duration::from_secs(30), p.start())
        .await
        .expect("transactional producer start in time")
        .expect("transactional producer start");
    p
}

async fn shutdown_tx_producer(mut p: TransactionMQProducer) {
    tokio::time::timeout(Duration::from_secs(30), p.shutdown())
        .await
        .expect("transactional producer shutdown in time");
}

/// Sends one transactional message; returns its transaction id (UNIQ_KEY).
async fn send_tx(p: &TransactionMQProducer, topic: &str, case: Case, seq: usize) -> String {
    let mut m = Message::builder()
        .topic(topic)
        .tags("Tx")
        .body_slice(format!("{}-{seq}", case.name()).as_bytes())
        .build_unchecked();
    m.put_user_property("case".into(), case.name().into())
        .expect("case property");
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        p.send_message_in_transaction::<(), _>(m, None),
    )
    .await
    .expect("transactional send in time")
    .expect("transactional send");
    assert_eq!(r.local_transaction_state, Some(case.on_execute()));
    let sent = r.send_result.expect("send result");
    assert_eq!(
        sent.transaction_id.as_deref(),
        sent.msg_id.as_ref().map(|m| m.as_str()),
        "the broker names the unique key as the transaction id"
    );
    sent.msg_id.expect("msg id").as_str().to_string()
}

fn admin_of(broker: &Standalone) -> Admin {
    Admin::new(ClientConfig::new(broker.namesrv_addr()))
}

/// Messages stored in `topic` (the sum of its queues' max offsets).
async fn stored(admin: &Admin, topic: &str) -> i64 {
    admin
        .topic_stats(topic)
        .await
        .map(|s| s.iter().map(|q| q.max_offset).sum())
        .unwrap_or(0)
}

/// The messages of `topic` whose unique key is `id`, once the index has
/// any (the index is built after the ConsumeQueue, so a message counted in
/// the topic's stats may not be found by key for a moment).
async fn found_by_key(admin: &Admin, topic: &str, id: &str) -> Vec<StoredMessage> {
    let mut found = Vec::new();
    eventually(
        &format!("{id} in the index of {topic}"),
        Duration::from_secs(10),
        async || {
            found = admin
                .query_message_by_uniq_key(topic, id)
                .await
                .unwrap_or_default();
            !found.is_empty()
        },
    )
    .await;
    found
}

/// Transaction ids the broker lists as unresolved.
async fn open_transactions(admin: &Admin, broker: &Standalone) -> Vec<String> {
    admin
        .transactions(&broker.broker_addr(), 1000)
        .await
        .expect("list transactions")
        .transactions
        .into_iter()
        .map(|t| t.transaction_id)
        .collect()
}

/// A received message: transaction id, case, and the half markers it must
/// not carry.
#[derive(Debug, Clone)]
struct Delivered {
    transaction_id: String,
    case: String,
    body: String,
    leaked: Vec<String>,
}

async fn start_consumer(
    broker: &Standalone,
    group: &str,
    topic: &str,
    inbox: Arc<Inbox<Delivered>>,
) -> DefaultMQPushConsumer {
    let mut c = DefaultMQPushConsumer::builder(client_runtime(group))
        .name_server_addr(broker.namesrv_addr())
        .consumer_group(group.to_string())
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    c.subscribe(topic, "*").await.expect("subscribe");
    c.register_message_listener_concurrently(
        move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
            for m in msgs {
                let prop = |k: &str| m.property(&k.into()).map(|v| v.as_str().to_string());
                inbox.push(Delivered {
                    transaction_id: prop("UNIQ_KEY").unwrap_or_default(),
                    case: prop("case").unwrap_or_default(),
                    body: m
                        .body()
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default(),
                    leaked: ["TRAN_MSG", "REAL_TOPIC", "REAL_QID"]
                        .into_iter()
                        .filter(|k| prop(k).is_some())
                        .map(str::to_string)
                        .collect(),
                });
            }
            Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
        },
    );
    tokio::time::timeout(Duration::from_secs(30), c.start())
        .await
        .expect("push consumer start in time")
        .expect("push consumer start");
    c
}

/// Broker settings: a check round every 500 ms, `timeout_ms` before a
/// first check, `max` checks.
fn check_settings(timeout_ms: u64, max: i32) -> Vec<String> {
    vec![
        "transactionCheckInterval=500".to_string(),
        format!("transactionTimeOut={timeout_ms}"),
        format!("transactionCheckMax={max}"),
    ]
}

fn start_broker(dir: &tempfile::TempDir, settings: &[String]) -> Standalone {
    let sets: Vec<&str> = settings.iter().map(String::as_str).collect();
    Standalone::start(&dir.path().join("data"), &sets)
}

async fn create_topic(admin: &Admin, broker: &Standalone, topic: &str) {
    admin
        .create_topic(&broker.broker_addr(), &TopicConfig::new(topic, 4))
        .await
        .expect("create topic");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_is_delivered_rollback_never_and_unknown_is_checked_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = start_broker(&dir, &check_settings(2_000, 5));
    let admin = admin_of(&broker);
    let topic = "TxOrders";
    create_topic(&admin, &broker, topic).await;
    let delivered = Arc::new(Inbox::default());
    let consumer = start_consumer(&broker, "tx-cg-orders", topic, Arc::clone(&delivered)).await;
    let checks = Arc::new(Inbox::default());
    let producer = start_tx_producer(
        &broker.namesrv_addr(),
        "tx-pg-orders",
        "tx-pg-orders",
        topic,
        checks.clone(),
    )
    .await;

    let mut ids: HashMap<String, Case> = HashMap::new();
    for (seq, case) in [Case::Commit, Case::Rollback, Case::LateCommit]
        .into_iter()
        .cycle()
        .take(9)
        .enumerate()
    {
        ids.insert(send_tx(&producer, topic, case, seq).await, case);
    }
    let of = |c: Case| -> Vec<String> {
        ids.iter()
            .filter(|(_, v)| **v == c)
            .map(|(k, _)| k.clone())
            .collect()
    };
    // The unknown ones wait for their check; the broker lists them.
    let open = open_transactions(&admin, &broker).await;
    for id in of(Case::LateCommit) {
        assert!(open.contains(&id), "{id} is open: {open:?}");
    }

    let want = of(Case::Commit).len() + of(Case::LateCommit).len();
    let deadline = Instant::now() + Duration::from_secs(30);
    let all_in = delivered
        .wait_until(deadline, |got| got.len() >= want)
        .await;
    assert!(all_in, "delivered: {:?}", delivered.snapshot());
    // Three more check rounds: nothing else may arrive.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let got = delivered.snapshot();
    let mut per_id: HashMap<&str, usize> = HashMap::new();
    for d in &got {
        *per_id.entry(d.transaction_id.as_str()).or_default() += 1;
        let case = ids.get(&d.transaction_id).copied();
        assert!(
            matches!(case, Some(Case::Commit | Case::LateCommit)),
            "only committed transactions are delivered: {d:?}"
        );
        assert_eq!(d.case, case.map(Case::name).unwrap_or_default());
        assert!(d.body.starts_with(&d.case), "{d:?}");
        assert!(
            d.leaked.is_empty(),
            "half markers on a delivered message: {d:?}"
        );
    }
    assert_eq!(per_id.len(), want, "every committed transaction: {got:?}");
    assert!(per_id.values().all(|n| *n == 1), "each once: {per_id:?}");
    assert_eq!(stored(&admin, topic).await, want as i64, "stored once each");

    // Only the unknown ones were checked, with their real topic.
    let checked = checks.snapshot();
    for c in &checked {
        assert_eq!(ids.get(&c.transaction_id), Some(&Case::LateCommit), "{c:?}");
        assert_eq!(c.topic, topic);
        assert_eq!(c.times, "1", "committed at the first check: {c:?}");
    }
    for id in of(Case::LateCommit) {
        assert!(
            checked.iter().any(|c| c.transaction_id == id),
            "{id} checked"
        );
    }
    assert!(open_transactions(&admin, &broker).await.is_empty());
    let info = admin
        .broker_runtime_info(&broker.broker_addr())
        .await
        .expect("runtime info");
    assert_eq!(
        info.get("transactionCommitTotal").map(String::as_str),
        Some("6")
    );
    assert_eq!(
        info.get("transactionRollbackTotal").map(String::as_str),
        Some("3")
    );

    shutdown_tx_producer(producer).await;
    shutdown_push_consumer(consumer).await;
    admin.shutdown();
}

/// Runs `basalt admin transactions` and returns its output.
fn admin_cli_transactions(broker: &Standalone) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["admin", "--namesrv", &broker.namesrv_addr(), "transactions"])
        .output()
        .expect("run basalt admin transactions");
    assert!(
        out.status.success(),
        "basalt admin transactions: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_forever_goes_to_the_check_max_topic_after_max_checks() {
    const MAX: i32 = 3;
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = start_broker(&dir, &check_settings(2_000, MAX));
    let admin = admin_of(&broker);
    let topic = "TxNever";
    create_topic(&admin, &broker, topic).await;
    let checks = Arc::new(Inbox::default());
    let producer = start_tx_producer(
        &broker.namesrv_addr(),
        "tx-pg-never",
        "tx-pg-never",
        topic,
        checks.clone(),
    )
    .await;
    let id = send_tx(&producer, topic, Case::Never, 0).await;

    let listed = admin_cli_transactions(&broker);
    assert!(
        listed.contains(&id) && listed.contains("tx-pg-never") && listed.contains(topic),
        "basalt admin transactions lists the open transaction:\n{listed}"
    );

    let max_topic = "TRANS_CHECK_MAX_TIME_TOPIC";
    eventually(
        "the half message in TRANS_CHECK_MAX_TIME_TOPIC",
        Duration::from_secs(30),
        async || stored(&admin, max_topic).await == 1,
    )
    .await;
    let found = found_by_key(&admin, max_topic, &id).await;
    assert_eq!(found.len(), 1, "the given-up message, once: {found:?}");
    assert_eq!(found[0].body, b"never-0".to_vec());
    assert_eq!(found[0].properties.get("REAL_TOPIC"), Some(topic));

    let times: Vec<String> = checks
        .snapshot()
        .into_iter()
        .filter(|c| c.transaction_id == id)
        .map(|c| c.times)
        .collect();
    let want: Vec<String> = (1..=MAX).map(|t| t.to_string()).collect();
    assert_eq!(
        times, want,
        "checked transactionCheckMax times, counting up"
    );
    assert_eq!(stored(&admin, topic).await, 0, "never delivered");
    assert!(open_transactions(&admin, &broker).await.is_empty());
    let listed = admin_cli_transactions(&broker);
    assert!(listed.contains("0 unresolved"), "{listed}");
    let info = admin
        .broker_runtime_info(&broker.broker_addr())
        .await
        .expect("runtime info");
    assert_eq!(
        info.get("transactionDiscardTotal").map(String::as_str),
        Some("1")
    );
    assert_eq!(
        info.get("transactionCheckTotal").map(String::as_str),
        Some(MAX.to_string().as_str())
    );

    shutdown_tx_producer(producer).await;
    admin.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_hold_across_a_kill_9_under_sync_flush() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut settings = check_settings(4_000, 10);
    settings.push("flushDiskType=SYNC_FLUSH".into());
    let mut broker = start_broker(&dir, &settings);
    let admin = admin_of(&broker);
    let topic = "TxCrash";
    create_topic(&admin, &broker, topic).await;
    let checks = Arc::new(Inbox::default());
    let producer = start_tx_producer(
        &broker.namesrv_addr(),
        "tx-pg-crash",
        "tx-pg-crash-1",
        topic,
        checks.clone(),
    )
    .await;

    // Decided before the kill: a commit and a rollback.
    let committed = send_tx(&producer, topic, Case::Commit, 0).await;
    let rolled_back = send_tx(&producer, topic, Case::Rollback, 1).await;
    // Between half and commit: the producer does not know yet.
    let in_doubt = send_tx(&producer, topic, Case::LateCommit, 2).await;
    eventually(
        "both decisions recorded",
        Duration::from_secs(10),
        async || {
            let open = open_transactions(&admin, &broker).await;
            !open.contains(&committed) && !open.contains(&rolled_back)
        },
    )
    .await;
    assert!(open_transactions(&admin, &broker).await.contains(&in_doubt));
    assert_eq!(stored(&admin, topic).await, 1, "only the commit is stored");
    assert!(checks.snapshot().is_empty(), "killed before any check");
    broker.kill();

    broker.restart();
    // The producer application comes back too (the old client reconnects
    // only at its next heartbeat, 30 s away).
    let producer2 = start_tx_producer(
        &broker.namesrv_addr(),
        "tx-pg-crash",
        "tx-pg-crash-2",
        topic,
        checks.clone(),
    )
    .await;
    eventually(
        "the in-doubt transaction committed after its check",
        Duration::from_secs(30),
        async || stored(&admin, topic).await == 2,
    )
    .await;
    let found = found_by_key(&admin, topic, &in_doubt).await;
    assert_eq!(found.len(), 1, "committed once: {found:?}");
    assert_eq!(found[0].body, b"late-commit-2".to_vec());
    assert_eq!(
        found[0].sys_flag & 0xC,
        0x8,
        "stored as a committed transaction"
    );
    assert!(found[0].prepared_transaction_offset > 0, "names its half");
    // Three more rounds: nothing is stored again, nothing else is checked.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(stored(&admin, topic).await, 2, "each decision stored once");
    let checked: Vec<String> = checks
        .snapshot()
        .into_iter()
        .map(|c| c.transaction_id)
        .collect();
    assert!(checked.contains(&in_doubt), "{checked:?}");
    assert!(
        checked.iter().all(|c| *c == in_doubt),
        "decided transactions are not checked again: {checked:?}"
    );
    assert!(open_transactions(&admin, &broker).await.is_empty());

    shutdown_tx_producer(producer2).await;
    let mut producer = producer;
    let _ = tokio::time::timeout(Duration::from_secs(10), producer.shutdown()).await;
    admin.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_gets_its_reply_within_the_timeout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let broker = start_broker(&dir, &[]);
    let admin = admin_of(&broker);
    let topic = "RequestReply";
    create_topic(&admin, &broker, topic).await;

    // The replier: a consumer that answers each request through a producer.
    let replier = Arc::new(start_producer(&broker, "rr-pg-replier").await);
    let runtime = tokio::runtime::Handle::current();
    let mut consumer = DefaultMQPushConsumer::builder(client_runtime("rr-cg"))
        .name_server_addr(broker.namesrv_addr())
        .consumer_group("rr-cg")
        .consume_from_where(ConsumeFromWhere::ConsumeFromFirstOffset)
        .build();
    consumer.subscribe(topic, "*").await.expect("subscribe");
    {
        let replier = Arc::clone(&replier);
        consumer.register_message_listener_concurrently(
            move |msgs: &[&MessageExt], _ctx: &ConsumeConcurrentlyContext| {
                for m in msgs {
                    let body = m.body().map(|b| b.to_vec()).unwrap_or_default();
                    let answer = [b"re: ".as_slice(), &body].concat();
                    let reply = MessageUtil::create_reply_message(&m.message, &answer)
                        .expect("a request carries what a reply needs");
                    let replier = Arc::clone(&replier);
                    runtime.spawn(async move {
                        if let Err(e) = replier.send(reply).await {
                            eprintln!("reply send failed: {e}");
                        }
                    });
                }
                Ok(ConsumeConcurrentlyStatus::ConsumeSuccess)
            },
        );
    }
    tokio::time::timeout(Duration::from_secs(30), consumer.start())
        .await
        .expect("consumer start in time")
        .expect("consumer start");

    let requester = start_producer(&broker, "rr-pg-requester").await;
    const TIMEOUT_MS: u64 = 10_000;
    for i in 0..3 {
        let m = Message::builder()
            .topic(topic)
            .body_slice(format!("ping-{i}").as_bytes())
            .build_unchecked();
        let asked = Instant::now();
        let reply = requester
            .request(m, TIMEOUT_MS)
            .await
            .expect("a reply within the timeout");
        assert!(asked.elapsed() < Duration::from_millis(TIMEOUT_MS));
        assert_eq!(
            reply.get_body().map(|b| b.to_vec()),
            Some(format!("re: ping-{i}").into_bytes())
        );
        assert_eq!(
            reply.topic().as_str(),
            "DefaultCluster_REPLY_TOPIC",
            "the reply comes from the cluster's reply topic"
        );
    }
    // With storeReplyMessageEnable (the default) the replies are kept too
    // (stored after the push, so the last may land a moment later).
    eventually(
        "the three replies stored in the reply topic",
        Duration::from_secs(10),
        async || stored(&admin, "DefaultCluster_REPLY_TOPIC").await == 3,
    )
    .await;

    shutdown_producer(requester).await;
    shutdown_push_consumer(consumer).await;
    if let Ok(replier) = Arc::try_unwrap(replier) {
        shutdown_producer(replier).await;
    }
    admin.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_mode_decisions_survive_a_leader_kill() {
    let work = tempfile::tempdir().expect("temp dir");
    let mut group = LedgerGroup::start(work.path(), &check_settings(5_000, 10));
    let mut config = ClientConfig::new(group.ns_addr.clone());
    config.poll_name_server_interval = Duration::from_millis(300);
    config.request_timeout = Duration::from_secs(3);
    let admin = Admin::new(config);
    let leader = group.master(&admin, None).await;
    let topic = "TxLedger";
    group.create_topic(&admin, &leader, topic, 4).await;
    let checks = Arc::new(Inbox::default());
    let producer = start_tx_producer(
        &group.ns_addr,
        "tx-pg-ledger",
        "tx-pg-ledger-1",
        topic,
        checks.clone(),
    )
    .await;
    let committed = send_tx(&producer, topic, Case::Commit, 0).await;
    let rolled_back = send_tx(&producer, topic, Case::Rollback, 1).await;
    let in_doubt = send_tx(&producer, topic, Case::LateCommit, 2).await;
    assert!(checks.snapshot().is_empty(), "killed before any check");
    // END_TRANSACTION is one-way: give the leader time to store both
    // decisions (the commit's message, the rollback's op), which it does only
    // once they are committed in the ledger; a kill before that leaves them
    // undecided, and the new leader rightly checks them. Bounded, and not an
    // assertion: the checks below judge what happened.
    let decided = async {
        loop {
            let open: Vec<String> = admin
                .transactions(&leader, 1000)
                .await
                .map(|l| {
                    l.transactions
                        .into_iter()
                        .map(|t| t.transaction_id)
                        .collect()
                })
                .unwrap_or_default();
            if open == [in_doubt.clone()] && stored(&admin, topic).await == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    // 30 s: a run that shared two cores with builds once took over 10.
    let _ = tokio::time::timeout(Duration::from_secs(30), decided).await;
    group.kill9(&leader);

    let new_leader = group.master(&admin, Some(&leader)).await;
    let producer2 = start_tx_producer(
        &group.ns_addr,
        "tx-pg-ledger",
        "tx-pg-ledger-2",
        topic,
        checks.clone(),
    )
    .await;
    eventually(
        "the in-doubt transaction committed by the new leader",
        Duration::from_secs(40),
        async || {
            admin
                .query_message_by_uniq_key(topic, &in_doubt)
                .await
                .is_ok_and(|f| !f.is_empty())
        },
    )
    .await;
    // Three more rounds: nothing is stored again, nothing else is checked.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for (id, want) in [(&committed, 1), (&rolled_back, 0), (&in_doubt, 1)] {
        let found = admin
            .query_message_by_uniq_key(topic, id)
            .await
            .unwrap_or_default();
        assert_eq!(found.len(), want, "{id} on {new_leader}: {found:?}");
    }
    let stats = admin.topic_stats(topic).await.expect("topic stats");
    let stored: i64 = stats.iter().map(|q| q.max_offset).sum();
    assert_eq!(stored, 2, "the two commits, once each: {stats:?}");
    let checked: Vec<String> = checks
        .snapshot()
        .into_iter()
        .map(|c| c.transaction_id)
        .collect();
    assert!(checked.contains(&in_doubt), "{checked:?}");
    assert!(
        checked.iter().all(|c| *c == in_doubt),
        "decided transactions are not checked again: {checked:?}"
    );
    assert!(
        admin
            .transactions(&new_leader, 1000)
            .await
            .expect("list transactions")
            .transactions
            .is_empty()
    );

    shutdown_tx_producer(producer2).await;
    let mut producer = producer;
    let _ = tokio::time::timeout(Duration::from_secs(10), producer.shutdown()).await;
    admin.shutdown();
}
