//! Binding the gRPC port and serving the MessagingService until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use basalt_broker::Broker;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::conn;
use crate::pb::messaging_service_server::MessagingServiceServer;
use crate::service::Messaging;

/// Why the gRPC server did not start.
#[derive(Debug, Error)]
pub enum GrpcError {
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS on the gRPC port: {0}")]
    Tls(String),
}

/// A running gRPC server. Invariant: `addr` is the bound address (the real
/// port when 0 was asked for). Stop it with [`GrpcHandle::shutdown`].
pub struct GrpcHandle {
    addr: SocketAddr,
    tls: Option<basalt_tls::TlsMode>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    sweeper: JoinHandle<()>,
    acceptor: JoinHandle<()>,
}

impl GrpcHandle {
    /// Where the server listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TLS mode of the port (None: plain text only).
    pub fn tls_mode(&self) -> Option<basalt_tls::TlsMode> {
        self.tls
    }

    /// Stops taking calls, ends open streams and waits for the server task.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.sweeper.abort();
        self.acceptor.abort();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut self.task).await;
        self.task.abort();
    }
}

/// Largest gRPC message taken: the broker's message size limit plus room
/// for properties and framing (a bigger send is refused by gRPC itself).
fn max_decoding(broker: &Broker) -> usize {
    broker.config().max_message_size + 1024 * 1024
}

/// The port's TLS, from the broker's `tls.*` settings (and
/// `tls.config.file`), read off the async workers: see
/// [`basalt_tls::ServerTls::for_grpc`] and docs/grpc.md.
async fn load_tls(broker: &Broker) -> Result<Option<Arc<basalt_tls::ServerTls>>, GrpcError> {
    let settings = broker.config().security.tls.clone();
    tokio::task::spawn_blocking(move || {
        let s = settings
            .with_config_file()
            .map_err(|e| GrpcError::Tls(e.to_string()))?;
        basalt_tls::ServerTls::for_grpc(&s).map_err(|e| GrpcError::Tls(e.to_string()))
    })
    .await
    .map_err(|e| GrpcError::Tls(format!("load task: {e}")))?
}

/// Binds `listen` and serves the MessagingService for `broker`. The routes
/// it answers name `advertise_host` with the bound port.
pub async fn start(
    broker: Arc<Broker>,
    listen: SocketAddr,
    advertise_host: String,
) -> Result<GrpcHandle, GrpcError> {
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| GrpcError::Listen {
            addr: listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| GrpcError::Listen {
        addr: listen,
        source,
    })?;
    let tls = load_tls(&broker).await?;
    let mode = tls.as_ref().map(|t| t.mode());
    if let Some(t) = &tls {
        tracing::info!(
            mode = t.mode().as_str(),
            self_signed = t.is_self_signed(),
            "TLS on the gRPC port"
        );
    }
    let security = Arc::new(basalt_tls::ServerSecurity {
        tls,
        secret: None,
        purpose: "grpc",
    });
    let max = max_decoding(&broker);
    let messaging = Messaging::new(broker, advertise_host, addr.port());
    let sweeper = tokio::spawn(Arc::clone(messaging.clients()).sweep_forever());
    let svc = MessagingServiceServer::new(messaging)
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (incoming, acceptor) = conn::accept(listener, security);
    let task = tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stop_rx.await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "gRPC server stopped");
        }
    });
    tracing::info!(%addr, "gRPC MessagingService listening");
    Ok(GrpcHandle {
        addr,
        tls: mode,
        stop: Some(stop_tx),
        task,
        sweeper,
        acceptor,
    })
}
