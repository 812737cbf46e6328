//! The HTTP side of a broker: the Prometheus endpoint (`GET /metrics` on
//! `metricsPromExporterPort`) and the web dashboard (its own port), both
//! reading [`crate::metrics::snapshot`]. The dashboard's page, script,
//! chart code and style are compiled into the binary; it fetches only
//! from the broker that served it. Read-only unless
//! `dashboardAdminEnable=true`; with `authenticationEnabled`, its writes
//! and its users view need a super user's HTTP Basic credentials.

pub mod admin;
pub mod history;
pub mod lookup;
mod users;

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::{Method, StatusCode};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::broker::{Broker, BrokerError};
use crate::http_serve::{self, Handler, HttpReply, HttpRequest};
use crate::metrics::settings::MetricsExporterType;
use crate::metrics::{render, snapshot};
use crate::processor::BrokerProcessor;
use history::History;
use lookup::Lookup;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const CHART_JS: &str = include_str!("assets/chart.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

/// The HTTP listeners a broker runs, and their tasks (aborted at shutdown).
#[derive(Debug, Default)]
pub struct HttpServers {
    pub metrics_addr: Option<SocketAddr>,
    pub dashboard_addr: Option<SocketAddr>,
    pub tasks: Vec<JoinHandle<()>>,
}

/// Binds `addr`; with `best_effort`, a port in use only warns.
async fn bind(
    what: &str,
    addr: SocketAddr,
    best_effort: bool,
) -> Result<Option<TcpListener>, BrokerError> {
    match TcpListener::bind(addr).await {
        Ok(l) => Ok(Some(l)),
        Err(e) if best_effort => {
            tracing::warn!(%addr, error = %e, "{what} not served: cannot listen");
            Ok(None)
        }
        Err(source) => Err(BrokerError::Listen { addr, source }),
    }
}

/// Starts what the configuration asks for: the exporter, the dashboard
/// and its history sampler.
pub async fn start(broker: &Arc<Broker>) -> Result<HttpServers, BrokerError> {
    let o = broker.config.observe.clone();
    let mut out = HttpServers::default();
    if o.metrics_exporter_type == MetricsExporterType::Prom {
        let addr = SocketAddr::new(o.metrics_prom_exporter_host, o.metrics_prom_exporter_port);
        if let Some(l) = bind("metrics", addr, o.ports_best_effort).await? {
            out.metrics_addr = l.local_addr().ok();
            out.tasks.push(http_serve::spawn_secure(
                l,
                metrics_handler(Arc::clone(broker)),
                broker.transport.listener("metrics"),
            ));
        }
    }
    if o.dashboard_enable {
        let addr = SocketAddr::new(o.dashboard_host, o.dashboard_port);
        if let Some(l) = bind("dashboard", addr, o.ports_best_effort).await? {
            out.dashboard_addr = l.local_addr().ok();
            let d = Arc::new(Dashboard {
                broker: Arc::clone(broker),
                processor: Arc::new(BrokerProcessor::new(broker)),
                history: Arc::new(History::new(
                    o.dashboard_history,
                    o.dashboard_sample_interval,
                )),
            });
            out.tasks.push(tokio::spawn(Arc::clone(&d).sample()));
            let h: Handler = Arc::new(move |r| {
                let d = Arc::clone(&d);
                Box::pin(async move { d.answer(r).await })
            });
            out.tasks.push(http_serve::spawn_secure(
                l,
                h,
                broker.transport.listener("dashboard"),
            ));
        }
    }
    Ok(out)
}

fn metrics_handler(broker: Arc<Broker>) -> Handler {
    Arc::new(move |r: HttpRequest| {
        let b = Arc::clone(&broker);
        Box::pin(async move {
            match (r.method, r.path.as_str()) {
                (Method::GET, "/metrics") => {
                    let text = tokio::task::spawn_blocking(move || {
                        let s = snapshot::collect(&b);
                        render::render(&s, &b.stats.metrics, &b.store)
                    })
                    .await;
                    match text {
                        Ok(t) => HttpReply::ok(crate::metrics::text::CONTENT_TYPE, t),
                        Err(e) => {
                            HttpReply::error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
                        }
                    }
                }
                (Method::GET, "/") => HttpReply::ok(
                    "text/html; charset=utf-8",
                    "<html><body><a href=\"/metrics\">metrics</a></body></html>",
                ),
                _ => HttpReply::error(StatusCode::NOT_FOUND, "not found"),
            }
        })
    })
}

/// The dashboard's state: the broker it shows, a processor for its write
/// actions, and its history.
struct Dashboard {
    broker: Arc<Broker>,
    processor: Arc<BrokerProcessor>,
    history: Arc<History>,
}

impl Dashboard {
    /// Takes a history sample every `dashboardSampleIntervalMs`, the first
    /// one interval after start (a sample walks the store directory, which
    /// with many queues would compete with the start-up itself).
    async fn sample(self: Arc<Self>) {
        let every = self.broker.config.observe.dashboard_sample_interval;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Some(s) = snapshot::take(&self.broker).await {
                self.history.record(&s);
            }
        }
    }

    async fn answer(&self, r: HttpRequest) -> HttpReply {
        let o = &self.broker.config.observe;
        match (r.method.clone(), r.path.as_str()) {
            (Method::GET, "/" | "/index.html") => {
                HttpReply::ok("text/html; charset=utf-8", INDEX_HTML)
            }
            (Method::GET, "/app.js") => HttpReply::ok("text/javascript; charset=utf-8", APP_JS),
            (Method::GET, "/chart.js") => HttpReply::ok("text/javascript; charset=utf-8", CHART_JS),
            (Method::GET, "/style.css") => HttpReply::ok("text/css; charset=utf-8", STYLE_CSS),
            (Method::GET, "/api/config") => HttpReply::json(&serde_json::json!({
                "adminEnabled": o.dashboard_admin_enable,
                "authRequired": self.broker.auth_gate().settings().authentication_enabled,
                "refreshMs": o.dashboard_sample_interval.as_millis() as u64,
                "historyMs": o.dashboard_history.as_millis() as u64,
            })),
            (Method::GET, "/api/snapshot") => match snapshot::take(&self.broker).await {
                Some(s) => HttpReply::json(&s),
                None => HttpReply::error(StatusCode::INTERNAL_SERVER_ERROR, "snapshot failed"),
            },
            (Method::GET, "/api/history") => HttpReply::json(&self.history.points()),
            (Method::GET, "/api/message") => self.lookup(&r).await,
            (Method::GET, "/api/auth") => users::view(&self.broker, &r),
            (Method::POST, p) if p.starts_with("/api/admin/") => {
                self.admin(&p["/api/admin/".len()..], &r).await
            }
            _ => HttpReply::error(StatusCode::NOT_FOUND, "not found"),
        }
    }

    async fn lookup(&self, r: &HttpRequest) -> HttpReply {
        let topic = r.param("topic").unwrap_or("").to_string();
        let q = if let Some(key) = r.param("key").filter(|k| !k.is_empty()) {
            vec![Lookup::Key {
                topic,
                key: key.to_string(),
            }]
        } else if let Some(id) = r.param("msgId").filter(|k| !k.is_empty()) {
            // A client's message id is its unique key (in the index); a
            // broker-assigned one encodes the CommitLog offset.
            vec![
                Lookup::Key {
                    topic,
                    key: id.to_string(),
                },
                Lookup::OffsetId(id.to_string()),
            ]
        } else {
            let queue_id = r.param("queueId").and_then(|v| v.parse().ok());
            let offset = r.param("offset").and_then(|v| v.parse().ok());
            match (queue_id, offset) {
                (Some(queue_id), Some(offset)) => vec![Lookup::QueueOffset {
                    topic,
                    queue_id,
                    offset,
                }],
                _ => {
                    return HttpReply::error(
                        StatusCode::BAD_REQUEST,
                        "give key, msgId, or queueId and offset",
                    );
                }
            }
        };
        let store = Arc::clone(&self.broker.store);
        let found = tokio::task::spawn_blocking(move || {
            for l in &q {
                match lookup::find(&store, l) {
                    Ok(v) if !v.is_empty() => return Ok(v),
                    Ok(_) => {}
                    Err(e) if q.len() == 1 => return Err(e),
                    Err(_) => {}
                }
            }
            Ok(Vec::new())
        })
        .await;
        match found {
            Ok(Ok(v)) => HttpReply::json(&v),
            Ok(Err(e)) => HttpReply::error(StatusCode::BAD_REQUEST, e),
            Err(e) => HttpReply::error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        }
    }

    async fn admin(&self, action: &str, r: &HttpRequest) -> HttpReply {
        if !self.broker.config.observe.dashboard_admin_enable {
            return HttpReply::error(
                StatusCode::FORBIDDEN,
                "the dashboard is read-only (dashboardAdminEnable=false)",
            );
        }
        if !r.same_origin_script {
            return HttpReply::error(StatusCode::FORBIDDEN, "X-Requested-With required");
        }
        let user = match users::require_super(&self.broker, r) {
            Ok(u) => u,
            Err(refused) => return refused,
        };
        let req = match admin::request_for(action, r) {
            Ok(req) => req,
            Err(e) => return HttpReply::error(StatusCode::BAD_REQUEST, e),
        };
        tracing::info!(action, query = ?r.query, user = ?user, "dashboard admin action");
        let resp = self.processor.internal_admin(req).await;
        match admin::outcome(&resp) {
            Ok(m) => HttpReply::json(&serde_json::json!({ "ok": true, "message": m })),
            Err(e) => HttpReply::error(StatusCode::UNPROCESSABLE_ENTITY, e),
        }
    }
}
