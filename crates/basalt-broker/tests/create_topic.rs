//! UPDATE_AND_CREATE_TOPIC answers only after the NameServers have the new
//! topic, as in RocketMQ (AdminBrokerProcessor registers synchronously), so
//! a client may route to a topic as soon as it has created it.

use std::sync::Arc;
use std::time::Duration;

use basalt_broker::BrokerConfig;
use basalt_remoting::code::{request, response};
use basalt_remoting::header::{CommandHeader, CreateTopicRequestHeader};
use basalt_remoting::{
    Channel, ClientConfig, RemotingClient, RemotingCommand, RemotingServer, RequestProcessor,
};
use parking_lot::Mutex;

/// A NameServer stand-in that answers REGISTER_BROKER slowly and logs, in
/// order, each registration it has answered.
struct SlowNamesrv {
    events: Arc<Mutex<Vec<String>>>,
}

impl RequestProcessor for SlowNamesrv {
    async fn process(&self, _ch: &Channel, req: RemotingCommand) -> Option<RemotingCommand> {
        let mut resp = RemotingCommand::response(response::SUCCESS, None);
        resp.opaque = req.opaque;
        if req.code == request::REGISTER_BROKER {
            // Hold the answer, so a broker that does not wait for it answers
            // its own client first.
            tokio::time::sleep(Duration::from_millis(300)).await;
            let body = String::from_utf8_lossy(&req.body);
            let has_fresh = body.contains("\"FreshTopic\"");
            self.events.lock().push(format!(
                "namesrv answered a registration with FreshTopic={has_fresh}"
            ));
        }
        Some(resp)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topic_answers_after_the_namesrv_has_the_topic() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let ns = RemotingServer::bind(
        "127.0.0.1:0",
        Arc::new(SlowNamesrv {
            events: events.clone(),
        }),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = BrokerConfig::default();
    cfg.store_path_root_dir = dir.path().to_path_buf();
    cfg.listen_addr = "127.0.0.1".parse().unwrap();
    cfg.listen_port = 0;
    cfg.namesrv_addr = Some(ns.local_addr().to_string());
    cfg.auto_create_topic_enable = false;
    cfg.mapped_file_size_commit_log = 1024 * 1024;
    let broker = basalt_broker::start(cfg).await.unwrap();
    let addr = broker.broker().broker_addr();

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
    let client = RemotingClient::new(ClientConfig::default());
    let r = client
        .invoke(
            &addr,
            RemotingCommand::request(request::UPDATE_AND_CREATE_TOPIC).with_ext(h.to_ext()),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
    events
        .lock()
        .push("broker answered UPDATE_AND_CREATE_TOPIC".into());

    let events = events.lock().clone();
    let registered = events
        .iter()
        .position(|e| e == "namesrv answered a registration with FreshTopic=true");
    let answered = events
        .iter()
        .position(|e| e == "broker answered UPDATE_AND_CREATE_TOPIC");
    assert!(
        registered.is_some() && registered < answered,
        "the topic must be registered before the create is answered: {events:#?}"
    );
    broker.shutdown().await;
    ns.shutdown().await;
}
