//! Transport security for Basalt's listeners and inner links.
//!
//! * [`TlsSettings`]: RocketMQ's `tls.*` properties (`tls.server.mode`,
//!   `tls.server.certPath`, `tls.client.authServer`, ...), read from
//!   broker.conf, the NameServer's config or `tls.config.file`.
//! * [`ServerTls`]: the server side, PEM certificate and key loaded into a
//!   rustls config that is rebuilt when the files change (new connections
//!   get the new config; open ones keep theirs).
//! * [`ClientTls`]: the client side (Basalt's client, the CLI, the broker's
//!   inner clients).
//! * [`ServerSecurity`] / [`ClientSecurity`]: what a listener or a dialer
//!   does with a fresh TCP connection before any protocol byte: the TLS mode
//!   (disabled, permissive with first-byte sniffing, enforcing) and, on
//!   replication links, the cluster-secret handshake of [`peer_auth`].
//!
//! Nothing here knows the remoting protocol: the output is an [`Upgraded`]
//! stream, plain TCP untouched when TLS is off.

mod client;
mod error;
pub mod peer_auth;
mod security;
mod server;
mod settings;
mod verify;

pub use client::ClientTls;
pub use error::TlsError;
pub use peer_auth::PeerSecret;
pub use security::{ClientSecurity, ServerSecurity, Upgraded};
pub use server::ServerTls;
pub use settings::{ClientAuthMode, TlsMode, TlsSettings};

/// The crypto provider every config here is built with (ring), named
/// explicitly so that another provider compiled into the same binary does
/// not make rustls guess.
pub(crate) fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}
