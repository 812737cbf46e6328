//! Binding the gRPC port and serving the MessagingService until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use basalt_broker::Broker;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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
}

/// A running gRPC server. Invariant: `addr` is the bound address (the real
/// port when 0 was asked for). Stop it with [`GrpcHandle::shutdown`].
pub struct GrpcHandle {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    sweeper: JoinHandle<()>,
}

impl GrpcHandle {
    /// Where the server listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops taking calls, ends open streams and waits for the server task.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.sweeper.abort();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut self.task).await;
        self.task.abort();
    }
}

/// Largest gRPC message taken: the broker's message size limit plus room
/// for properties and framing (a bigger send is refused by gRPC itself).
fn max_decoding(broker: &Broker) -> usize {
    broker.config().max_message_size + 1024 * 1024
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
    let max = max_decoding(&broker);
    let messaging = Messaging::new(broker, advertise_host, addr.port());
    let sweeper = tokio::spawn(Arc::clone(messaging.clients()).sweep_forever());
    let svc = MessagingServiceServer::new(messaging)
        .max_decoding_message_size(max)
        .max_encoding_message_size(max);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
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
        stop: Some(stop_tx),
        task,
        sweeper,
    })
}
