//! RocketMQ 5's gRPC messaging protocol (`apache.rocketmq.v2.MessagingService`)
//! served by the broker itself, so the 5.x SDKs connect to Basalt without a
//! proxy (docs/grpc.md).
//!
//! The service is a thin translation layer, as RocketMQ's proxy is in local
//! mode: sends, transaction ends and client registration become remoting
//! commands handled by the broker's own processors, through a detached
//! [`basalt_remoting::Channel`] per client; receives, acks and invisible-time
//! changes call the broker's POP interface ([`basalt_broker::pop`]).
//!
//! * [`pb`] — the protobuf messages and the tonic server (generated from
//!   `proto/`, committed);
//! * [`server`] — binding and serving, [`GrpcHandle`];
//! * `service` — the RPCs, each counted by `counted` in the broker's
//!   metrics (`basalt_grpc_*`); `route`, `send`, `receive`, `telemetry` hold
//!   their work; `convert` maps messages; `sessions` keeps clients.

mod access;
mod clients;
mod conn;
mod convert;
mod counted;
mod metadata;
mod receive;
mod route;
mod send;
pub mod server;
mod service;
mod status;
mod telemetry;
mod transactions;

pub use server::{GrpcError, GrpcHandle, start};

/// The generated protobuf messages and service of `apache.rocketmq.v2`.
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod pb {
    include!("gen/apache.rocketmq.v2.rs");
}
