//! [`Messaging`]: the MessagingService's RPCs, each checked and handed to
//! its module (route, send, receive, telemetry).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use basalt_broker::Broker;
use basalt_broker::processor::BrokerProcessor;
use futures_util::Stream;
use tonic::{Request, Response, Status as RpcStatus};

use basalt_auth::grpc::GrpcCall;

use crate::access;
use crate::clients::{Clients, Session};
use crate::metadata;
use crate::pb::{self, Code, messaging_service_server::MessagingService};
use crate::receive::{frame_status, name};
use crate::status::{self, status};
use crate::transactions::OpenTransactions;

type Rpc<T> = Result<Response<T>, RpcStatus>;
type Frames<T> = Pin<Box<dyn Stream<Item = Result<T, RpcStatus>> + Send + 'static>>;

/// The service: the broker, its request processor (through which sends,
/// transaction ends and registrations go, as remoting requests of each
/// client's detached channel), the known clients and open transactions.
/// Cheap to clone; every clone serves the same broker.
#[derive(Clone)]
pub struct Messaging {
    pub(crate) broker: Arc<Broker>,
    pub(crate) processor: Arc<BrokerProcessor>,
    pub(crate) clients: Arc<Clients>,
    pub(crate) transactions: Arc<OpenTransactions>,
    host: String,
    port: u16,
}

impl Messaging {
    pub fn new(broker: Arc<Broker>, host: String, port: u16) -> Self {
        let processor = Arc::new(BrokerProcessor::new(&broker));
        let transactions = Arc::new(OpenTransactions::default());
        let txs = Arc::clone(&transactions);
        let limit = broker.config().max_message_size;
        let on_command = Arc::new(move |s: Arc<Session>, cmd| {
            crate::telemetry::on_broker_command(&txs, s, cmd, limit)
        });
        let local: SocketAddr = SocketAddr::new(broker.config().listen_addr, port);
        Messaging {
            clients: Arc::new(Clients::new(Arc::clone(&processor), local, on_command)),
            broker,
            processor,
            transactions,
            host,
            port,
        }
    }

    pub fn clients(&self) -> &Arc<Clients> {
        &self.clients
    }

    /// This broker's gRPC endpoint, as routes name it.
    pub fn endpoints(&self) -> pb::Endpoints {
        let scheme = match self.host.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(_)) => pb::AddressScheme::IPv4,
            Ok(std::net::IpAddr::V6(_)) => pb::AddressScheme::IPv6,
            Err(_) => pb::AddressScheme::DomainName,
        };
        pb::Endpoints {
            scheme: scheme as i32,
            addresses: vec![pb::Address {
                host: self.host.clone(),
                port: i32::from(self.port),
            }],
        }
    }

    /// The broker's permission now.
    pub fn broker_permission(&self) -> i32 {
        self.broker.live_broker_permission()
    }

    /// The caller's session; a call without a client id gets
    /// CLIENT_ID_REQUIRED (as a status the SDK reads).
    fn session<T>(&self, req: &Request<T>) -> Result<Arc<Session>, pb::Status> {
        match metadata::client_id(req) {
            Some(id) => Ok(self.clients.session(&id, metadata::peer(req))),
            None => Err(status(
                Code::ClientIdRequired,
                "x-mq-client-id header is required",
            )),
        }
    }
}

fn one<T: Send + 'static>(frames: Vec<T>) -> Frames<T> {
    Box::pin(futures_util::stream::iter(frames.into_iter().map(Ok)))
}

/// Each RPC: counted (crate::counted), then served by its `serve_*`.
#[tonic::async_trait]
impl MessagingService for Messaging {
    async fn query_route(
        &self,
        req: Request<pb::QueryRouteRequest>,
    ) -> Rpc<pb::QueryRouteResponse> {
        let t = self.call_started();
        let r = self.serve_query_route(req);
        self.count_call("QueryRoute", t, &r);
        Ok(Response::new(r))
    }

    async fn heartbeat(&self, req: Request<pb::HeartbeatRequest>) -> Rpc<pb::HeartbeatResponse> {
        let t = self.call_started();
        let r = self.serve_heartbeat(req).await;
        self.count_call("Heartbeat", t, &r);
        Ok(Response::new(r))
    }

    async fn send_message(
        &self,
        req: Request<pb::SendMessageRequest>,
    ) -> Rpc<pb::SendMessageResponse> {
        let t = self.call_started();
        let r = self.serve_send(req).await;
        self.count_call("SendMessage", t, &r);
        Ok(Response::new(r))
    }

    async fn query_assignment(
        &self,
        req: Request<pb::QueryAssignmentRequest>,
    ) -> Rpc<pb::QueryAssignmentResponse> {
        let t = self.call_started();
        let r = self.serve_query_assignment(req);
        self.count_call("QueryAssignment", t, &r);
        Ok(Response::new(r))
    }

    type ReceiveMessageStream = Frames<pb::ReceiveMessageResponse>;

