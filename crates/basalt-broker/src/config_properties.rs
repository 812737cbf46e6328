//! [`BrokerConfig`] written back as `broker.conf` pairs: what
//! GET_BROKER_CONFIG answers (Java's `getAllConfigsFormatString`). Every
//! key here is one [`BrokerConfig::set`] reads, with the value in the unit
//! `set` expects (milliseconds, hours for `fileReservedTime`).

use std::time::Duration;

use crate::config::BrokerConfig;

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

fn opt(v: &Option<String>) -> String {
    v.clone().unwrap_or_default()
}

impl BrokerConfig {
    /// Every setting as a `broker.conf` key and value, in a fixed order
    /// (`listenPort` before `haListenPort`, so applying them in order
    /// gives these settings back).
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let mut p = self.identity_properties();
        p.extend(self.store_properties());
        p.extend(self.client_properties());
        p.extend(self.replication_properties());
        p.extend(self.limit_properties());
        p.extend(self.observe.properties());
        p.push(("enableGrpcServer", self.enable_grpc_server.to_string()));
        p.push(("grpcServerPort", self.grpc_server_port.to_string()));
        p
    }

    /// The properties as Java's `.properties` text, one `key=value` a line.
    pub fn properties_text(&self) -> String {
        let mut s = String::new();
        for (k, v) in self.properties() {
            s.push_str(k);
            s.push('=');
            s.push_str(&v);
            s.push('\n');
        }
        s
    }

    fn identity_properties(&self) -> Vec<(&'static str, String)> {
        vec![
            ("brokerClusterName", self.broker_cluster_name.clone()),
            ("brokerName", self.broker_name.clone()),
            ("brokerId", self.broker_id.to_string()),
            ("brokerIP1", self.broker_ip1.to_string()),
            ("brokerIP2", self.broker_ip2.to_string()),
            ("listenAddr", self.listen_addr.to_string()),
            ("listenPort", self.listen_port.to_string()),
            ("namesrvAddr", opt(&self.namesrv_addr)),
            ("brokerRole", self.broker_role.to_string()),
            ("brokerPermission", self.broker_permission.to_string()),
            ("regionId", self.region_id.clone()),
            ("traceOn", self.trace_on.to_string()),
            ("traceTopicEnable", self.trace_topic_enable.to_string()),
            ("msgTraceTopicName", self.msg_trace_topic_name.clone()),
        ]
    }

    fn store_properties(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "storePathRootDir",
                self.store_path_root_dir.display().to_string(),
            ),
            ("flushDiskType", self.flush_disk_type.to_string()),
            (
                "mappedFileSizeCommitLog",
                self.mapped_file_size_commit_log.to_string(),
            ),
            (
                "mappedFileSizeConsumeQueue",
                self.mapped_file_size_consume_queue.to_string(),
            ),
            ("fileReservedTime", self.file_reserved_time.to_string()),
            (
                "fileReservedTimeMillis",
                self.file_reserved_time_millis.to_string(),
            ),
            ("cleanResourceInterval", ms(self.clean_resource_interval)),
            ("deleteWhen", self.delete_when.clone()),
            (
                "diskMaxUsedSpaceRatio",
                self.disk_max_used_space_ratio.to_string(),
            ),
            (
                "diskSpaceCleanForciblyRatio",
                self.disk_space_clean_forcibly_ratio.to_string(),
            ),
            (
                "diskSpaceWarningLevelRatio",
                self.disk_space_warning_level_ratio.to_string(),
            ),
            (
                "cleanFileForciblyEnable",
                self.clean_file_forcibly_enable.to_string(),
            ),
            ("syncFlushTimeout", ms(self.sync_flush_timeout)),
            ("flushIntervalCommitLog", ms(self.flush_interval_commit_log)),
            (
                "transientStorePoolEnable",
                self.transient_store_pool_enable.to_string(),
            ),
            (
                "transientStorePoolSize",
                self.transient_store_pool_size.to_string(),
            ),
            (
                "warmMappedFileEnable",
                self.warm_mapped_file_enable.to_string(),
            ),
            ("messageIndexEnable", self.message_index_enable.to_string()),
            ("checkCRCOnRecover", self.check_crc_on_recover.to_string()),
            (
                "enabledAppendPropCRC",
                self.enabled_append_prop_crc.to_string(),
            ),
            ("messageDelayLevel", self.message_delay_level.clone()),
            ("timerWheelEnable", self.timer_wheel_enable.to_string()),
            ("timerMaxDelaySec", self.timer_max_delay_sec.to_string()),
            ("timerPrecisionMs", self.timer_precision_ms.to_string()),
            ("timerFlushIntervalMs", ms(self.timer_flush_interval)),
            (
                "mappedFileSizeTimerLog",
                self.mapped_file_size_timer_log.to_string(),
            ),
        ]
    }

    fn client_properties(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "autoCreateTopicEnable",
                self.auto_create_topic_enable.to_string(),
            ),
            (
                "autoCreateSubscriptionGroup",
                self.auto_create_subscription_group.to_string(),
            ),
            (
                "enableSingleTopicRegister",
                self.enable_single_topic_register.to_string(),
            ),
            (
                "enableSplitRegistration",
                self.enable_split_registration.to_string(),
            ),
            (
                "splitRegistrationSize",
                self.split_registration_size.to_string(),
            ),
            ("compressedRegister", self.compressed_register.to_string()),
            (
                "defaultTopicQueueNums",
                self.default_topic_queue_nums.to_string(),
            ),
            ("maxMessageSize", self.max_message_size.to_string()),
            (
                "registerNameServerPeriod",
                ms(self.register_name_server_period),
            ),
            ("longPollingEnable", self.long_polling_enable.to_string()),
            ("shortPollingTimeMills", ms(self.short_polling_time_mills)),
            (
                "flushConsumerOffsetInterval",
                ms(self.flush_consumer_offset_interval),
            ),
            ("channelExpiredTimeout", ms(self.channel_expired_timeout)),
            (
                "notifyConsumerIdsChangedEnable",
                self.notify_consumer_ids_changed_enable.to_string(),
            ),
            (
                "enablePropertyFilter",
                self.enable_property_filter.to_string(),
            ),
            ("transactionTimeOut", ms(self.transaction_timeout)),
            (
                "transactionCheckInterval",
                ms(self.transaction_check_interval),
            ),
            (
                "transactionCheckMax",
                self.transaction_check_max.to_string(),
            ),
            (
                "rejectTransactionMessage",
                self.reject_transaction_message.to_string(),
            ),
            (
                "storeReplyMessageEnable",
                self.store_reply_message_enable.to_string(),
            ),
        ]
    }

    fn replication_properties(&self) -> Vec<(&'static str, String)> {
        vec![
            ("haListenPort", self.ha_listen_port.to_string()),
            ("haEnable", self.ha_enable.to_string()),
            ("haMasterAddress", opt(&self.ha_master_address)),
            (
                "haSendHeartbeatInterval",
                ms(self.ha_send_heartbeat_interval),
            ),
            ("haHousekeepingInterval", ms(self.ha_housekeeping_interval)),
            (
                "haTransferBatchSize",
                self.ha_transfer_batch_size.to_string(),
            ),
            ("haMaxGapNotInSync", self.ha_max_gap_not_in_sync.to_string()),
            ("slaveReadEnable", self.slave_read_enable.to_string()),
            ("offsetCheckInSlave", self.offset_check_in_slave.to_string()),
            ("slaveSyncInterval", ms(self.slave_sync_interval)),
            (
                "enableDLegerCommitLog",
                self.enable_dleger_commit_log.to_string(),
            ),
            ("dLegerGroup", self.dleger_group.clone()),
            ("dLegerPeers", self.dleger_peers.clone()),
            ("dLegerSelfId", self.dleger_self_id.clone()),
            (
                "dLegerHeartbeatInterval",
                ms(self.dleger_heartbeat_interval),
            ),
            ("dLegerAckInMemory", self.dleger_ack_in_memory.to_string()),
            ("dLegerBinaryPush", self.dleger_binary_push.to_string()),
            ("ledgerAckLogEnable", self.ledger_ack_log.to_string()),
            ("preferredLeaderId", self.dleger_preferred_leader.clone()),
        ]
    }

    fn limit_properties(&self) -> Vec<(&'static str, String)> {
        vec![
            ("maxFrameSize", self.max_frame_size.to_string()),
            (
                "serverMaxConnections",
                self.server_max_connections.to_string(),
            ),
            (
                "serverMaxInflightRequestsPerConnection",
                self.server_max_inflight_per_connection.to_string(),
            ),
            (
                "serverMaxInflightRequests",
                self.server_max_inflight_requests.to_string(),
            ),
            (
                "maxQueueNumsPerTopic",
                self.max_queue_nums_per_topic.to_string(),
            ),
            ("maxTopicCount", self.max_topic_count.to_string()),
            (
                "maxSubscriptionGroupCount",
                self.max_subscription_group_count.to_string(),
            ),
            (
                "maxLongPollingSuspendMillis",
                ms(self.max_long_polling_suspend),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{BrokerConfig, properties_pairs};

    #[test]
    fn every_property_is_a_key_set_reads() {
        let c = BrokerConfig::default();
        for (k, v) in c.properties() {
            let mut probe = BrokerConfig::default();
            assert!(probe.set(k, &v).unwrap(), "{k} is not read by set");
        }
    }

    #[test]
    fn properties_text_round_trips() {
        let mut c = BrokerConfig::default();
        c.apply(&properties_pairs(
            "brokerName=rt\nlistenPort=20911\nhaListenPort=30000\nmaxMessageSize=2048\n\
             namesrvAddr=127.0.0.1:9876\nflushDiskType=SYNC_FLUSH\nlongPollingEnable=false\n",
        ))
        .unwrap();
        let text = c.properties_text();
        let mut back = BrokerConfig::default();
        back.apply(&properties_pairs(&text)).unwrap();
        assert_eq!(back.properties(), c.properties());
        assert!(text.contains("maxMessageSize=2048\n"), "{text}");
    }
}
