use super::*;

fn wrapper(counter: i64, topics: &[(&str, i32)]) -> TopicConfigSerializeWrapper {
    TopicConfigSerializeWrapper {
        data_version: DataVersion {
            counter,
            state_version: 0,
            timestamp: 1000,
        },
        topic_config_table: topics
            .iter()
            .map(|(t, q)| (t.to_string(), TopicConfig::new(*t, *q)))
            .collect(),
    }
}

fn reg(
    name: &str,
    addr: &str,
    id: i64,
    w: Option<TopicConfigSerializeWrapper>,
) -> BrokerRegistration {
    BrokerRegistration {
        cluster_name: "C".into(),
        broker_addr: addr.into(),
        broker_name: name.into(),
        broker_id: id,
        ha_server_addr: format!("{addr}-ha"),
        topic_config_wrapper: w,
        ..Default::default()
    }
}

#[test]
fn master_registration_creates_routes() {
    let mut m = RouteInfoManager::default();
    let r = m.register_broker(
        reg("a", "1.1.1.1:10911", 0, Some(wrapper(1, &[("T", 4)]))),
        0,
    );
    assert_eq!(r, RegisterBrokerResult::default());
    let route = m.topic_route("T").unwrap();
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);
    assert_eq!(route.broker_datas[0].broker_addrs[&0], "1.1.1.1:10911");
    assert!(m.topic_route("missing").is_none());
    let ci = m.cluster_info();
    assert!(ci.cluster_addr_table["C"].contains("a"));
    assert_eq!(m.all_topics().topic_list.len(), 1);
    assert_eq!(m.topics_by_cluster("C").topic_list.len(), 1);
    assert!(m.topics_by_cluster("other").topic_list.is_empty());
}

#[test]
fn unchanged_data_version_skips_topic_update() {
    let mut m = RouteInfoManager::default();
    m.register_broker(reg("a", "x:1", 0, Some(wrapper(1, &[("T", 4)]))), 0);
    // Same version, different content: a known topic is not updated (Java
    // trusts the version); an unknown one is added (a RocketMQ 5.5 broker's
    // split parts all carry one version, docs/protocol.md).
    m.register_broker(
        reg("a", "x:1", 0, Some(wrapper(1, &[("T", 8), ("U", 2)]))),
        10,
    );
    assert_eq!(
        m.topic_route("T").unwrap().queue_datas[0].read_queue_nums,
        4
    );
    assert_eq!(
        m.topic_route("U").unwrap().queue_datas[0].read_queue_nums,
        2
    );
    // New version: applied.
    m.register_broker(
        reg("a", "x:1", 0, Some(wrapper(2, &[("T", 8), ("U", 2)]))),
        20,
    );
    assert_eq!(
        m.topic_route("T").unwrap().queue_datas[0].read_queue_nums,
        8
    );
    assert!(m.topic_route("U").is_some());
}

#[test]
fn slave_learns_master_addresses_and_adds_no_queues() {
    let mut m = RouteInfoManager::default();
    let r = m.register_broker(reg("a", "s:1", 1, Some(wrapper(1, &[("S", 4)]))), 0);
    assert_eq!(r, RegisterBrokerResult::default(), "no master yet");
    assert!(
        m.topic_route("S").is_none(),
        "slave topics do not create routes"
    );
    m.register_broker(reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4)]))), 0);
    let r = m.register_broker(reg("a", "s:1", 1, Some(wrapper(1, &[("S", 4)]))), 5);
    assert_eq!(r.master_addr.as_deref(), Some("m:1"));
    assert_eq!(r.ha_server_addr.as_deref(), Some("m:1-ha"));
    let route = m.topic_route("T").unwrap();
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 2);
}

#[test]
fn promoted_slave_keeps_one_entry_per_address() {
    let mut m = RouteInfoManager::default();
    m.register_broker(reg("a", "s:1", 1, None), 0);
    m.register_broker(reg("a", "s:1", 0, Some(wrapper(1, &[("T", 4)]))), 1);
    let bd = &m.cluster_info().broker_addr_table["a"];
    assert_eq!(bd.broker_addrs.len(), 1);
    assert_eq!(bd.broker_addrs[&0], "s:1");
}

#[test]
fn expiry_removes_silent_brokers_and_their_queues() {
    let mut m = RouteInfoManager::new(120_000);
    m.register_broker(reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4)]))), 0);
    m.register_broker(reg("a", "s:1", 1, None), 0);
    m.register_broker(reg("b", "n:1", 0, Some(wrapper(1, &[("T", 2)]))), 0);
    assert!(
        m.scan_expired(120_000).is_empty(),
        "exactly at the timeout: still alive"
    );
    // a's master and b keep registering; a's slave goes silent.
    m.register_broker(reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4)]))), 100_000);
    m.register_broker(reg("b", "n:1", 0, Some(wrapper(1, &[("T", 2)]))), 100_000);
    let gone = m.scan_expired(130_000);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].broker_addr, "s:1");
    assert_eq!(m.topic_route("T").unwrap().queue_datas.len(), 2);
    // Now b goes silent: its group and its queue data vanish.
    m.register_broker(reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4)]))), 200_000);
    let gone = m.scan_expired(230_000);
    assert_eq!(gone.len(), 1);
    let route = m.topic_route("T").unwrap();
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].broker_name, "a");
    assert!(!m.cluster_info().broker_addr_table.contains_key("b"));
    // Everyone silent: nothing left.
    m.scan_expired(1_000_000);
    assert!(m.topic_route("T").is_none());
    assert!(m.cluster_info().cluster_addr_table.is_empty());
    assert_eq!(m.live_broker_count(), 0);
}

