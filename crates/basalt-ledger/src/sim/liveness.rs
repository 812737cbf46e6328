//! Liveness after the heal: the cluster settles under one ready leader, every
//! append is answered, a probe append commits, and all logs agree.

use bytes::Bytes;

use super::Sim;
use crate::core::{LogRead, Role};

impl Sim {
    /// True once the healed cluster has a ready leader followed by everyone, every
    /// append has an answer, and a probe append committed.
    pub(super) fn settled(&mut self) -> Result<bool, String> {
        let leader = (0..self.nodes.len()).find(|i| {
            self.nodes[*i]
                .core
                .as_ref()
                .is_some_and(|c| c.role() == Role::Leader && c.leader_ready())
        });
        let Some(l) = leader else {
            return Ok(false);
        };
        let (term, committed, end) = {
            let c = self.nodes[l]
                .core
                .as_ref()
                .map(|c| (c.term(), c.committed_index(), c.end_index()));
            match c {
                Some(x) => x,
                None => return Ok(false),
            }
        };
        let all_follow = self.nodes.iter().enumerate().all(|(j, n)| {
            j == l
                || n.core.as_ref().is_some_and(|c| {
                    c.role() == Role::Follower
                        && c.term() == term
                        && c.committed_index() == committed
                        && c.end_index() == end
                })
        });
        let outstanding_other = self
            .outstanding
            .keys()
            .any(|k| self.probe.is_none_or(|(p, _)| p != *k));
        if !all_follow || committed != end || outstanding_other {
            return Ok(false);
        }
        if !self.leader_is_expected(l, term)? {
            return Ok(false);
        }
        match self.probe {
            None => {
                let client = self.next_client;
                self.next_client += 1;
                self.probe = Some((client, false));
                self.submit(l, client, vec![Bytes::from_static(b"probe")]);
                Ok(false)
            }
            Some((_, true)) => Ok(true),
            Some((p, false)) => {
                if !self.outstanding.contains_key(&p) {
                    // The probe failed (leadership moved): try again.
                    self.probe = None;
                }
                Ok(false)
            }
        }
    }

    pub(super) fn final_checks(&self) -> Result<(), String> {
        self.check_disks_final()?;
        let reference = &self.committed;
        for n in &self.nodes {
            let Some(c) = &n.core else {
                return Err(format!("{} is down at the end", n.id));
            };
            for idx in 0..=c.committed_index() {
                if idx < n.purged_below {
                    continue;
                }
                let e = n.log.entry(idx).ok().flatten();
                if e.as_ref() != reference.get(idx as usize) {
                    return Err(format!("{} differs from the committed log at {idx}", n.id));
                }
            }
        }
        for (idx, e) in &self.acked {
            if reference.get(*idx as usize) != Some(e) {
                return Err(format!(
                    "acknowledged entry {idx} missing from the final log"
                ));
            }
        }
        Ok(())
    }
}
