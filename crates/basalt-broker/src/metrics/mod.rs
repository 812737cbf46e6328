//! What the broker counts for operators: the metric registry the request
//! paths feed ([`registry`]), one reading of the broker's state
//! ([`snapshot`]), and its rendering in Prometheus' text format
//! ([`text`], [`render`]) under RocketMQ 5's names. The `/metrics` endpoint
//! and the dashboard ([`crate::dashboard`]) read the same snapshot.

pub mod grpc;
pub mod registry;
pub mod render;
pub mod settings;
pub mod snapshot;
pub mod table;
pub mod text;

pub use grpc::GrpcMetrics;
pub use registry::BrokerMetrics;
