//! Store settings, named after RocketMQ's `MessageStoreConfig` keys.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use basalt_common::config::FlushDiskType;

use crate::disk_space::{DiskUsageSource, StatvfsUsage};

/// Everything the store needs to know. Defaults are RocketMQ's.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `storePathRootDir`: holds `commitlog/`, `consumequeue/`, `index/`,
    /// `checkpoint`, `abort`, `lock`.
    pub root_dir: PathBuf,
    /// `mappedFileSizeCommitLog` (1 GiB).
    pub commit_log_file_size: usize,
    /// `mappedFileSizeConsumeQueue` in units of 20 bytes (300,000).
    pub consume_queue_units_per_file: usize,
    /// `flushDiskType`.
    pub flush_disk_type: FlushDiskType,
    /// `syncFlushTimeout`: how long a SYNC_FLUSH put waits for its fsync.
    pub sync_flush_timeout: Duration,
    /// `flushIntervalCommitLog` (500 ms).
    pub flush_interval_commit_log: Duration,
    /// `flushCommitLogLeastPages` (4 pages of 4 KiB).
    pub flush_commit_log_least_pages: usize,
    /// `flushCommitLogThoroughInterval` (10 s).
    pub flush_commit_log_thorough_interval: Duration,
    /// `transientStorePoolEnable`: append into write buffers that a commit
    /// service copies into the files (ASYNC_FLUSH only).
    pub transient_store_pool_enable: bool,
    /// `transientStorePoolSize` (5 buffers of one CommitLog file each).
    pub transient_store_pool_size: usize,
    /// `commitIntervalCommitLog` (200 ms).
    pub commit_interval_commit_log: Duration,
    /// `commitCommitLogLeastPages` (4).
    pub commit_commit_log_least_pages: usize,
    /// `commitCommitLogThoroughInterval` (200 ms).
    pub commit_commit_log_thorough_interval: Duration,
    /// `flushIntervalConsumeQueue` (1 s).
    pub flush_interval_consume_queue: Duration,
    /// `flushConsumeQueueLeastPages` (2).
    pub flush_consume_queue_least_pages: usize,
    /// `flushConsumeQueueThoroughInterval` (60 s).
    pub flush_consume_queue_thorough_interval: Duration,
    /// `warmMappedFileEnable`: pre-fault new CommitLog files before use.
    pub warm_mapped_file: bool,
    /// `checkCRCOnRecover`.
    pub check_crc_on_recover: bool,
    /// `enabledAppendPropCRC`: end every record's properties with a CRC of
    /// the whole record (`__CRC32#`), so damage anywhere in a record — not
    /// only in its body — is detected. On by default in Basalt (RocketMQ
    /// defaults it off); 4.x-era consumers see one extra property.
    pub append_prop_crc: bool,
    /// `maxMessageSize` (4 MiB): largest record the store accepts.
    pub max_message_size: usize,
    /// `messageIndexEnable`.
    pub message_index_enable: bool,
    /// `maxHashSlotNum` (5,000,000).
    pub max_hash_slot_num: usize,
    /// `maxIndexNum` (20,000,000).
    pub max_index_num: usize,
    /// `fileReservedTime` (72 h): CommitLog files older than this may go.
    pub file_reserved_time: Duration,
    /// `deleteWhen` ("04"): hours of the day (local time, `;`-separated) at
    /// which expired files are deleted.
    pub delete_when: String,
    /// `diskMaxUsedSpaceRatio` (75%): above it, expired files go at any hour.
    pub disk_max_used_space_ratio: u32,
    /// `diskSpaceCleanForciblyRatio` (85%): above it, the oldest CommitLog
    /// files go whether expired or not (with `cleanFileForciblyEnable`).
    pub disk_space_clean_forcibly_ratio: u32,
    /// `diskSpaceWarningLevelRatio` (90%): above it the disk counts as full
    /// and puts are refused.
    pub disk_space_warning_level_ratio: u32,
    /// `cleanFileForciblyEnable` (true): whether disk pressure may delete
    /// files that have not expired.
    pub clean_file_forcibly_enable: bool,
    /// How often the cleanup service samples the disk usage (1 s).
    pub disk_check_interval: Duration,
    /// Where disk usage figures come from: `statvfs`, or a figure a test
    /// injects (see [`crate::disk_space`]).
    pub disk_usage: Arc<dyn DiskUsageSource>,
    /// The disk the files live on: the real one, or a simulated one for the
    /// power-loss simulator (see docs/fault-model.md).
    pub disk: basalt_disk::Disk,
    /// `cleanResourceInterval` (10 s).
    pub clean_resource_interval: Duration,
    /// `deleteCommitLogFilesInterval`: pause between two deletions (100 ms).
    pub delete_commit_log_files_interval: Duration,
    /// Files deleted per cleanup round at most (10).
    pub delete_files_batch_max: usize,
    /// Address written as STOREHOST in every record (`brokerIP1:listenPort`).
    pub store_host: SocketAddr,
    /// `accessMessageInMemoryMaxRatio` (40%): pulls of data within this share of
    /// RAM from the end count as "in memory" (bigger batches, no slave hint).
    pub access_message_in_memory_max_ratio: u32,
    /// `maxTransferBytesOnMessageInMemory` (256 KiB).
    pub max_transfer_bytes_on_message_in_memory: usize,
    /// `maxTransferCountOnMessageInMemory` (32).
    pub max_transfer_count_on_message_in_memory: usize,
    /// `maxTransferBytesOnMessageInDisk` (64 KiB).
    pub max_transfer_bytes_on_message_in_disk: usize,
    /// `maxTransferCountOnMessageInDisk` (8).
    pub max_transfer_count_on_message_in_disk: usize,
}

