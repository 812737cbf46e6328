//! The answer statuses of the MessagingService: the 5.x `Code` the SDKs
//! check, built from remoting response codes and POP errors as RocketMQ's
//! proxy maps them.

use basalt_broker::pop::PopError;
use basalt_remoting::code::response;

use crate::pb::{Code, Status};

/// A status with `code` and `message`.
pub fn status(code: Code, message: impl Into<String>) -> Status {
    Status {
        code: code as i32,
        message: message.into(),
    }
}

/// The OK status (its message is the code's name, as the proxy writes it).
pub fn ok() -> Status {
    status(Code::Ok, "OK")
}

/// The 5.x code for a remoting response code (the proxy's table; anything
/// it does not name is an internal server error).
pub fn code_for_remoting(code: i32) -> Code {
    match code {
        response::SUCCESS => Code::Ok,
        response::SYSTEM_BUSY => Code::TooManyRequests,
        response::REQUEST_CODE_NOT_SUPPORTED => Code::NotImplemented,
        response::SUBSCRIPTION_GROUP_NOT_EXIST => Code::ConsumerGroupNotFound,
        response::TOPIC_NOT_EXIST => Code::TopicNotFound,
        response::NO_PERMISSION => Code::Forbidden,
        response::MESSAGE_ILLEGAL => Code::BadRequest,
        response::FLUSH_DISK_TIMEOUT => Code::MasterPersistenceTimeout,
        response::FLUSH_SLAVE_TIMEOUT => Code::SlavePersistenceTimeout,
        response::SLAVE_NOT_AVAILABLE => Code::HaNotAvailable,
        response::SERVICE_NOT_AVAILABLE => Code::InternalServerError,
        _ => Code::InternalServerError,
    }
}

/// The status of a remoting response: its code mapped, its remark kept.
pub fn from_remoting(code: i32, remark: Option<&str>) -> Status {
    let c = code_for_remoting(code);
    let message = match remark {
        Some(r) if !r.is_empty() => r.to_string(),
        _ if c == Code::Ok => "OK".to_string(),
        _ => code.to_string(),
    };
    status(c, message)
}

/// The status of a failed POP operation.
pub fn from_pop(e: &PopError) -> Status {
    let code = match e {
        PopError::TopicNotFound(_) => Code::TopicNotFound,
        PopError::GroupNotFound(_) => Code::ConsumerGroupNotFound,
        PopError::Forbidden(_) => Code::Forbidden,
        PopError::BadRequest(_) => Code::BadRequest,
        PopError::BadHandle(_) | PopError::HandleExpired | PopError::NotFound => {
            Code::InvalidReceiptHandle
        }
        PopError::Locked => Code::MessageNotFound,
        PopError::Unavailable(_) => Code::InternalServerError,
        PopError::Internal(_) => Code::InternalServerError,
    };
    status(code, e.to_string())
}

/// The overall status of several entries: their one code, or
/// MULTIPLE_RESULTS when they differ (the proxy's rule).
pub fn overall<'a>(entries: impl IntoIterator<Item = &'a Status>) -> Status {
    let mut first: Option<&Status> = None;
    for s in entries {
        match first {
            None => first = Some(s),
            Some(f) if f.code != s.code => {
                return status(Code::MultipleResults, "MULTIPLE_RESULTS");
            }
            Some(_) => {}
        }
    }
    match first {
        Some(s) if s.code == Code::Ok as i32 => ok(),
        Some(s) => s.clone(),
        None => status(Code::BadRequest, "no entries"),
    }
}
