//! Unit tests of the broker configuration (config.rs).
use super::*;

#[test]
fn reads_broker_conf_properties() {
    let text = "# a comment\nbrokerClusterName = C1\nbrokerName=b-x\nbrokerId=0\nlistenPort: 20911\nflushDiskType=SYNC_FLUSH\nbrokerRole=SYNC_MASTER\nsomethingElse=1\n";
    let mut c = BrokerConfig::default();
    c.apply(&properties_pairs(text)).unwrap();
    assert_eq!(c.broker_cluster_name, "C1");
    assert_eq!(c.broker_name, "b-x");
    assert_eq!(c.listen_port, 20911);
    assert_eq!(c.ha_listen_port, 20912);
    assert_eq!(c.flush_disk_type, FlushDiskType::SyncFlush);
    assert_eq!(c.broker_role, BrokerRole::SyncMaster);
}

#[test]
fn reads_toml() {
    let text = "[broker]\nbrokerName = \"tb\"\nlistenPort = 30911\nautoCreateTopicEnable = false\n";
    let mut c = BrokerConfig::default();
    c.apply(&toml_pairs(text).unwrap()).unwrap();
    assert_eq!(c.broker_name, "tb");
    assert_eq!(c.listen_port, 30911);
    assert!(!c.auto_create_topic_enable);
}

#[test]
fn property_filter_is_off_unless_enabled() {
    let mut c = BrokerConfig::default();
    assert!(!c.enable_property_filter);
    c.apply(&properties_pairs("enablePropertyFilter=true"))
        .unwrap();
    assert!(c.enable_property_filter);
    let e = c
        .apply(&properties_pairs("enablePropertyFilter=yes"))
        .unwrap_err();
    assert!(e.to_string().contains("enablePropertyFilter"), "{e}");
}

#[test]
fn timer_settings() {
    let mut c = BrokerConfig::default();
    c.apply(&properties_pairs(
        "timerPrecisionMs=100\ntimerMaxDelaySec=3600\nmappedFileSizeTimerLog=1000000",
    ))
    .unwrap();
    let t = c.timer_config();
    assert_eq!((t.precision_ms, t.max_delay_ms), (100, 3_600_000));
    assert_eq!(t.segment_size, 999_984);
    let e = c
        .apply(&properties_pairs(
            "timerPrecisionMs=1\ntimerMaxDelaySec=259200",
        ))
        .unwrap_err();
    assert!(e.to_string().contains("wheel slots"), "{e}");
}

#[test]
fn invalid_value_names_the_key() {
    let mut c = BrokerConfig::default();
    let e = c.apply(&properties_pairs("listenPort=abc")).unwrap_err();
    assert!(e.to_string().contains("listenPort"), "{e}");
    let e = c
        .apply(&properties_pairs("flushDiskType=SOMETIMES"))
        .unwrap_err();
    assert!(e.to_string().contains("flushDiskType"), "{e}");
    let e = c
        .apply(&properties_pairs("brokerRole=SLAVE\nbrokerId=0"))
        .unwrap_err();
    assert!(e.to_string().contains("brokerId"), "{e}");
}

#[test]
fn retention_keys_reach_the_store() {
    let mut c = BrokerConfig::default();
    let s = c.store_config();
    assert_eq!(s.file_reserved_time, Duration::from_secs(72 * 3600));
    assert_eq!(s.clean_resource_interval, Duration::from_secs(10));
    c.apply(&properties_pairs(
        "fileReservedTime=2\ncleanResourceInterval=500\n",
    ))
    .unwrap();
    let s = c.store_config();
    assert_eq!(s.file_reserved_time, Duration::from_secs(2 * 3600));
    assert_eq!(s.clean_resource_interval, Duration::from_millis(500));
    // The Basalt-only millisecond figure wins when set.
    c.apply(&properties_pairs("fileReservedTimeMillis=4000"))
        .unwrap();
    assert_eq!(c.store_config().file_reserved_time, Duration::from_secs(4));
    let e = c
        .apply(&properties_pairs("cleanResourceInterval=0"))
        .unwrap_err();
    assert!(e.to_string().contains("cleanResourceInterval"), "{e}");
}

#[test]
fn disk_space_keys_reach_the_store() {
    let mut c = BrokerConfig::default();
    let s = c.store_config();
    assert_eq!(
        (
            s.disk_space_warning_level_ratio,
            s.disk_space_clean_forcibly_ratio,
            s.clean_file_forcibly_enable
        ),
        (90, 85, true)
    );
    c.apply(&properties_pairs(
        "diskSpaceWarningLevelRatio=95\ndiskSpaceCleanForciblyRatio=99\ncleanFileForciblyEnable=false\n",
    ))
    .unwrap();
    let s = c.store_config();
    assert_eq!(s.disk_space_warning_level_ratio, 95);
    assert_eq!(s.disk_space_clean_forcibly_ratio, 99);
    assert!(!s.clean_file_forcibly_enable);
    let e = c
        .apply(&properties_pairs("diskSpaceWarningLevelRatio=101"))
        .unwrap_err();
    assert!(e.to_string().contains("diskSpaceWarningLevelRatio"), "{e}");
}

#[test]
fn connection_limits() {
    let mut c = BrokerConfig::default();
    assert!(c.server_max_connections >= 1000);
    let text = "serverMaxConnections=300\nserverMaxInflightRequestsPerConnection=16\nserverMaxInflightRequests=1000\n";
    c.apply(&properties_pairs(text)).unwrap();
    assert_eq!(c.server_max_connections, 300);
    assert_eq!(c.server_max_inflight_per_connection, 16);
    assert_eq!(c.server_max_inflight_requests, 1000);
    let e = c
        .apply(&properties_pairs("serverMaxConnections=0"))
        .unwrap_err();
    assert!(e.to_string().contains("serverMaxConnections"), "{e}");
}
