//! A broker that creates a topic tells the NameServers before it answers
//! the request that created it, as RocketMQ does (TopicConfigManager and
//! AdminBrokerProcessor register synchronously): UPDATE_AND_CREATE_TOPIC, a
//! send that auto-creates its topic, and a first heartbeat that creates the
//! group's retry topic. A client may then route to the topic at once.
//!
//! The topic goes alone: with `enableSingleTopicRegister` in
//! REGISTER_TOPIC_IN_NAMESRV (RocketMQ 5's `registerSingleTopicAll`) when
//! the NameServer takes that, else in a full REGISTER_BROKER; without it
//! (RocketMQ's default) in a REGISTER_BROKER that lists only that topic
//! (`registerIncrementBrokerData`). The periodic full registration brings a
//! NameServer that missed it up to date.

use std::sync::Arc;
use std::time::Duration;

use basalt_broker::{BrokerConfig, BrokerHandle};
use basalt_namesrv::{NameServer, NamesrvConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, CreateTopicRequestHeader, GetRouteInfoRequestHeader, SendMessageRequestHeader,
};
use basalt_remoting::protocol::TopicRouteData;
use basalt_remoting::{
    Channel, RemotingClient, RemotingClientConfig, RemotingCommand, RemotingServer,
    RequestProcessor, ServerHandle,
};
use parking_lot::Mutex;

/// A NameServer stand-in that answers registrations slowly and logs each
/// one it has answered, in order: the code and the topics it listed. With
/// `single_topic` off it answers REGISTER_TOPIC_IN_NAMESRV as a NameServer
/// without that code does.
struct SlowNamesrv {
    registered: Arc<Mutex<Vec<(i32, String)>>>,
    single_topic: bool,
}

impl RequestProcessor for SlowNamesrv {
    async fn process(&self, _ch: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        let mut resp = RemotingCommand::response(response::SUCCESS, None);
        resp.opaque = req.opaque;
        let listed = match req.code {
            request::REGISTER_BROKER => String::from_utf8_lossy(&req.body).into_owned(),
            request::REGISTER_TOPIC_IN_NAMESRV if self.single_topic => {
                let topic = req.ext_fields.get("topic").unwrap_or_default();
                format!("\"{topic}\" {}", String::from_utf8_lossy(&req.body))
            }
            request::REGISTER_TOPIC_IN_NAMESRV => {
                resp.code = response::REQUEST_CODE_NOT_SUPPORTED;
                return Some(resp);
            }
            _ => return Some(resp),
        };
        // Hold the answer, so a broker that does not wait for it answers
        // its own client first.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.registered.lock().push((req.code, listed));
        Some(resp)
    }
}

