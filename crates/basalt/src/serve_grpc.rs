//! Starting the RocketMQ 5 gRPC MessagingService (crate basalt-grpc) next
//! to the broker, in standalone and broker mode alike (docs/grpc.md).

use std::net::SocketAddr;

use basalt_broker::BrokerHandle;
use basalt_grpc::GrpcHandle;

/// Starts the gRPC server on `grpcServerPort` unless `enableGrpcServer` is
/// false. A port that cannot be bound only warns (another broker on the
/// machine may hold the default 8081): remoting serves on, and the start
/// lines say gRPC is not served.
pub async fn start(broker: &BrokerHandle) -> Option<GrpcHandle> {
    let b = broker.broker();
    let cfg = b.config();
    if !cfg.enable_grpc_server {
        return None;
    }
    let listen = SocketAddr::new(cfg.listen_addr, cfg.grpc_server_port);
    match basalt_grpc::start(b.clone(), listen, cfg.broker_ip1.to_string()).await {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!(error = %e, "gRPC MessagingService not served (set grpcServerPort, or enableGrpcServer=false)");
            None
        }
    }
}

/// The start-up line naming where the 5.x SDKs connect.
pub fn print(grpc: Option<&GrpcHandle>, advertise: std::net::IpAddr, indent: &str) {
    match grpc {
        Some(g) => println!(
            "{indent}grpc     {} tls={} (5.x SDKs: endpoints={advertise}:{})",
            g.local_addr(),
            g.tls_mode().map_or("disabled", |m| m.as_str()),
            g.local_addr().port()
        ),
        None => println!("{indent}grpc     not served"),
    }
}