impl StoreConfig {
    /// RocketMQ's defaults, rooted at `root_dir`.
    pub fn new(root_dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            root_dir: root_dir.into(),
            commit_log_file_size: 1024 * 1024 * 1024,
            consume_queue_units_per_file: 300_000,
            flush_disk_type: FlushDiskType::AsyncFlush,
            sync_flush_timeout: Duration::from_secs(5),
            flush_interval_commit_log: Duration::from_millis(500),
            flush_commit_log_least_pages: 4,
            flush_commit_log_thorough_interval: Duration::from_secs(10),
            transient_store_pool_enable: false,
            transient_store_pool_size: 5,
            commit_interval_commit_log: Duration::from_millis(200),
            commit_commit_log_least_pages: 4,
            commit_commit_log_thorough_interval: Duration::from_millis(200),
            flush_interval_consume_queue: Duration::from_secs(1),
            flush_consume_queue_least_pages: 2,
            flush_consume_queue_thorough_interval: Duration::from_secs(60),
            warm_mapped_file: false,
            check_crc_on_recover: true,

            append_prop_crc: true,
            max_message_size: basalt_common::constants::DEFAULT_MAX_MESSAGE_SIZE,
            message_index_enable: true,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            file_reserved_time: Duration::from_secs(72 * 3600),
            delete_when: "04".to_string(),
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 85,
            disk_space_warning_level_ratio: 90,
            clean_file_forcibly_enable: true,
            disk_check_interval: Duration::from_secs(1),
            disk_usage: Arc::new(StatvfsUsage),
            disk: basalt_disk::Disk::Real,
            clean_resource_interval: Duration::from_secs(10),
            delete_commit_log_files_interval: Duration::from_millis(100),
            delete_files_batch_max: 10,
            store_host: SocketAddr::from(([127, 0, 0, 1], 10911)),
            access_message_in_memory_max_ratio: 40,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_disk: 64 * 1024,
            max_transfer_count_on_message_in_disk: 8,
        }
    }

    /// Small files for tests: 64 KiB CommitLog files, 100-unit ConsumeQueue
    /// files, a small index, and a disk that is always 0% used, so tests do
    /// not depend on how full the machine's disk is (tests of disk space
    /// inject their own figure).
    pub fn for_tests(root_dir: impl Into<PathBuf>) -> Self {
        StoreConfig {
            disk_usage: crate::disk_space::FixedUsage::new(0),
            commit_log_file_size: 64 * 1024,
            consume_queue_units_per_file: 100,
            max_hash_slot_num: 512,
            max_index_num: 2048,
            max_message_size: 16 * 1024,
            ..StoreConfig::new(root_dir)
        }
    }

    pub fn commit_log_dir(&self) -> PathBuf {
        self.root_dir.join("commitlog")
    }
    pub fn consume_queue_dir(&self) -> PathBuf {
        self.root_dir.join("consumequeue")
    }
    pub fn index_dir(&self) -> PathBuf {
        self.root_dir.join("index")
    }
    pub fn checkpoint_path(&self) -> PathBuf {
        self.root_dir.join("checkpoint")
    }
    pub fn abort_path(&self) -> PathBuf {
        self.root_dir.join("abort")
    }
    pub fn lock_path(&self) -> PathBuf {
        self.root_dir.join("lock")
    }

    /// Bytes of one ConsumeQueue file.
    pub fn consume_queue_file_size(&self) -> usize {
        self.consume_queue_units_per_file * crate::consume_queue::UNIT_SIZE
    }

    /// Checks the settings make sense together.
    pub fn validate(&self) -> Result<(), String> {
        if self.commit_log_file_size < 4096 || self.commit_log_file_size > i32::MAX as usize {
            return Err(format!(
                "mappedFileSizeCommitLog must be in 4096..=2147483647, got {}",
                self.commit_log_file_size
            ));
        }
        if self.consume_queue_units_per_file == 0 {
            return Err("mappedFileSizeConsumeQueue must hold at least one unit".into());
        }
        // A record must fit in one file together with the end-of-file filler.
        if self.max_message_size + 1024 > self.commit_log_file_size {
            // Tests use tiny files; clamp rather than refuse only when asked for
            // an impossible combination explicitly.
            return Err(format!(
                "maxMessageSize ({}) must be smaller than mappedFileSizeCommitLog ({}) by at least 1 KiB",
                self.max_message_size, self.commit_log_file_size
            ));
        }
        if self.transient_store_pool_enable && self.flush_disk_type == FlushDiskType::SyncFlush {
            return Err(
                "transientStorePoolEnable works only with flushDiskType=ASYNC_FLUSH".to_string(),
            );
        }
        if self.transient_store_pool_enable && self.transient_store_pool_size == 0 {
            return Err("transientStorePoolSize must be at least 1".into());
        }
        for (name, ratio) in [
            ("diskMaxUsedSpaceRatio", self.disk_max_used_space_ratio),
            (
                "diskSpaceCleanForciblyRatio",
                self.disk_space_clean_forcibly_ratio,
            ),
            (
                "diskSpaceWarningLevelRatio",
                self.disk_space_warning_level_ratio,
            ),
        ] {
            if !(1..=100).contains(&ratio) {
                return Err(format!(
                    "{name} must be a percentage in 1..=100, got {ratio}"
                ));
            }
        }
        if self.disk_check_interval.is_zero() {
            return Err("the disk check interval must not be zero".into());
        }
        if self.max_hash_slot_num == 0 || self.max_index_num < 2 {
            return Err("maxHashSlotNum must be > 0 and maxIndexNum > 1".into());
        }
        Ok(())
    }
}
