//! Messages out: request ids, requests and responses, and holding messages back
//! until the term/vote change they follow is durable.

use crate::protocol::{Envelope, NodeId, Request, RequestId, Response, Rpc};

use super::{LedgerCommand, LedgerCore};

impl LedgerCore {
    pub(crate) fn next_id(&mut self) -> RequestId {
        let id = self.next_request_id;
        self.next_request_id += 1;
        id
    }

    /// Sends a request and returns its id.
    pub(crate) fn request(&mut self, to: NodeId, body: Request) -> RequestId {
        let id = self.next_id();
        self.send(Envelope {
            from: self.self_id.clone(),
            to,
            rpc: Rpc::Request { id, body },
        });
        id
    }

    pub(crate) fn respond(&mut self, to: NodeId, id: RequestId, body: Response) {
        self.send(Envelope {
            from: self.self_id.clone(),
            to,
            rpc: Rpc::Response { id, body },
        });
    }

    /// Queues a message, holding it while a term/vote change is not durable.
    pub(crate) fn send(&mut self, env: Envelope) {
        if self.persisted_version < self.blocking_version || !self.held.is_empty() {
            self.held.push((self.blocking_version, env));
        } else {
            self.out.push(LedgerCommand::Send(env));
        }
    }

    pub(super) fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let persisted = self.persisted_version;
        let mut keep = Vec::new();
        let mut releasing = true;
        for (v, env) in std::mem::take(&mut self.held) {
            // Keep order: once one message must wait, all later ones wait too.
            if releasing && v <= persisted {
                self.out.push(LedgerCommand::Send(env));
            } else {
                releasing = false;
                keep.push((v, env));
            }
        }
        self.held = keep;
    }
}