/// A broker on a free port of 127.0.0.1 with its store in `dir`,
/// registering with `namesrv` (`;`-separated addresses).
fn broker_config(dir: &tempfile::TempDir, namesrv: String) -> BrokerConfig {
    BrokerConfig {
        store_path_root_dir: dir.path().to_path_buf(),
        listen_addr: "127.0.0.1".parse().unwrap(),
        listen_port: 0,
        namesrv_addr: Some(namesrv),
        mapped_file_size_commit_log: 1024 * 1024,
        // Tests must not depend on how full the machine's disk is.
        disk_space_warning_level_ratio: 100,
        disk_space_clean_forcibly_ratio: 100,
        ..Default::default()
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    ns: ServerHandle,
    broker: BrokerHandle,
    registered: Arc<Mutex<Vec<(i32, String)>>>,
    client: RemotingClient,
}

async fn setup() -> Setup {
    setup_with(true, true).await
}

/// `single_topic`: the NameServer takes code 217; `broker_single`: the
/// broker's `enableSingleTopicRegister`.
async fn setup_with(single_topic: bool, broker_single: bool) -> Setup {
    let registered = Arc::new(Mutex::new(Vec::new()));
    let ns = RemotingServer::bind(
        "127.0.0.1:0",
        Arc::new(SlowNamesrv {
            registered: registered.clone(),
            single_topic,
        }),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig {
        enable_single_topic_register: broker_single,
        ..broker_config(&dir, ns.local_addr().to_string())
    };
    let broker = basalt_broker::start(cfg).await.unwrap();
    Setup {
        _dir: dir,
        ns,
        broker,
        registered,
        client: RemotingClient::new(RemotingClientConfig::default()),
    }
}

impl Setup {
    /// Sends `cmd` and checks that, by the time the answer arrives, the
    /// NameServer has answered a registration that lists `topic`; returns
    /// the code of that registration.
    async fn answered_after_registration_of(&self, cmd: RemotingCommand, topic: &str) -> i32 {
        let addr = self.broker.broker().broker_addr();
        let r = self
            .client
            .invoke(&addr, cmd, Duration::from_secs(20))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let quoted = format!("\"{topic}\"");
        let registered = self.registered.lock().clone();
        let found = registered.iter().find(|(_, body)| body.contains(&quoted));
        let Some((code, _)) = found else {
            panic!(
                "answered before any registration listed {topic}; registrations so far: {}",
                registered.len()
            );
        };
        *code
    }

    async fn stop(self) {
        self.broker.shutdown().await;
        self.ns.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topic_answers_after_the_namesrv_has_the_topic() {
    let s = setup().await;
    let h = CreateTopicRequestHeader {
        topic: "FreshTopic".into(),
        default_topic: Some("TBW102".into()),
        read_queue_nums: 8,
        write_queue_nums: 8,
        perm: 6,
        topic_filter_type: Some("SINGLE_TAG".into()),
        topic_sys_flag: Some(0),
        order: Some(false),
        attributes: None,
        force: Some(false),
    };
    let cmd = RemotingCommand::request(request::UPDATE_AND_CREATE_TOPIC).with_ext(h.to_ext());
    s.answered_after_registration_of(cmd, "FreshTopic").await;
    s.stop().await;
}

fn first_send(topic: &str) -> RemotingCommand {
    let h = SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some("TAGS\u{1}A\u{2}".into()),
        ..Default::default()
    };
    RemotingCommand::request(request::SEND_MESSAGE_V2)
        .with_ext(h.to_ext_v2())
        .with_body(b"first".to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_created_topic_is_registered_before_the_send_is_answered() {
    let s = setup().await;
    let code = s
        .answered_after_registration_of(first_send("AutoTopic"), "AutoTopic")
        .await;
    // Alone, not in a whole topic table.
    assert_eq!(code, request::REGISTER_TOPIC_IN_NAMESRV);
    let full = s
        .registered
        .lock()
        .iter()
        .filter(|(c, b)| *c == request::REGISTER_BROKER && b.contains("\"AutoTopic\""))
        .count();
    assert_eq!(full, 0, "a full registration listed the topic too");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namesrv_without_code_217_gets_the_whole_table() {
    let s = setup_with(false, true).await;
    let code = s
        .answered_after_registration_of(first_send("AutoTopic"), "AutoTopic")
        .await;
    assert_eq!(code, request::REGISTER_BROKER);
    s.stop().await;
}

/// RocketMQ's default (`enableSingleTopicRegister=false`): the new topic
/// goes in a REGISTER_BROKER whose table holds it alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_the_topic_goes_alone_in_a_register_broker() {
    let s = setup_with(true, false).await;
    let code = s
        .answered_after_registration_of(first_send("AutoTopic"), "AutoTopic")
        .await;
    assert_eq!(code, request::REGISTER_BROKER);
    let registered = s.registered.lock().clone();
    let (_, body) = registered
        .iter()
        .find(|(_, b)| b.contains("\"AutoTopic\""))
        .unwrap();
    assert!(!body.contains("TBW102"), "the whole table was sent: {body}");
    assert!(
        registered
            .iter()
            .all(|(c, _)| *c != request::REGISTER_TOPIC_IN_NAMESRV)
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_topic_is_registered_before_the_first_heartbeat_is_answered() {
    let s = setup().await;
    let body = r#"{"clientID":"127.0.0.1@1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"NewGroup","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1,"tagsSet":[],"topic":"T"}],"unitMode":false}],"producerDataSet":[]}"#;
    let cmd = RemotingCommand::request(request::HEART_BEAT).with_body(body.as_bytes().to_vec());
    s.answered_after_registration_of(cmd, "%RETRY%NewGroup")
        .await;
    s.stop().await;
}

async fn route_of(client: &RemotingClient, namesrv: &str, topic: &str) -> Option<TopicRouteData> {
    let h = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: None,
    };
    let cmd = RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC).with_ext(h.to_ext());
    let r = client
        .invoke(namesrv, cmd, Duration::from_secs(5))
        .await
        .ok()?;
    (r.code == response::SUCCESS).then(|| TopicRouteData::decode(&r.body).expect("route body"))
}

/// With a real NameServer: the route is there as soon as the first send is
/// answered; a second NameServer that was down then gets the topic from
/// the periodic full registration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namesrv_routes_the_new_topic_and_a_late_one_converges() {
    let up = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let late_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig {
        register_name_server_period: Duration::from_millis(500),
        ..broker_config(&dir, format!("{};{late_addr}", up.local_addr()))
    };
    let broker = basalt_broker::start(cfg).await.unwrap();
    let client = RemotingClient::new(RemotingClientConfig::default());
    let addr = broker.broker().broker_addr();
    let r = client
        .invoke(&addr, first_send("Fresh"), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    let up_addr = up.local_addr().to_string();
    let route = route_of(&client, &up_addr, "Fresh")
        .await
        .expect("the NameServer routes the topic once the send is answered");
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].broker_name, "broker-a");
    assert!(route.queue_datas[0].write_queue_nums > 0);

    let late = NameServer::start(NamesrvConfig {
        listen: late_addr,
        ..Default::default()
    })
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let converged = loop {
        tick.tick().await;
        if let Some(r) = route_of(&client, &late_addr.to_string(), "Fresh").await {
            break r;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the late NameServer never got the topic"
        );
    };
    assert_eq!(converged.queue_datas, route.queue_datas);
    broker.shutdown().await;
    late.shutdown().await;
    up.shutdown().await;
}

/// Topics created at once, each registered alone in a REGISTER_BROKER
/// (RocketMQ's default): every one is routed as soon as its send is
/// answered. Each registration carries the version its own change made; with
/// the table's current version, the creations that shared one journal sync
/// all carried the same version, and the NameServer, which takes a table
/// only when the version changed, kept the first topic and dropped the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_created_at_once_are_all_routed() {
    let ns = NameServer::start(NamesrvConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig {
        // No periodic round during the test: only the single-topic
        // registrations can have routed the topics.
        register_name_server_period: Duration::from_secs(3600),
        enable_single_topic_register: false,
        ..broker_config(&dir, ns.local_addr().to_string())
    };
    let broker = basalt_broker::start(cfg).await.unwrap();
    let client = Arc::new(RemotingClient::new(RemotingClientConfig::default()));
    let addr = broker.broker().broker_addr();
    let topics: Vec<String> = (0..8).map(|i| format!("AtOnce{i}")).collect();
    let mut sends = tokio::task::JoinSet::new();
    for t in &topics {
        let (client, addr, t) = (Arc::clone(&client), addr.clone(), t.clone());
        sends.spawn(async move {
            client
                .invoke(&addr, first_send(&t), Duration::from_secs(20))
                .await
        });
    }
    while let Some(r) = sends.join_next().await {
        let r = r.unwrap().unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    }
    let ns_addr = ns.local_addr().to_string();
    for t in &topics {
        assert!(
            route_of(&client, &ns_addr, t).await.is_some(),
            "{t} is not routed after its send was answered"
        );
    }
    broker.shutdown().await;
    ns.shutdown().await;
}
