//! Connected clients: producer and consumer groups and their subscriptions
//! ([`registry`]), queue locks of orderly consumers ([`locks`]), and pulls
//! held until messages arrive ([`waiters`]).

pub mod locks;
pub mod registry;
pub mod waiters;
