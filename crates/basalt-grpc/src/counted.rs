//! Counting the service's calls in the broker's registry
//! (`basalt_grpc_requests_total`, `basalt_grpc_request_duration_seconds`,
//! docs/metrics.md#grpc): each RPC of [`crate::service`] reads the clock
//! when it starts and reports the `Code` its answer carries when it ends.

use std::time::Instant;

use crate::pb::{self, Code};
use crate::service::Messaging;

/// The `Code` name of a status code (`UNKNOWN` for a number the protocol
/// does not define), a static string so counting allocates nothing.
pub(crate) fn code_name(code: i32) -> &'static str {
    Code::try_from(code).map_or("UNKNOWN", |c| c.as_str_name())
}

/// An answer's status code.
pub(crate) trait Answered {
    fn status_code(&self) -> i32;
}

macro_rules! answered {
    ($($t:ty),* $(,)?) => {$(
        impl Answered for $t {
            fn status_code(&self) -> i32 {
                self.status.as_ref().map_or(Code::Unspecified as i32, |s| s.code)
            }
        }
    )*};
}

answered!(
    pb::QueryRouteResponse,
    pb::HeartbeatResponse,
    pb::SendMessageResponse,
    pb::QueryAssignmentResponse,
    pb::AckMessageResponse,
    pb::ForwardMessageToDeadLetterQueueResponse,
    pb::EndTransactionResponse,
    pb::NotifyClientTerminationResponse,
    pb::ChangeInvisibleDurationResponse,
);

/// A ReceiveMessage answer's frames: the code of its status frame (the
/// last one; messages come before it).
impl Answered for [pb::ReceiveMessageResponse] {
    fn status_code(&self) -> i32 {
        self.iter()
            .rev()
            .find_map(|f| match &f.content {
                Some(pb::receive_message_response::Content::Status(s)) => Some(s.code),
                _ => None,
            })
            .unwrap_or(Code::Unspecified as i32)
    }
}

impl Messaging {
    /// When a call started; `None` when calls are not counted (neither the
    /// exporter nor the dashboard runs), so the clock is not read.
    pub(crate) fn call_started(&self) -> Option<Instant> {
        self.broker.grpc_metrics().is_enabled().then(Instant::now)
    }

    /// Counts one call of `rpc` that answered `answer`.
    pub(crate) fn count_call<A: Answered + ?Sized>(
        &self,
        rpc: &'static str,
        started: Option<Instant>,
        answer: &A,
    ) {
        self.count_code(rpc, started, answer.status_code());
    }

    /// Counts one call of `rpc` that answered `code`.
    pub(crate) fn count_code(&self, rpc: &'static str, started: Option<Instant>, code: i32) {
        if let Some(t) = started {
            self.broker
                .grpc_metrics()
                .record(rpc, code_name(code), t.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receive::frame_status;
    use crate::status::{ok, status};

    #[test]
    fn answers_name_their_code() {
        assert_eq!(code_name(Code::Ok as i32), "OK");
        assert_eq!(code_name(40401), "MESSAGE_NOT_FOUND");
        assert_eq!(code_name(12345), "UNKNOWN");
        let ack = pb::AckMessageResponse {
            status: Some(status(Code::InvalidReceiptHandle, "expired")),
            entries: Vec::new(),
        };
        assert_eq!(code_name(ack.status_code()), "INVALID_RECEIPT_HANDLE");
        let none = pb::HeartbeatResponse { status: None };
        assert_eq!(code_name(none.status_code()), "CODE_UNSPECIFIED");
    }

    #[test]
    fn a_receive_answer_counts_its_status_frame() {
        let msg = pb::ReceiveMessageResponse {
            content: Some(pb::receive_message_response::Content::Message(
                pb::Message::default(),
            )),
        };
        let frames = [msg.clone(), msg, frame_status(ok())];
        assert_eq!(code_name(frames.status_code()), "OK");
        let empty = [frame_status(status(
            Code::MessageNotFound,
            "no new message",
        ))];
        assert_eq!(code_name(empty.status_code()), "MESSAGE_NOT_FOUND");
        let no_status: Vec<pb::ReceiveMessageResponse> = Vec::new();
        assert_eq!(code_name(no_status.status_code()), "CODE_UNSPECIFIED");
    }
}
