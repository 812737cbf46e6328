//! The 5.x clients the service knows, by client id: each has a detached
//! remoting [`Channel`] through which the broker's processors see it (it
//! registers as a producer of its topics, and transaction check-backs come
//! back through it), its settings as last synced, and its telemetry stream
//! when one is open.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use basalt_auth::grpc::GrpcIdentity;
use basalt_broker::processor::BrokerProcessor;
use basalt_remoting::code::request;
use basalt_remoting::protocol::client::{HeartbeatData, ProducerData};
use basalt_remoting::{Channel, RemotingCommand, RequestProcessor};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::pb::{self, TelemetryCommand};

/// How long a client may stay silent (no heartbeat, no call) before it is
/// forgotten; the SDKs heartbeat every 10 s.
const SILENT_LIMIT: Duration = Duration::from_secs(120);

/// The sending half of a client's telemetry stream.
pub type TelemetryTx = mpsc::Sender<Result<TelemetryCommand, tonic::Status>>;

/// One client. Invariant: `channel` lives as long as the session; it is
/// closed (and the broker told) when the session ends.
pub struct Session {
    pub client_id: String,
    pub channel: Channel,
    pub settings: Mutex<Option<pb::Settings>>,
    pub telemetry: Mutex<Option<TelemetryTx>>,
    last_seen: Mutex<Instant>,
}

impl Session {
    /// Marks the client alive now.
    pub fn touch(&self) {
        *self.last_seen.lock() = Instant::now();
    }

    /// The topics a producer publishes to, from its settings.
    pub fn publishing_topics(&self) -> Vec<String> {
        let s = self.settings.lock();
        match s.as_ref().and_then(|s| s.pub_sub.as_ref()) {
            Some(pb::settings::PubSub::Publishing(p)) => {
                p.topics.iter().map(|t| t.name.clone()).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Whether the client asked for FIFO consumption in its settings.
    pub fn fifo(&self) -> bool {
        let s = self.settings.lock();
        matches!(
            s.as_ref().and_then(|s| s.pub_sub.as_ref()),
            Some(pb::settings::PubSub::Subscription(sub)) if sub.fifo.unwrap_or(false)
        )
    }
}

/// Every known client, by id.
pub struct Clients {
    processor: Arc<BrokerProcessor>,
    local: SocketAddr,
    map: Mutex<HashMap<String, Arc<Session>>>,
    /// Where commands the broker sends to a client (check-backs) go.
    on_command: Arc<dyn Fn(Arc<Session>, RemotingCommand) + Send + Sync>,
}

impl Clients {
    pub fn new(
        processor: Arc<BrokerProcessor>,
        local: SocketAddr,
        on_command: Arc<dyn Fn(Arc<Session>, RemotingCommand) + Send + Sync>,
    ) -> Self {
        Clients {
            processor,
            local,
            map: Mutex::new(HashMap::new()),
            on_command,
        }
    }

    /// The session of `client_id`, made on first sight.
    pub fn session(&self, client_id: &str, peer: SocketAddr) -> Arc<Session> {
        let mut map = self.map.lock();
        if let Some(s) = map.get(client_id) {
            s.touch();
            return Arc::clone(s);
        }
        let (channel, mut rx) =
            Channel::detached(peer, self.local, format!("grpc:{client_id}@{peer}"), 256);
        let session = Arc::new(Session {
            client_id: client_id.to_string(),
            channel,
            settings: Mutex::new(None),
            telemetry: Mutex::new(None),
            last_seen: Mutex::new(Instant::now()),
        });
        map.insert(client_id.to_string(), Arc::clone(&session));
        let weak = Arc::downgrade(&session);
        let on_command = Arc::clone(&self.on_command);
        tokio::spawn(async move {
            while let Some(cmd) = rx.recv().await {
                let Some(s) = weak.upgrade() else { break };
                on_command(s, cmd);
            }
        });
        session
    }

    /// The session of `client_id`, if known.
    pub fn get(&self, client_id: &str) -> Option<Arc<Session>> {
        self.map.lock().get(client_id).cloned()
    }

    /// Registers the client with the broker as a producer of its topics
    /// (the producer group of a gRPC producer is the topic, as RocketMQ's
    /// proxy names it), so transaction check-backs find it.
    pub async fn register_producer(&self, s: &Session, id: &GrpcIdentity) {
        let topics = s.publishing_topics();
        if topics.is_empty() {
            return;
        }
        let data = HeartbeatData {
            client_id: s.client_id.clone(),
            producer_data_set: topics
                .into_iter()
                .map(|t| ProducerData { group_name: t })
                .collect(),
            ..Default::default()
        };
        let body = match serde_json::to_vec(&data) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "cannot encode a gRPC client's heartbeat");
                return;
            }
        };
        let mut cmd = RemotingCommand::request(request::HEART_BEAT).with_body(body);
        id.sign(&mut cmd);
        if let Some(resp) = self.processor.process(&s.channel, cmd).await
            && resp.code != basalt_remoting::code::response::SUCCESS
        {
            tracing::warn!(client = %s.client_id, code = resp.code, remark = ?resp.remark, "gRPC producer registration refused");
        }
    }

    /// Ends a client's session: the broker forgets its channel.
    pub fn terminate(&self, client_id: &str) {
        let s = self.map.lock().remove(client_id);
        if let Some(s) = s {
            self.end(&s);
        }
    }

    fn end(&self, s: &Session) {
        self.processor.on_channel_closed(&s.channel);
        s.channel.close();
        s.telemetry.lock().take();
    }

    /// Forgets clients silent past [`SILENT_LIMIT`], every 30 s, forever.
    pub async fn sweep_forever(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        loop {
            tick.tick().await;
            let stale: Vec<Arc<Session>> = {
                let mut map = self.map.lock();
                let ids: Vec<String> = map
                    .iter()
                    .filter(|(_, s)| s.last_seen.lock().elapsed() > SILENT_LIMIT)
                    .map(|(k, _)| k.clone())
                    .collect();
                ids.iter().filter_map(|k| map.remove(k)).collect()
            };
            for s in stale {
                tracing::info!(client = %s.client_id, "gRPC client silent too long; forgotten");
                self.end(&s);
            }
        }
    }
}
