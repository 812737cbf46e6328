//! Admin client against scripted fake brokers and a real basalt-namesrv.

mod common;

use std::time::Duration;

use basalt_client::{Admin, ClientConfig, ClientError, TopicConfig, TopicQueue};
use basalt_remoting::code::request;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_clusters_stats_and_message_lookup() {
    let (ns, ns_addr) = start_namesrv().await;
    let a = FakeBroker::start("broker-a", &ns_addr, &[("TA", 2)]).await;
    let b = FakeBroker::start("broker-b", &ns_addr, &[("TA", 1)]).await;
    let admin = Admin::new(ClientConfig {
        request_timeout: Duration::from_secs(5),
        ..ClientConfig::new(&ns_addr)
    });

    let info = admin.cluster_info().await.unwrap();
    assert_eq!(
        info.cluster_addr_table[CLUSTER]
            .iter()
            .cloned()
            .collect::<Vec<_>>(),
        ["broker-a", "broker-b"]
    );
    assert_eq!(
        info.broker_addr_table["broker-b"].master_addr(),
        Some(b.addr())
    );
    let masters = admin.cluster_masters(CLUSTER).await.unwrap();
    assert_eq!(masters.len(), 2);
    assert!(matches!(
        admin.cluster_masters("nope").await,
        Err(ClientError::InvalidArgument(_))
    ));

    let topics = admin.topic_list().await.unwrap();
    assert!(topics.contains(&"TA".to_string()) && topics.contains(&"TBW102".to_string()));
    let route = admin.topic_route("TA").await.unwrap();
    assert_eq!(route.queue_datas.len(), 2);
    assert!(matches!(
        admin.topic_route("Missing").await,
        Err(ClientError::NoRoute { .. })
    ));

    // Create a topic on every master; it shows up in the route.
    let created = admin
        .create_topic_in_cluster(CLUSTER, &TopicConfig::new("TNew", 3))
        .await
        .unwrap();
    assert_eq!(created.len(), 2);
    let req = &a.requests_with(request::UPDATE_AND_CREATE_TOPIC)[0];
    assert_eq!(req.ext_fields.get("topic"), Some("TNew"));
    assert_eq!(req.ext_fields.get("readQueueNums"), Some("3"));
    assert_eq!(req.ext_fields.get("perm"), Some("6"));
    assert_eq!(req.ext_fields.get("topicFilterType"), Some("SINGLE_TAG"));
    let mut found = false;
    for _ in 0..300 {
        if let Ok(r) = admin.topic_route("TNew").await
            && r.queue_datas.len() == 2
        {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(found, "TNew never reached the NameServer");

    // Stats over both brokers.
    a.put(
        "TA",
        1,
        b"x",
        "KEYS\u{1}order-1 order-2\u{2}UNIQ_KEY\u{1}U1\u{2}",
    );
    a.put("TA", 1, b"y", "KEYS\u{1}order-3\u{2}");
    b.put("TA", 0, b"z", "KEYS\u{1}order-1\u{2}UNIQ_KEY\u{1}U2\u{2}");
    let stats = admin.topic_stats("TA").await.unwrap();
    let got: Vec<(String, i32, i64)> = stats
        .iter()
        .map(|s| (s.queue.broker_name.clone(), s.queue.queue_id, s.max_offset))
        .collect();
    assert_eq!(
        got,
        [
            ("broker-a".into(), 0, 0),
            ("broker-a".into(), 1, 2),
            ("broker-b".into(), 0, 1)
        ]
    );

    let runtime = admin.broker_runtime_info(a.addr()).await.unwrap();
    assert_eq!(runtime["brokerVersion"], "401");

    // Lookups by key (across brokers) and by offset msgId.
    let by_key = admin
        .query_message_by_key("TA", "order-1", 32, 0, i64::MAX)
        .await
        .unwrap();
    let mut bodies: Vec<Vec<u8>> = by_key.iter().map(|m| m.body.to_vec()).collect();
    bodies.sort();
    assert_eq!(bodies, [b"x".to_vec(), b"z".to_vec()]);
    let by_uniq = admin.query_message_by_uniq_key("TA", "U2").await.unwrap();
    assert_eq!(by_uniq.len(), 1);
    let z = &by_uniq[0];
    assert_eq!(z.broker_name, "broker-b");
    let viewed = admin.view_message(&z.offset_msg_id).await.unwrap();
    assert_eq!(&viewed.body[..], b"z");
    assert_eq!(viewed.msg_id, "U2");
    assert!(matches!(
        admin.view_message("not-an-id").await,
        Err(ClientError::InvalidArgument(_))
    ));

    // Offsets of one queue.
    let mq = TopicQueue::new("TA", "broker-a", 1);
    assert_eq!(admin.max_offset(&mq).await.unwrap(), 2);
    assert_eq!(admin.min_offset(&mq).await.unwrap(), 0);

    // Delete: every master, then every NameServer.
    admin.delete_topic("TNew", CLUSTER).await.unwrap();
    assert_eq!(a.count(request::DELETE_TOPIC_IN_BROKER), 1);
    assert_eq!(b.count(request::DELETE_TOPIC_IN_BROKER), 1);
    assert!(matches!(
        admin.topic_route("TNew").await,
        Err(ClientError::NoRoute { .. })
    ));
    admin.shutdown();
    a.shutdown().await;
    b.shutdown().await;
    ns.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_progress_and_connections() {
    use basalt_client::{ConsumeStatus, PushConsumer};
    let (ns, ns_addr) = start_namesrv().await;
    let a = FakeBroker::start("broker-a", &ns_addr, &[("TS", 2)]).await;
    for i in 0..5 {
        a.put("TS", 0, format!("m{i}").as_bytes(), "");
    }
    a.put("TS", 1, b"m", "");
    let config = ClientConfig {
        request_timeout: Duration::from_secs(5),
        ..ClientConfig::new(&ns_addr)
    };
    let c = PushConsumer::new("CGS", config.clone());
    c.subscribe("TS", "*").unwrap();
    c.register_listener(|_, _| ConsumeStatus::Success);
    c.start().await.unwrap();
    a.set_consumer_offset("CGS", "TS", 0, 3);
    a.set_consumer_offset("CGS", "TS", 1, 1);

    let admin = Admin::new(config);
    let mut progress = None;
    for _ in 0..300 {
        // The retry topic's route appears once the broker has registered it.
        match admin.consume_stats("CGS", Some("TS")).await {
            Ok(p) => {
                progress = Some(p);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    let progress = progress.expect("consume stats");
    let lags: Vec<(i32, i64, i64, i64)> = progress
        .queues
        .iter()
        .map(|q| {
            (
                q.queue.queue_id,
                q.broker_offset,
                q.consumer_offset,
                q.lag(),
            )
        })
        .collect();
    assert_eq!(lags, [(0, 5, 3, 2), (1, 1, 1, 0)]);
    assert_eq!(progress.total_lag(), 2);
    assert_eq!(progress.consume_tps, 1.5);

    let conns = admin.consumer_connections("CGS").await.unwrap();
    assert_eq!(conns.connection_set.len(), 1);
    assert_eq!(conns.connection_set[0].client_id, c.instance().client_id());
    assert!(conns.subscription_table.contains_key("TS"));
    assert_eq!(conns.consume_type.name(), "CONSUME_PASSIVELY");

    c.shutdown().await;
    assert!(admin.consumer_connections("CGS").await.is_err());
    admin.shutdown();
    a.shutdown().await;
    ns.shutdown().await;
}
