//! Who may make each call (docs/auth.md, gRPC): the broker's
//! [`basalt_auth::AuthGate`] checks the SDK's signed `authorization`
//! header and the resources the RPC touches, as RocketMQ's proxy does. A
//! refusal is answered in the response's status (UNAUTHORIZED 40100 or
//! FORBIDDEN 40300, which the SDKs raise as their Unauthorized and
//! Forbidden exceptions) and counted in `basalt_auth_failures_total`.

use std::net::IpAddr;

use basalt_auth::grpc::{AUTHORIZATION, DATE_TIME, GrpcCall, GrpcIdentity, GrpcRefusalKind};
use tonic::Request;

use crate::metadata;
use crate::pb::{self, Code, settings::PubSub};
use crate::receive::name;
use crate::service::Messaging;
use crate::status::status;

fn header<T>(req: &Request<T>, key: &str) -> Option<String> {
    req.metadata()
        .get(key)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// A caller's address and credential headers, kept for the commands of a
/// stream it opened (Telemetry). No Debug: the header is replayable.
#[derive(Clone)]
pub(crate) struct Caller {
    ip: Option<IpAddr>,
    authorization: Option<String>,
    date_time: Option<String>,
}

impl Caller {
    pub(crate) fn of<T>(req: &Request<T>) -> Caller {
        Caller {
            ip: Some(metadata::peer(req).ip()),
            authorization: header(req, AUTHORIZATION),
            date_time: header(req, DATE_TIME),
        }
    }
}

impl Messaging {
    /// Checks the caller of `rpc` for `call`. Ok: who it acts as (which
    /// signs the remoting commands made for it); Err: the status to answer.
    pub(crate) fn authorize<T>(
        &self,
        rpc: &str,
        req: &Request<T>,
        call: GrpcCall<'_>,
    ) -> Result<GrpcIdentity, pb::Status> {
        if !self.broker.auth_gate().enabled() {
            return Ok(GrpcIdentity::default());
        }
        self.authorize_caller(rpc, &Caller::of(req), call)
    }

    /// [`Messaging::authorize`] with headers kept from the call that opened
    /// a stream.
    pub(crate) fn authorize_caller(
        &self,
        rpc: &str,
        caller: &Caller,
        call: GrpcCall<'_>,
    ) -> Result<GrpcIdentity, pb::Status> {
        let gate = self.broker.auth_gate();
        if !gate.enabled() {
            return Ok(GrpcIdentity::default());
        }
        let auth = caller.authorization.as_deref();
        let date = caller.date_time.as_deref();
        gate.check_grpc(rpc, caller.ip, auth, date, &call)
            .map_err(|r| {
                self.broker.record_auth_failure(r.reason);
                let code = match r.kind {
                    GrpcRefusalKind::Unauthorized => Code::Unauthorized,
                    GrpcRefusalKind::Forbidden => Code::Forbidden,
                };
                status(code, r.message)
            })
    }
}

/// What each request touches, as the proxy's authorization reads it.
pub(crate) fn heartbeat(r: &pb::HeartbeatRequest) -> GrpcCall<'_> {
    let consumer = [
        pb::ClientType::PushConsumer,
        pb::ClientType::SimpleConsumer,
        pb::ClientType::PullConsumer,
    ]
    .iter()
    .any(|t| *t as i32 == r.client_type);
    if consumer {
        GrpcCall::Group {
            group: name(&r.group),
        }
    } else {
        GrpcCall::Unscoped
    }
}

/// A client's Settings on its Telemetry stream: Pub on each published
/// topic; Sub on the group and each subscribed topic.
pub(crate) fn settings(s: &pb::Settings) -> GrpcCall<'_> {
    match &s.pub_sub {
        Some(PubSub::Publishing(p)) => GrpcCall::Settings {
            publish: p.topics.iter().map(|t| t.name.as_str()).collect(),
            group: None,
            subscribe: Vec::new(),
        },
        Some(PubSub::Subscription(sub)) => GrpcCall::Settings {
            publish: Vec::new(),
            group: Some(name(&sub.group)),
            subscribe: sub.subscriptions.iter().map(|e| name(&e.topic)).collect(),
        },
        None => GrpcCall::Unscoped,
    }
}

pub(crate) fn send(r: &pb::SendMessageRequest) -> GrpcCall<'_> {
    GrpcCall::Publish {
        topic: r.messages.first().map_or("", |m| name(&m.topic)),
    }
}

/// NotifyClientTermination: a consumer names its group; a producer names
/// none and is only authenticated.
pub(crate) fn termination(r: &pb::NotifyClientTerminationRequest) -> GrpcCall<'_> {
    match name(&r.group) {
        "" => GrpcCall::Unscoped,
        g => GrpcCall::Group { group: g },
    }
}

pub(crate) fn receive(r: &pb::ReceiveMessageRequest) -> GrpcCall<'_> {
    GrpcCall::Consume {
        group: name(&r.group),
        topic: r.message_queue.as_ref().map_or("", |q| name(&q.topic)),
    }
}
