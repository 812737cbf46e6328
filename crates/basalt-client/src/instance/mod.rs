//! [`ClientInstance`]: the connection, route and heartbeat machinery that
//! producers and consumers share (Java `MQClientInstance`).
//!
//! The instance owns its parts and runs their timers; each part owns its
//! own state and locks:
//!
//! * `route_cache` — NameServer selection, the route cache, broker
//!   addresses, publish infos and pull-from suggestions, and the route
//!   methods that fetch and apply routes;
//! * `registry` — the producers and consumers the instance serves, their
//!   heartbeats and unregistration;
//! * `server_requests` — the requests brokers send to the client.

mod registry;
mod route_cache;
mod server_requests;

use std::sync::{Arc, Weak};
use std::time::Duration;

use basalt_common::msgid::UniqKeyGenerator;
use basalt_remoting::code::response;
use basalt_remoting::transport::BoxFuture;
use basalt_remoting::{RemotingClient, RemotingCommand};
use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
pub use registry::CLIENT_INNER_PRODUCER_GROUP;
use registry::ClientRegistry;
pub(crate) use registry::ConsumerInner;
use route_cache::NameServers;
pub(crate) use route_cache::RouteCache;
use server_requests::ServerRequests;

/// The timers of a started instance and the signal that stops them.
struct Services {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// The per-process client core (Java `MQClientInstance`): one
/// [`RemotingClient`], the NameServers, the route cache, the registry of
/// the producers and consumers it heartbeats for, and its timers.
///
/// Producers and consumers created with `new` each get their own instance;
/// `with_instance` constructors share one. Timers run while at least one
/// started producer or consumer uses the instance (`users` > 0), and hold
/// only a weak reference, so dropping every user stops them.
pub struct ClientInstance {
    config: ClientConfig,
    client_id: String,
    client_ip: String,
    remoting: RemotingClient,
    namesrvs: NameServers,
    routes: RouteCache,
    registry: ClientRegistry,
    rebalance_notify: Notify,
    services: Mutex<Option<Services>>,
    users: Mutex<usize>,
    uniq: UniqKeyGenerator,
}

impl std::fmt::Debug for ClientInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientInstance")
            .field("client_id", &self.client_id)
            .field("namesrvs", &self.namesrvs.addrs())
            .finish()
    }
}

/// Signs each request as Java's `AclClientRPCHook` does.
struct SignRequests(crate::config::Credentials);

impl basalt_remoting::RequestHook for SignRequests {
    fn before_request(&self, cmd: &mut basalt_remoting::RemotingCommand) {
        basalt_auth::sign::sign(cmd, &self.0.access_key, &self.0.secret_key, None);
    }
}

impl ClientInstance {
    /// A new instance; nothing is connected until it is used.
    pub fn new(config: ClientConfig) -> Arc<Self> {
        let client_ip = config.resolve_client_ip();
        let client_id = format!("{}@{}", client_ip, config.resolve_instance_name());
        let namesrvs = NameServers::new(config.namesrv_list());
        let ip = client_ip
            .parse()
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        Arc::new_cyclic(|weak: &Weak<Self>| {
            let remoting = RemotingClient::with_handler(
                basalt_remoting::RemotingClientConfig {
                    connect_timeout: config.connect_timeout,
                    security: config.tls.clone().map(|tls| {
                        Arc::new(basalt_remoting::ClientSecurity {
                            tls: Some(tls),
                            secret: None,
                            purpose: "client",
                        })
                    }),
                    hook: config.credentials.clone().map(|c| {
                        Arc::new(SignRequests(c)) as Arc<dyn basalt_remoting::RequestHook>
                    }),
                    ..Default::default()
                },
                Arc::new(ServerRequests(weak.clone())),
            );
            Self {
                client_id,
                client_ip,
                remoting,
                namesrvs,
                routes: RouteCache::default(),
                registry: ClientRegistry::new(),
                rebalance_notify: Notify::new(),
                services: Mutex::new(None),
                users: Mutex::new(0),
                uniq: UniqKeyGenerator::new(ip, crate::util::random_u32()),
                config,
            }
        })
    }

    /// `ip@instanceName`: how brokers and other consumers know this client.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    pub fn client_ip(&self) -> &str {
        &self.client_ip
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The connection pool (for requests this crate has no method for).
    pub fn remoting(&self) -> &RemotingClient {
        &self.remoting
    }

    /// The route cache (routes, broker addresses, publish infos).
    pub(crate) fn routes(&self) -> &RouteCache {
        &self.routes
    }

    pub(crate) fn next_uniq_key(&self) -> String {
        self.uniq.next_key()
    }

    /// A request command with this client's language, version and header
    /// encoding.
    pub fn request(&self, code: i32) -> RemotingCommand {
        let mut cmd = RemotingCommand::request(code);
        cmd.language = self.config.language;
        cmd.version = self.config.version;
        cmd.serialize_type = self.config.serialize_type;
        cmd
    }

