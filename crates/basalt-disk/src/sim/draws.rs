//! Fault decisions that do not depend on the order in which threads call
//! the disk, and the simulated clock.
//!
//! With [`FaultDraws::Shared`] every random fault is the next draw of the
//! disk's one RNG, so which operation gets which draw depends on the order
//! of the calls: a single-threaded caller replays exactly, two threads
//! syncing at once (a store's group commit and its dispatch) do not. With
//! [`FaultDraws::PerFile`] whether the `n`-th sync of a path fails is a hash
//! of (seed, path, `n`): the same for a seed whatever the interleaving, as
//! long as each path's own sequence of syncs is.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How the simulated disk decides its failed syncs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FaultDraws {
    /// Each sync draws from the disk's one RNG, in call order. Exact replay
    /// needs a caller whose calls come in one order (one thread).
    #[default]
    Shared,
    /// The `n`-th sync of a path fails when a hash of (seed, path, `n`)
    /// says so. Block reservations, read flips and power losses still draw
    /// from the RNG: callers keep those on one thread.
    PerFile,
}

/// Per-path operation counts and the seed the per-file decisions hash.
/// Invariant: a path's count only grows, by one per decision taken.
#[derive(Debug, Default)]
pub(crate) struct PerFileDraws {
    seed: u64,
    syncs: HashMap<PathBuf, u64>,
}

impl PerFileDraws {
    pub(crate) fn new(seed: u64) -> Self {
        PerFileDraws {
            seed,
            syncs: HashMap::new(),
        }
    }

    /// Whether this sync of `path` (its next one) fails, at one in `n`.
    /// Counts the sync even when `n` is 0, so that switching faults on and
    /// off (the simulator does around recovery) does not shift later ones.
    pub(crate) fn sync_fails(&mut self, path: &Path, n: u32) -> bool {
        let count = self.syncs.entry(path.to_path_buf()).or_insert(0);
        let nth = *count;
        *count += 1;
        n != 0 && decide(self.seed, b"sync", path, nth).is_multiple_of(u64::from(n))
    }
}

/// A stable 64-bit hash of (seed, kind, path, n): FNV-1a over the bytes,
/// then the splitmix64 finaliser. Stable across processes and Rust versions
/// (unlike `std`'s hashers), so a seed keeps its meaning.
fn decide(seed: u64, kind: &[u8], path: &Path, nth: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(&seed.to_le_bytes());
    eat(kind);
    eat(path.as_os_str().as_encoded_bytes());
    eat(&[0xff]);
    eat(&nth.to_le_bytes());
    splitmix(h)
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Where the simulated clock starts: 2026-01-01T00:00:00Z, in ms.
pub(crate) const CLOCK_START_MS: i64 = 1_767_225_600_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_depends_on_path_and_count_only() {
        let p = Path::new("/s/log/a");
        let q = Path::new("/s/log/b");
        let mut one = PerFileDraws::new(9);
        let mut two = PerFileDraws::new(9);
        // Other paths' syncs in between change nothing for `p`.
        let a: Vec<bool> = (0..200).map(|_| one.sync_fails(p, 3)).collect();
        let b: Vec<bool> = (0..200)
            .map(|_| {
                two.sync_fails(q, 3);
                two.sync_fails(p, 3)
            })
            .collect();
        assert_eq!(a, b);
        let failed = a.iter().filter(|f| **f).count();
        assert!((30..110).contains(&failed), "{failed} of 200 at one in 3");
        assert!(!(0..50).any(|_| one.sync_fails(p, 0)));
    }

    #[test]
    fn another_seed_decides_otherwise() {
        let p = Path::new("/s/log/a");
        let mut one = PerFileDraws::new(1);
        let mut two = PerFileDraws::new(2);
        let a: Vec<bool> = (0..64).map(|_| one.sync_fails(p, 2)).collect();
        let b: Vec<bool> = (0..64).map(|_| two.sync_fails(p, 2)).collect();
        assert_ne!(a, b);
    }
}
