//! The simulated network: delay, delay spikes that reorder, loss and duplication
//! while faults are on, and partitions (a message crosses only within a group).

use super::Sim;
use super::event_queue::Ev;
use crate::core::Event;
use crate::protocol::Envelope;

impl Sim {
    pub(super) fn send(&mut self, env: Envelope) {
        if self.faults_on && self.rng.range(0, 1000) < self.loss {
            return;
        }
        let copies = if self.faults_on && self.rng.range(0, 1000) < self.dup {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if self.faults_on && self.rng.range(0, 100) < 3 {
                self.rng.range(5_000, 150_000)
            } else {
                self.rng.range(100, 2_000)
            };
            self.schedule(self.now_us + delay, Ev::Deliver(env.clone()));
        }
    }

    /// Hands a message to its addressee, unless a partition separates the two.
    pub(super) fn deliver(&mut self, env: Envelope) -> Result<(), String> {
        let Some(i) = self.index_of(&env.to) else {
            return Ok(());
        };
        let from = self.index_of(&env.from).unwrap_or(i);
        if self.nodes[from].group != self.nodes[i].group {
            return Ok(());
        }
        self.step_node(i, Event::Message(env))
    }
}