#[test]
fn broker_timeout_overrides_default() {
    let mut m = RouteInfoManager::new(120_000);
    let mut r = reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4)])));
    r.heartbeat_timeout_ms = Some(10_000);
    m.register_broker(r, 0);
    assert_eq!(m.scan_expired(10_001).len(), 1);
}

#[test]
fn unregister_master_keeps_group_while_slave_remains() {
    let mut m = RouteInfoManager::default();
    m.register_broker(reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4)]))), 0);
    m.register_broker(reg("a", "s:1", 1, None), 0);
    m.unregister_broker("C", "m:1", "a", 0);
    let route = m.topic_route("T").unwrap();
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 1);
    m.unregister_broker("C", "s:1", "a", 1);
    assert!(m.topic_route("T").is_none());
    assert!(m.all_topics().topic_list.is_empty());
}

#[test]
fn delete_topic_everywhere_or_per_cluster() {
    let mut m = RouteInfoManager::default();
    m.register_broker(
        reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4), ("U", 4)]))),
        0,
    );
    let mut other = reg("z", "z:1", 0, Some(wrapper(1, &[("T", 4)])));
    other.cluster_name = "D".into();
    m.register_broker(other, 0);
    m.delete_topic("T", Some("D"));
    assert_eq!(m.topic_route("T").unwrap().queue_datas.len(), 1);
    m.delete_topic("T", None);
    assert!(m.topic_route("T").is_none());
    assert!(m.topic_route("U").is_some());
}

#[test]
fn remove_broker_by_key() {
    let mut m = RouteInfoManager::default();
    m.register_broker(reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4)]))), 0);
    assert!(m.touch("C", "m:1", 5));
    m.remove_broker(&BrokerAddrKey {
        cluster_name: "C".into(),
        broker_addr: "m:1".into(),
    });
    assert!(m.topic_route("T").is_none());
    assert!(!m.touch("C", "m:1", 6));
}

#[test]
fn write_perm_is_wiped_and_added_per_broker_group() {
    let mut m = RouteInfoManager::default();
    m.register_broker(
        reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4), ("U", 4)]))),
        0,
    );
    m.register_broker(reg("b", "n:1", 0, Some(wrapper(1, &[("T", 4)]))), 0);
    let perm_of = |m: &RouteInfoManager, t: &str, b: &str| {
        m.topic_route(t)
            .unwrap()
            .queue_datas
            .iter()
            .find(|q| q.broker_name == b)
            .unwrap()
            .perm
    };
    assert_eq!(m.set_write_perm("a", false), 2);
    assert_eq!(perm_of(&m, "T", "a"), 4);
    assert_eq!(perm_of(&m, "U", "a"), 4);
    assert_eq!(perm_of(&m, "T", "b"), 6, "other groups keep theirs");
    // An unchanged re-registration (same data version) keeps the wipe.
    m.register_broker(reg("a", "m:1", 0, Some(wrapper(1, &[("T", 4)]))), 1);
    assert_eq!(perm_of(&m, "T", "a"), 4);
    assert_eq!(m.set_write_perm("a", true), 2);
    assert_eq!(perm_of(&m, "T", "a"), 6);
    assert_eq!(m.set_write_perm("nobody", false), 0);
}

#[test]
fn a_single_topic_registration_adds_its_queues() {
    let mut m = RouteInfoManager::default();
    let qd = |name: &str, q: i32| QueueData {
        broker_name: name.into(),
        perm: 6,
        read_queue_nums: q,
        topic_sys_flag: 0,
        write_queue_nums: q,
    };
    // No broker group "a" yet: refused, nothing created.
    assert!(!m.register_topic("New", &[qd("a", 8)]));
    assert!(m.topic_route("New").is_none());
    m.register_broker(
        reg("a", "1.1.1.1:10911", 0, Some(wrapper(1, &[("T", 4)]))),
        0,
    );
    assert!(!m.register_topic("New", &[]));
    assert!(m.register_topic("New", &[qd("a", 8)]));
    let r = m.topic_route("New").expect("route");
    assert_eq!(r.queue_datas, vec![qd("a", 8)]);
    assert_eq!(r.broker_datas[0].broker_name, "a");
    // Topics registered before stay; a later full registration with a new
    // version keeps the topic and takes the table's figures.
    assert!(m.topic_route("T").is_some());
    m.register_broker(
        reg(
            "a",
            "1.1.1.1:10911",
            0,
            Some(wrapper(2, &[("T", 4), ("New", 4)])),
        ),
        1,
    );
    assert_eq!(m.topic_route("New").unwrap().queue_datas, vec![qd("a", 4)]);
}