    /// Counted when its answer is complete: its time includes the long
    /// polling.
    async fn receive_message(
        &self,
        req: Request<pb::ReceiveMessageRequest>,
    ) -> Rpc<Self::ReceiveMessageStream> {
        let t = self.call_started();
        let frames = self.serve_receive(req).await;
        self.count_call("ReceiveMessage", t, frames.as_slice());
        Ok(Response::new(one(frames)))
    }

    async fn ack_message(
        &self,
        req: Request<pb::AckMessageRequest>,
    ) -> Rpc<pb::AckMessageResponse> {
        let t = self.call_started();
        let r = self.serve_ack(req).await;
        self.count_call("AckMessage", t, &r);
        Ok(Response::new(r))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        req: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Rpc<pb::ForwardMessageToDeadLetterQueueResponse> {
        let t = self.call_started();
        let r = self.serve_forward_to_dlq(req).await;
        self.count_call("ForwardMessageToDeadLetterQueue", t, &r);
        Ok(Response::new(r))
    }

    async fn end_transaction(
        &self,
        req: Request<pb::EndTransactionRequest>,
    ) -> Rpc<pb::EndTransactionResponse> {
        let t = self.call_started();
        let r = self.serve_end_transaction(req).await;
        self.count_call("EndTransaction", t, &r);
        Ok(Response::new(r))
    }

    type TelemetryStream = Frames<pb::TelemetryCommand>;

    /// Counted when the stream opens (or is refused), not when it ends.
    async fn telemetry(
        &self,
        req: Request<tonic::Streaming<pb::TelemetryCommand>>,
    ) -> Rpc<Self::TelemetryStream> {
        let t = self.call_started();
        let r = self.serve_telemetry(req);
        let code = r.as_ref().map_or_else(|st| st.code, |_| Code::Ok as i32);
        self.count_code("Telemetry", t, code);
        r.map(Response::new)
            .map_err(|st| match Code::try_from(st.code) {
                Ok(Code::ClientIdRequired) => RpcStatus::invalid_argument(st.message),
                Ok(Code::Forbidden) => RpcStatus::permission_denied(st.message),
                _ => RpcStatus::unauthenticated(st.message),
            })
    }

    async fn notify_client_termination(
        &self,
        req: Request<pb::NotifyClientTerminationRequest>,
    ) -> Rpc<pb::NotifyClientTerminationResponse> {
        let t = self.call_started();
        let r = self.serve_termination(req);
        self.count_call("NotifyClientTermination", t, &r);
        Ok(Response::new(r))
    }

    async fn change_invisible_duration(
        &self,
        req: Request<pb::ChangeInvisibleDurationRequest>,
    ) -> Rpc<pb::ChangeInvisibleDurationResponse> {
        let t = self.call_started();
        let r = self.serve_change_invisible(req).await;
        self.count_call("ChangeInvisibleDuration", t, &r);
        Ok(Response::new(r))
    }
}

/// The RPCs' work, each answering what its RPC sends back.
impl Messaging {
    fn serve_query_route(&self, req: Request<pb::QueryRouteRequest>) -> pb::QueryRouteResponse {
        let topic = name(&req.get_ref().topic);
        if let Err(st) = self.authorize("QueryRoute", &req, GrpcCall::Route { topic }) {
            return pb::QueryRouteResponse {
                status: Some(st),
                message_queues: Vec::new(),
            };
        }
        self.query_route(req.into_inner())
    }

    async fn serve_heartbeat(&self, req: Request<pb::HeartbeatRequest>) -> pb::HeartbeatResponse {
        let checked = self.authorize("Heartbeat", &req, access::heartbeat(req.get_ref()));
        let (s, id) = match checked.and_then(|id| self.session(&req).map(|s| (s, id))) {
            Ok(x) => x,
            Err(st) => return pb::HeartbeatResponse { status: Some(st) },
        };
        s.touch();
        self.clients.register_producer(&s, &id).await;
        pb::HeartbeatResponse {
            status: Some(status::ok()),
        }
    }

    async fn serve_send(&self, req: Request<pb::SendMessageRequest>) -> pb::SendMessageResponse {
        let peer = metadata::peer(&req);
        let checked = self.authorize("SendMessage", &req, access::send(req.get_ref()));
        match checked.and_then(|id| self.session(&req).map(|s| (s, id))) {
            Ok((s, id)) => self.send_messages(&s, &id, peer, req.into_inner()).await,
            Err(st) => pb::SendMessageResponse {
                status: Some(st),
                entries: Vec::new(),
            },
        }
    }

