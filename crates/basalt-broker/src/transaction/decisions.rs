//! [`Decisions`]: the transactions decided lately, by transaction id, so that
//! a second END_TRANSACTION for one transaction (the producer's own and one
//! answering a check, or two answers to two half copies) neither stores the
//! message twice nor overturns the first decision, and so that the check
//! service skips copies of decided transactions.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// A producer's decision about a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Commit,
    Rollback,
}

impl Decision {
    pub fn name(self) -> &'static str {
        match self {
            Decision::Commit => "committed",
            Decision::Rollback => "rolled back",
        }
    }
}

#[derive(Debug)]
enum TxState {
    /// An END_TRANSACTION is applying a decision; others wait for it.
    InFlight(Arc<Notify>),
    Decided {
        decision: Decision,
        at: Instant,
    },
}

/// What [`Decisions::claim`] found.
#[derive(Debug)]
pub enum Claim<'a> {
    /// Nobody decided this transaction lately: the caller applies its
    /// decision and reports it through the guard.
    Mine(ClaimGuard<'a>),
    /// It was decided already.
    Decided(Decision),
}

/// Recent decisions, by transaction id. Invariant: at most one caller holds
/// a transaction's claim; a decided entry never changes until it expires.
/// No lock is held while a claim's holder writes.
#[derive(Debug)]
pub struct Decisions {
    map: Mutex<HashMap<String, TxState>>,
    retention: Duration,
}

impl Decisions {
    /// Decisions are remembered for `retention` (long enough for the index
    /// to have the committed message and for the check to meet every copy
    /// put back before the decision).
    pub fn new(retention: Duration) -> Self {
        Decisions {
            map: Mutex::new(HashMap::new()),
            retention,
        }
    }

    /// The decision about `txid`, or the right to make it. Waits while
    /// another caller is making it.
    pub async fn claim(&self, txid: &str) -> Claim<'_> {
        loop {
            let notify = {
                let mut m = self.map.lock();
                match m.get(txid) {
                    None => {
                        m.insert(txid.to_string(), TxState::InFlight(Arc::new(Notify::new())));
                        return Claim::Mine(ClaimGuard {
                            decisions: self,
                            txid: txid.to_string(),
                            done: false,
                        });
                    }
                    Some(TxState::Decided { decision, .. }) => return Claim::Decided(*decision),
                    Some(TxState::InFlight(n)) => Arc::clone(n),
                }
            };
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            // The holder may have finished between the lookup and enable().
            let still = matches!(self.map.lock().get(txid), Some(TxState::InFlight(n)) if Arc::ptr_eq(n, &notify));
            if still {
                notified.await;
            }
        }
    }

    /// The decision about `txid` if one is known now (in-flight ones are not).
    pub fn get(&self, txid: &str) -> Option<Decision> {
        match self.map.lock().get(txid) {
            Some(TxState::Decided { decision, .. }) => Some(*decision),
            _ => None,
        }
    }

    /// Forgets decisions older than the retention.
    pub fn prune(&self) {
        let now = Instant::now();
        self.map.lock().retain(|_, s| match s {
            TxState::Decided { at, .. } => now.duration_since(*at) < self.retention,
            TxState::InFlight(_) => true,
        });
    }

    /// Forgets every decision (this broker stopped and started taking
    /// writes: what it decided before may not be in the log that counts).
    pub fn clear_decided(&self) {
        self.map
            .lock()
            .retain(|_, s| matches!(s, TxState::InFlight(_)));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn finish(&self, txid: &str, decision: Option<Decision>) {
        let old = {
            let mut m = self.map.lock();
            match decision {
                Some(d) => m.insert(
                    txid.to_string(),
                    TxState::Decided {
                        decision: d,
                        at: Instant::now(),
                    },
                ),
                None => m.remove(txid),
            }
        };
        if let Some(TxState::InFlight(n)) = old {
            n.notify_waiters();
        }
    }
}

/// The right to decide one transaction. Dropping it without
/// [`ClaimGuard::decided`] gives the right up (the next caller tries).
#[derive(Debug)]
pub struct ClaimGuard<'a> {
    decisions: &'a Decisions,
    txid: String,
    done: bool,
}

impl ClaimGuard<'_> {
    /// Records the decision the holder applied.
    pub fn decided(mut self, decision: Decision) {
        self.done = true;
        self.decisions.finish(&self.txid, Some(decision));
    }
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.decisions.finish(&self.txid, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_decision_wins_and_waiters_see_it() {
        let d = Arc::new(Decisions::new(Duration::from_secs(60)));
        let Claim::Mine(guard) = d.claim("T1").await else {
            panic!("first claim is mine");
        };
        let d2 = Arc::clone(&d);
        let waiter = tokio::spawn(async move {
            match d2.claim("T1").await {
                Claim::Decided(x) => x,
                Claim::Mine(_) => panic!("the transaction was decided"),
            }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "waits for the holder");
        guard.decided(Decision::Commit);
        assert_eq!(waiter.await.unwrap(), Decision::Commit);
        assert_eq!(d.get("T1"), Some(Decision::Commit));
    }

    #[tokio::test]
    async fn a_dropped_claim_lets_the_next_caller_decide() {
        let d = Decisions::new(Duration::from_secs(60));
        match d.claim("T2").await {
            Claim::Mine(g) => drop(g),
            Claim::Decided(_) => panic!("nothing decided yet"),
        }
        assert_eq!(d.get("T2"), None);
        match d.claim("T2").await {
            Claim::Mine(g) => g.decided(Decision::Rollback),
            Claim::Decided(_) => panic!("the dropped claim decided nothing"),
        }
        assert!(matches!(
            d.claim("T2").await,
            Claim::Decided(Decision::Rollback)
        ));
    }

    #[tokio::test]
    async fn old_decisions_expire() {
        let d = Decisions::new(Duration::from_millis(0));
        if let Claim::Mine(g) = d.claim("T3").await {
            g.decided(Decision::Commit);
        }
        d.prune();
        assert!(d.is_empty());
        let keep = Decisions::new(Duration::from_secs(60));
        if let Claim::Mine(g) = keep.claim("T4").await {
            g.decided(Decision::Commit);
        }
        keep.prune();
        assert_eq!(keep.len(), 1);
        keep.clear_decided();
        assert!(keep.is_empty());
    }
}