    /// Sends `cmd` to `addr` and waits for the answer (any code).
    pub async fn invoke(
        &self,
        addr: &str,
        cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        Ok(self.remoting.invoke(addr, cmd, timeout).await?)
    }

    /// Like [`Self::invoke`], but any code other than SUCCESS is an error.
    pub async fn invoke_ok(
        &self,
        addr: &str,
        cmd: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand> {
        let resp = self.invoke(addr, cmd, timeout).await?;
        if resp.code != response::SUCCESS {
            return Err(ClientError::broker(resp.code, resp.remark, addr));
        }
        Ok(resp)
    }

    /// Sends `cmd` to a NameServer, trying the next one when a NameServer
    /// cannot be reached, and sticking to the one that answered.
    pub async fn invoke_namesrv(&self, cmd: RemotingCommand) -> Result<(String, RemotingCommand)> {
        self.namesrvs
            .invoke(&self.remoting, cmd, self.config.request_timeout)
            .await
    }

    /// The NameServer addresses this instance uses.
    pub fn namesrv_addrs(&self) -> &[String] {
        self.namesrvs.addrs()
    }

    /// Asks the rebalance service to run now.
    pub fn rebalance_now(&self) {
        self.rebalance_notify.notify_one();
    }

    /// Marks one more started user; the first one starts the timers.
    pub(crate) fn acquire(self: &Arc<Self>) {
        let mut users = self.users.lock();
        *users += 1;
        if *users == 1 {
            self.start_services();
        }
    }

    /// Marks one user gone; the last one stops the timers and closes the
    /// connections.
    pub(crate) async fn release(&self) {
        let stop = {
            let mut users = self.users.lock();
            *users = users.saturating_sub(1);
            *users == 0
        };
        if stop {
            let services = self.services.lock().take();
            if let Some(s) = services {
                s.stop.send_replace(true);
                for t in s.tasks {
                    let _ = t.await;
                }
            }
            self.remoting.shutdown();
        }
    }

    fn start_services(self: &Arc<Self>) {
        let (stop, stop_rx) = watch::channel(false);
        let cfg = &self.config;
        let mut tasks = Vec::new();
        // The first heartbeat goes out after 1 s, as in Java, so brokers
        // learn of producers whose routes were found at their first send.
        tasks.push(spawn_periodic(
            Arc::downgrade(self),
            stop_rx.clone(),
            cfg.poll_name_server_interval,
            cfg.poll_name_server_interval,
            |me| Box::pin(async move { me.refresh_all_routes().await }),
        ));
        tasks.push(spawn_periodic(
            Arc::downgrade(self),
            stop_rx.clone(),
            cfg.heartbeat_interval.min(Duration::from_secs(1)),
            cfg.heartbeat_interval,
            |me| {
                Box::pin(async move {
                    me.routes.clean_offline_brokers();
                    me.send_heartbeat_to_all_brokers().await;
                })
            },
        ));
        tasks.push(spawn_periodic(
            Arc::downgrade(self),
            stop_rx.clone(),
            cfg.persist_consumer_offset_interval,
            cfg.persist_consumer_offset_interval,
            |me| {
                Box::pin(async move {
                    for c in me.registry.live_consumers() {
                        c.persist_offsets().await;
                    }
                })
            },
        ));
        tasks.push(tokio::spawn(rebalance_service(
            Arc::downgrade(self),
            stop_rx,
            cfg.rebalance_interval,
        )));
        *self.services.lock() = Some(Services { stop, tasks });
    }

    async fn rebalance_all(&self) {
        for c in self.registry.live_consumers() {
            c.rebalance().await;
        }
    }
}

type Job = fn(Arc<ClientInstance>) -> BoxFuture<'static, ()>;

/// Runs `job` after `first`, then every `period`, until the stop signal or
/// until the instance is gone.
fn spawn_periodic(
    weak: Weak<ClientInstance>,
    mut stop: watch::Receiver<bool>,
    first: Duration,
    period: Duration,
    job: Job,
) -> JoinHandle<()> {
    let period = period.max(Duration::from_millis(1));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + first, period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            let Some(me) = weak.upgrade() else { return };
            tokio::select! {
                _ = job(me) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    })
}

/// Rebalances every push consumer each `period`, and at once when asked
/// (NOTIFY_CONSUMER_IDS_CHANGED, a start, a dropped queue).
async fn rebalance_service(
    weak: Weak<ClientInstance>,
    mut stop: watch::Receiver<bool>,
    period: Duration,
) {
    let period = period.max(Duration::from_millis(1));
    loop {
        // The strong reference lives for one round only, so dropping every
        // user of the instance ends this task at the next round.
        let Some(me) = weak.upgrade() else { return };
        let go = tokio::select! {
            _ = me.rebalance_notify.notified() => true,
            _ = tokio::time::sleep(period) => true,
            _ = stop.wait_for(|s| *s) => false,
        };
        if !go {
            return;
        }
        tokio::select! {
            _ = me.rebalance_all() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}
