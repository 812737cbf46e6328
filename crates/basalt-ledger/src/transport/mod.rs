//! How ledger members exchange [`Envelope`]s.
//!
//! A [`Transport`] sends; what arrives is pushed into the member's inbox (an
//! `mpsc` sender handed to the transport when it is built). Requests and responses
//! are correlated by the [`crate::protocol::RequestId`] rules of
//! [`crate::protocol`]: a transport delivers a response with the id of the request
//! it answers.
//!
//! * [`tcp::TcpTransport`] — DLedger RPCs in RocketMQ remoting frames over TCP,
//!   pushes between Basalt members in the binary form they negotiate;
//! * [`mem::MemNetwork`] — in-process channels with partitions, for tests.

pub mod mem;
pub mod tcp;
mod tcp_codec;

use tokio::sync::mpsc;

use crate::protocol::Envelope;

/// Where a transport delivers what arrives for a member.
pub type Inbox = mpsc::UnboundedSender<Envelope>;

/// Sends envelopes to other members. Never blocks; a message may be lost (the
/// core retries).
pub trait Transport: Send + Sync + 'static {
    fn send(&self, env: Envelope);

    /// Stops sending and receiving.
    fn shutdown(&self) {}
}
