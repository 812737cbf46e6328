//! [`ClientError`]: everything a client call can fail with.

use basalt_remoting::RemotingError;
use basalt_remoting::code::response;
use thiserror::Error;

/// Why a client operation failed. Broker and NameServer refusals keep the
/// response code and remark they sent, and the address that sent them.
#[derive(Debug, Error)]
pub enum ClientError {
    /// No NameServer knows the topic (and, for sends, no auto-create route).
    #[error("no route for topic {topic}")]
    NoRoute { topic: String },
    /// The route names a broker group this client has no address for.
    #[error("no address known for broker {broker_name}")]
    BrokerNotFound { broker_name: String },
    /// A broker or NameServer answered with a failure code.
    #[error("{addr} answered code {code}: {remark}")]
    Broker {
        code: i32,
        remark: String,
        addr: String,
    },
    /// The connection failed (connect, I/O, closed, frame limit, …).
    #[error(transparent)]
    Remoting(RemotingError),
    /// No answer within the allowed time.
    #[error("{what} timed out after {millis} ms")]
    Timeout { what: String, millis: u64 },
    /// The producer or consumer was used before `start` or after `shutdown`.
    #[error("the client is not running (call start first)")]
    NotStarted,
    /// The message breaks a rule checked before sending (empty body, size, topic name…).
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    /// A call's arguments or the client's settings are not usable.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A response whose header or body does not decode.
    #[error("bad response from {addr}: {detail}")]
    BadResponse { addr: String, detail: String },
    /// A local offset file (broadcasting consumers) could not be read or written.
    #[error("offset file {path}: {source}")]
    OffsetFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl ClientError {
    /// The response code of a [`ClientError::Broker`] error.
    pub fn response_code(&self) -> Option<i32> {
        match self {
            Self::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether a Java producer would resend after this error: connection
    /// failures, and the response codes of `DefaultMQProducer.retryResponseCodes`
    /// (docs/protocol.md#response-codes).
    pub fn is_retriable_send(&self) -> bool {
        match self {
            Self::Remoting(_) | Self::BrokerNotFound { .. } => true,
            Self::Broker { code, .. } => matches!(
                *code,
                response::TOPIC_NOT_EXIST
                    | response::SERVICE_NOT_AVAILABLE
                    | response::SYSTEM_ERROR
                    | response::SYSTEM_BUSY
                    | response::NO_PERMISSION
                    | response::NO_BUYER_ID
                    | response::NOT_IN_CURRENT_UNIT
                    | response::GO_AWAY
            ),
            _ => false,
        }
    }

    pub(crate) fn broker(code: i32, remark: Option<String>, addr: &str) -> Self {
        Self::Broker {
            code,
            remark: remark.unwrap_or_default(),
            addr: addr.to_string(),
        }
    }

    pub(crate) fn bad_response(addr: &str, detail: impl std::fmt::Display) -> Self {
        Self::BadResponse {
            addr: addr.to_string(),
            detail: detail.to_string(),
        }
    }
}

impl From<RemotingError> for ClientError {
    fn from(e: RemotingError) -> Self {
        match e {
            RemotingError::Timeout { addr, code, millis } => Self::Timeout {
                what: format!("request code {code} to {addr}"),
                millis,
            },
            other => Self::Remoting(other),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;
