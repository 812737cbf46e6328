//! What a put returns: RocketMQ's `PutMessageStatus` and `AppendMessageResult`.

/// Outcome of a put, as RocketMQ users know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMessageStatus {
    PutOk,
    /// Stored, but the fsync it waited for did not finish in time.
    FlushDiskTimeout,
    /// Stored, but the slave did not confirm in time (SYNC_MASTER).
    FlushSlaveTimeout,
    /// Stored, but no slave is in sync to wait for (SYNC_MASTER).
    SlaveNotAvailable,
    /// Not stored: the store refuses writes (poisoned, shut down, read-only).
    ServiceNotAvailable,
    /// Not stored: no file could be created.
    CreateMappedFileFailed,
    /// Not stored: the message breaks a limit (size, topic, queue id).
    MessageIllegal,
    /// Not stored: the property string exceeds 32767 bytes.
    PropertiesSizeExceeded,
    /// Not stored: the store is too busy.
    OsPageCacheBusy,
    /// Not stored: anything else.
    UnknownError,
}

impl PutMessageStatus {
    /// Whether the message is in the log (possibly not yet durable).
    pub fn is_stored(self) -> bool {
        matches!(
            self,
            Self::PutOk
                | Self::FlushDiskTimeout
                | Self::FlushSlaveTimeout
                | Self::SlaveNotAvailable
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::PutOk => "PUT_OK",
            Self::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            Self::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            Self::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
            Self::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
            Self::CreateMappedFileFailed => "CREATE_MAPPED_FILE_FAILED",
            Self::MessageIllegal => "MESSAGE_ILLEGAL",
            Self::PropertiesSizeExceeded => "PROPERTIES_SIZE_EXCEEDED",
            Self::OsPageCacheBusy => "OS_PAGE_CACHE_BUSY",
            Self::UnknownError => "UNKNOWN_ERROR",
        }
    }
}

impl std::fmt::Display for PutMessageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an append put the message(s).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppendResult {
    /// Physical offset of the first record.
    pub wrote_offset: i64,
    /// Bytes written (all records of a batch).
    pub wrote_bytes: usize,
    /// Queue offset of the first message.
    pub queue_offset: i64,
    /// Messages written.
    pub msg_count: usize,
    /// Store timestamp given to every record.
    pub store_timestamp: i64,
    /// Physical offset of each record of a batch (empty for a single message).
    pub batch_offsets: Vec<i64>,
}

impl AppendResult {
    /// Offset just past the last record written.
    pub fn end_offset(&self) -> i64 {
        self.wrote_offset + self.wrote_bytes as i64
    }

    /// Physical offsets of every record written.
    pub fn offsets(&self) -> Vec<i64> {
        if self.batch_offsets.is_empty() {
            vec![self.wrote_offset]
        } else {
            self.batch_offsets.clone()
        }
    }
}

/// A put's status, what it wrote (when it wrote) and a reason (when it did not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutMessageResult {
    pub status: PutMessageStatus,
    pub append: Option<AppendResult>,
    pub detail: Option<String>,
}

impl PutMessageResult {
    pub fn ok(append: AppendResult) -> Self {
        PutMessageResult {
            status: PutMessageStatus::PutOk,
            append: Some(append),
            detail: None,
        }
    }

    pub fn failed(status: PutMessageStatus, detail: impl Into<String>) -> Self {
        debug_assert!(!status.is_stored());
        PutMessageResult {
            status,
            append: None,
            detail: Some(detail.into()),
        }
    }

    pub fn is_ok(&self) -> bool {
        self.status == PutMessageStatus::PutOk
    }
}
