//! What the SDKs send in gRPC headers: the client id (`x-mq-client-id`),
//! and the peer's socket address from the connection.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The header naming the calling client.
pub const CLIENT_ID: &str = "x-mq-client-id";

/// The caller's client id, when it sent one (and it is text).
pub fn client_id<T>(req: &tonic::Request<T>) -> Option<String> {
    req.metadata()
        .get(CLIENT_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The caller's address (unspecified when the transport does not say).
pub fn peer<T>(req: &tonic::Request<T>) -> SocketAddr {
    req.remote_addr()
        .unwrap_or_else(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0))
}
