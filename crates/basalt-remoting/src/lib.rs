//! RocketMQ's remoting protocol for Basalt (docs/protocol.md): frames, commands,
//! codes, typed headers, JSON bodies, and a tokio transport.
//!
//! * [`command`] — [`RemotingCommand`], [`ExtFields`], [`LanguageCode`];
//! * [`codec`] — frame encode/decode, JSON and binary headers;
//! * [`code`] — request and response codes;
//! * [`header`] — typed custom headers ([`header::CommandHeader`]);
//! * [`protocol`] — JSON bodies (route, register, heartbeat, stats…);
//! * [`fastjson`] — tolerant reader and bare-key writers for fastjson quirks;
//! * [`transport`] — [`RemotingServer`], [`RemotingClient`], [`Channel`].
//!
//! Knows nothing of storage.

pub mod code;
pub mod codec;
pub mod command;
pub mod error;
pub mod fastjson;
#[doc(hidden)]
pub mod fuzzing;
pub mod header;
pub mod json;
pub mod protocol;
pub mod transport;

/// TLS and the cluster-secret handshake, as the transport takes them.
pub use basalt_tls::{ClientSecurity, ClientTls, ServerSecurity, TlsSettings};
pub use command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
pub use error::{DecodeError, HeaderError, RemotingError};
pub use transport::{
    Channel, ClientRequestHandler, ConnectionConfig, RemotingClient, RemotingClientConfig,
    RemotingServer, RequestHook, RequestProcessor, ServerConfig, ServerHandle,
};
