//! Small helpers without a better home.

use std::cell::RefCell;

use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

/// A random u32 from a per-thread generator seeded by the OS (start
/// positions and tie-breaks, nothing security-related).
pub(crate) fn random_u32() -> u32 {
    thread_local! {
        static RNG: RefCell<SmallRng> = RefCell::new(SmallRng::from_os_rng());
    }
    RNG.with(|r| r.borrow_mut().next_u32())
}
