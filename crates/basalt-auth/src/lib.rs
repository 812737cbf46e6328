//! Authentication and authorization for Basalt's remoting requests, as
//! RocketMQ does them (docs/auth.md):
//!
//! * ACL 2.0 (RocketMQ 5.3+): users and ACL policies in [`store`], decided
//!   by [`evaluate`], with each request code's resources in
//!   [`request_map`];
//! * ACL 1.0: the 4.x `plain_acl.yml` accounts in [`plain_acl`], reloaded
//!   when the files change;
//! * request signatures ([`sign`]) as `AclClientRPCHook` computes them;
//! * [`gate::AuthGate`]: the one check the broker and NameServer run before
//!   dispatching a request, with failure counters and rate-bounded logs;
//! * [`grpc`]: the same check for a 5.x SDK's gRPC call (its signed
//!   `authorization` header, the RPC's resources);
//! * [`admin`]: the auth admin codes 3001–3010;
//! * [`sync`]: users and ACLs copied to slaves and ledger followers;
//! * [`basic`]: HTTP Basic credentials of a super user (the dashboard).
//!
//! The broker reaches it through `AuthGate::check` and the admin handler;
//! nothing here knows the broker's internals.

pub mod admin;
pub mod basic;
pub mod evaluate;
pub mod gate;
pub mod grpc;
pub mod ip;
pub mod model;
pub mod plain_acl;
pub mod request_map;
pub mod settings;
pub mod sign;
pub mod store;
pub mod sync;

pub use gate::{AuthGate, Refusal};
pub use settings::AuthSettings;
pub use store::{AuthStore, Persist};

/// What can go wrong reading or changing auth data.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// Bad input (a request, a body, a file's content).
    #[error("{0}")]
    Invalid(String),
    /// The users or ACLs could not be saved; nothing was changed.
    #[error("could not save: {0}")]
    Io(String),
}
