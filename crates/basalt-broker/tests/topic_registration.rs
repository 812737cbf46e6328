//! A broker that creates a topic tells the NameServers before it answers
//! the request that created it, as RocketMQ does (TopicConfigManager and
//! AdminBrokerProcessor register synchronously): UPDATE_AND_CREATE_TOPIC, a
//! send that auto-creates its topic, and a first heartbeat that creates the
//! group's retry topic. A client may then route to the topic at once.

use std::sync::Arc;
use std::time::Duration;

use basalt_broker::{BrokerConfig, BrokerHandle};
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, CreateTopicRequestHeader, SendMessageRequestHeader};
use basalt_remoting::{
    Channel, RemotingClient, RemotingClientConfig, RemotingCommand, RemotingServer,
    RequestProcessor, ServerHandle,
};
use parking_lot::Mutex;

/// A NameServer stand-in that answers REGISTER_BROKER slowly and logs each
/// registration it has answered, in order, as the topics it listed.
struct SlowNamesrv {
    registered: Arc<Mutex<Vec<String>>>,
}

impl RequestProcessor for SlowNamesrv {
    async fn process(&self, _ch: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        let mut resp = RemotingCommand::response(response::SUCCESS, None);
        resp.opaque = req.opaque;
        if req.code == request::REGISTER_BROKER {
            // Hold the answer, so a broker that does not wait for it answers
            // its own client first.
            tokio::time::sleep(Duration::from_millis(300)).await;
            self.registered
                .lock()
                .push(String::from_utf8_lossy(&req.body).into_owned());
        }
        Some(resp)
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    ns: ServerHandle,
    broker: BrokerHandle,
    registered: Arc<Mutex<Vec<String>>>,
    client: RemotingClient,
}

async fn setup() -> Setup {
    let registered = Arc::new(Mutex::new(Vec::new()));
    let ns = RemotingServer::bind(
        "127.0.0.1:0",
        Arc::new(SlowNamesrv {
            registered: registered.clone(),
        }),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = BrokerConfig {
        store_path_root_dir: dir.path().to_path_buf(),
        listen_addr: "127.0.0.1".parse().unwrap(),
        listen_port: 0,
        namesrv_addr: Some(ns.local_addr().to_string()),
        mapped_file_size_commit_log: 1024 * 1024,
        // Tests must not depend on how full the machine's disk is.
        disk_space_warning_level_ratio: 100,
        disk_space_clean_forcibly_ratio: 100,
        ..Default::default()
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
    /// NameServer has answered a registration that lists `topic`.
    async fn answered_after_registration_of(&self, cmd: RemotingCommand, topic: &str) {
        let addr = self.broker.broker().broker_addr();
        let r = self
            .client
            .invoke(&addr, cmd, Duration::from_secs(20))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let quoted = format!("\"{topic}\"");
        let registered = self.registered.lock().clone();
        assert!(
            registered.iter().any(|body| body.contains(&quoted)),
            "answered before any registration listed {topic}; registrations so far: {}",
            registered.len()
        );
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_created_topic_is_registered_before_the_send_is_answered() {
    let s = setup().await;
    let h = SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: "AutoTopic".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some("TAGS\u{1}A\u{2}".into()),
        ..Default::default()
    };
    let cmd = RemotingCommand::request(request::SEND_MESSAGE_V2)
        .with_ext(h.to_ext_v2())
        .with_body(b"first".to_vec());
    s.answered_after_registration_of(cmd, "AutoTopic").await;
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
