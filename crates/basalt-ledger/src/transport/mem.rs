//! An in-process network for runtime tests: members register an inbox; messages
//! are delivered at once unless the two members are in different partitions.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Inbox, Transport};
use crate::protocol::{Envelope, NodeId};

#[derive(Default)]
struct Net {
    inboxes: BTreeMap<NodeId, Inbox>,
    /// Members cut off from everybody else.
    isolated: Vec<NodeId>,
}

/// A shared in-process network. Cheap to clone.
#[derive(Clone, Default)]
pub struct MemNetwork {
    net: Arc<Mutex<Net>>,
}

impl MemNetwork {
    pub fn new() -> MemNetwork {
        MemNetwork::default()
    }

    /// The transport of member `id`, delivering to `inbox`.
    pub fn join(&self, id: NodeId, inbox: Inbox) -> Arc<MemTransport> {
        self.net.lock().inboxes.insert(id.clone(), inbox);
        Arc::new(MemTransport {
            id,
            net: self.clone(),
        })
    }

    /// Cuts `id` off from everybody (both directions).
    pub fn isolate(&self, id: &NodeId) {
        let mut n = self.net.lock();
        if !n.isolated.contains(id) {
            n.isolated.push(id.clone());
        }
    }

    /// Reconnects everybody.
    pub fn heal(&self) {
        self.net.lock().isolated.clear();
    }

    fn deliver(&self, env: Envelope) {
        let n = self.net.lock();
        if n.isolated.contains(&env.from) || n.isolated.contains(&env.to) {
            return;
        }
        if let Some(inbox) = n.inboxes.get(&env.to) {
            let _ = inbox.send(env);
        }
    }
}

/// One member's view of a [`MemNetwork`].
pub struct MemTransport {
    id: NodeId,
    net: MemNetwork,
}

impl Transport for MemTransport {
    fn send(&self, env: Envelope) {
        self.net.deliver(env);
    }

    fn shutdown(&self) {
        self.net.net.lock().inboxes.remove(&self.id);
    }
}