    fn serve_query_assignment(
        &self,
        req: Request<pb::QueryAssignmentRequest>,
    ) -> pb::QueryAssignmentResponse {
        let r = req.get_ref();
        let call = GrpcCall::Consume {
            group: name(&r.group),
            topic: name(&r.topic),
        };
        if let Err(st) = self.authorize("QueryAssignment", &req, call) {
            return pb::QueryAssignmentResponse {
                status: Some(st),
                assignments: Vec::new(),
            };
        }
        let group = name(&req.get_ref().group).to_string();
        let fifo = self.broker.group_view(&group).is_some_and(|g| g.orderly);
        self.query_assignment(req.into_inner(), fifo)
    }

    async fn serve_receive(
        &self,
        req: Request<pb::ReceiveMessageRequest>,
    ) -> Vec<pb::ReceiveMessageResponse> {
        if let Err(st) = self.authorize("ReceiveMessage", &req, access::receive(req.get_ref())) {
            return vec![frame_status(st)];
        }
        let session = metadata::client_id(&req).and_then(|id| self.clients.get(&id));
        let deadline = crate::receive::grpc_timeout(&req);
        self.receive(session.as_deref(), req.into_inner(), deadline)
            .await
    }

    async fn serve_ack(&self, req: Request<pb::AckMessageRequest>) -> pb::AckMessageResponse {
        let r = req.get_ref();
        let call = GrpcCall::Consume {
            group: name(&r.group),
            topic: name(&r.topic),
        };
        if let Err(st) = self.authorize("AckMessage", &req, call) {
            return pb::AckMessageResponse {
                status: Some(st),
                entries: Vec::new(),
            };
        }
        self.ack(req.into_inner()).await
    }

    async fn serve_forward_to_dlq(
        &self,
        req: Request<pb::ForwardMessageToDeadLetterQueueRequest>,
    ) -> pb::ForwardMessageToDeadLetterQueueResponse {
        let r = req.get_ref();
        let call = GrpcCall::Consume {
            group: name(&r.group),
            topic: name(&r.topic),
        };
        let checked = self.authorize("ForwardMessageToDeadLetterQueue", &req, call);
        let st = match checked.and_then(|id| self.session(&req).map(|s| (s, id))) {
            Ok((s, id)) => self.forward_to_dlq(&s, &id, req.into_inner()).await,
            Err(st) => st,
        };
        pb::ForwardMessageToDeadLetterQueueResponse { status: Some(st) }
    }

    async fn serve_end_transaction(
        &self,
        req: Request<pb::EndTransactionRequest>,
    ) -> pb::EndTransactionResponse {
        let topic = name(&req.get_ref().topic);
        let checked = self.authorize("EndTransaction", &req, GrpcCall::Publish { topic });
        let st = match checked.and_then(|id| self.session(&req).map(|s| (s, id))) {
            Ok((s, id)) => self.end_transaction(&s, &id, req.into_inner()).await,
            Err(st) => st,
        };
        pb::EndTransactionResponse { status: Some(st) }
    }

    /// The telemetry stream, or why it is refused: CLIENT_ID_REQUIRED, or
    /// the authorization's refusal (FORBIDDEN, UNAUTHORIZED), which the
    /// RPC turns into gRPC statuses.
    fn serve_telemetry(
        &self,
        req: Request<tonic::Streaming<pb::TelemetryCommand>>,
    ) -> Result<Frames<pb::TelemetryCommand>, pb::Status> {
        let Some(id) = metadata::client_id(&req) else {
            return Err(status(
                Code::ClientIdRequired,
                "x-mq-client-id header is required",
            ));
        };
        // The stream is authenticated when it opens; its Settings are
        // authorized when they come, with the same headers.
        self.authorize("Telemetry", &req, GrpcCall::Unscoped)?;
        let session = self.clients.session(&id, metadata::peer(&req));
        let caller = access::Caller::of(&req);
        let rx = Messaging::telemetry(self, session, caller, req.into_inner());
        let out =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|x| (x, rx)) },
            );
        Ok(Box::pin(out))
    }

    fn serve_termination(
        &self,
        req: Request<pb::NotifyClientTerminationRequest>,
    ) -> pb::NotifyClientTerminationResponse {
        let checked = self.authorize(
            "NotifyClientTermination",
            &req,
            access::termination(req.get_ref()),
        );
        let st = match (metadata::client_id(&req), checked) {
            (_, Err(st)) => st,
            (Some(id), Ok(_)) => {
                self.clients.terminate(&id);
                status::ok()
            }
            (None, Ok(_)) => status(Code::ClientIdRequired, "x-mq-client-id header is required"),
        };
        pb::NotifyClientTerminationResponse { status: Some(st) }
    }

    async fn serve_change_invisible(
        &self,
        req: Request<pb::ChangeInvisibleDurationRequest>,
    ) -> pb::ChangeInvisibleDurationResponse {
        let group = name(&req.get_ref().group);
        if let Err(st) = self.authorize("ChangeInvisibleDuration", &req, GrpcCall::Group { group })
        {
            return pb::ChangeInvisibleDurationResponse {
                status: Some(st),
                receipt_handle: String::new(),
            };
        }
        self.change_invisible(req.into_inner()).await
    }
}
