//! The timing wheel: one slot per precision unit over the maximum delay
//! (plus a margin), each pointing at the TimerLog position of its newest
//! entry. The entries of a slot form a chain through their `prev` links.
//!
//! The wheel is a fixed array held in memory and rebuilt at start from the
//! TimerLog (`recover.rs`), so its size depends on the configuration, never
//! on how many timers wait. Slot *i* holds the times `t` with
//! `(t / precision) mod slots == i`; a slot also records which time it holds,
//! so a slot reused after the wheel turned is told apart from a stale one.

/// One slot. `time_ms == -1`: empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    time_ms: i64,
    newest: i64,
    count: u32,
}

const EMPTY: Slot = Slot {
    time_ms: -1,
    newest: -1,
    count: 0,
};

/// Why an entry cannot be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaceError {
    /// The time is not a multiple of the precision.
    Unaligned,
    /// The slot holds another, still pending, time: the wheel would wrap
    /// onto it (the reader is too far behind).
    Occupied { holds: i64 },
}

/// See the module documentation. Invariant: `pending` is the sum of the
/// slots' counts.
#[derive(Debug)]
pub struct TimingWheel {
    precision_ms: i64,
    slots: Vec<Slot>,
    pending: u64,
}

impl TimingWheel {
    /// A wheel of `slot_count` slots of `precision_ms` each.
    pub fn new(precision_ms: i64, slot_count: usize) -> TimingWheel {
        assert!(precision_ms > 0 && slot_count > 0, "a wheel needs slots");
        TimingWheel {
            precision_ms,
            slots: vec![EMPTY; slot_count],
            pending: 0,
        }
    }

    pub fn precision_ms(&self) -> i64 {
        self.precision_ms
    }

    /// How far ahead of the oldest pending slot the wheel reaches.
    pub fn span_ms(&self) -> i64 {
        self.precision_ms * self.slots.len() as i64
    }

    /// Timers waiting in the wheel.
    pub fn pending(&self) -> u64 {
        self.pending
    }

    fn index(&self, time_ms: i64) -> usize {
        (time_ms.div_euclid(self.precision_ms)).rem_euclid(self.slots.len() as i64) as usize
    }

    /// The newest entry of `time_ms`'s slot (−1 when none) and how many it holds.
    pub fn peek(&self, time_ms: i64) -> (i64, u32) {
        let s = self.slots[self.index(time_ms)];
        if s.time_ms == time_ms {
            (s.newest, s.count)
        } else {
            (-1, 0)
        }
    }

    /// What the `prev` link of a new entry for `time_ms` must be, or why
    /// it cannot go there.
    pub fn prev_for(&self, time_ms: i64) -> Result<i64, PlaceError> {
        if time_ms % self.precision_ms != 0 {
            return Err(PlaceError::Unaligned);
        }
        let s = self.slots[self.index(time_ms)];
        match s.time_ms {
            -1 => Ok(-1),
            t if t == time_ms => Ok(s.newest),
            t => Err(PlaceError::Occupied { holds: t }),
        }
    }

    /// Makes `pos` the newest entry of `time_ms`'s slot. The caller got
    /// the entry's `prev` from [`TimingWheel::prev_for`] just before.
    pub fn place(&mut self, time_ms: i64, pos: i64) -> Result<(), PlaceError> {
        self.prev_for(time_ms)?;
        let i = self.index(time_ms);
        let s = &mut self.slots[i];
        debug_assert!(s.newest < pos, "entries are placed in log order");
        s.time_ms = time_ms;
        s.newest = pos;
        s.count += 1;
        self.pending += 1;
        Ok(())
    }

    /// Empties `time_ms`'s slot (delivered); returns how many it held.
    pub fn clear(&mut self, time_ms: i64) -> u32 {
        let i = self.index(time_ms);
        if self.slots[i].time_ms != time_ms {
            return 0;
        }
        let n = self.slots[i].count;
        self.slots[i] = EMPTY;
        self.pending -= n as u64;
        n
    }

    /// The first slot time in `[from_ms, until_ms)` that holds timers.
    /// Scans at most one turn of the wheel.
    pub fn next_pending(&self, from_ms: i64, until_ms: i64) -> Option<i64> {
        if self.pending == 0 {
            return None;
        }
        let mut t = from_ms;
        let end = until_ms.min(from_ms + self.span_ms());
        while t < end {
            let s = self.slots[self.index(t)];
            if s.time_ms == t && s.count > 0 {
                return Some(t);
            }
            t += self.precision_ms;
        }
        None
    }

    /// Timers in the slots `[from_ms, until_ms)`.
    pub fn count_between(&self, from_ms: i64, until_ms: i64) -> u64 {
        let mut n = 0;
        let mut t = from_ms;
        let end = until_ms.min(from_ms + self.span_ms());
        while t < end {
            let s = self.slots[self.index(t)];
            if s.time_ms == t {
                n += s.count as u64;
            }
            t += self.precision_ms;
        }
        n
    }

    /// Memory the slot array takes, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_chain_and_clear() {
        let mut w = TimingWheel::new(1000, 10);
        assert_eq!(w.prev_for(5000), Ok(-1));
        w.place(5000, 0).unwrap();
        assert_eq!(w.prev_for(5000), Ok(0));
        w.place(5000, 48).unwrap();
        w.place(7000, 96).unwrap();
        assert_eq!(w.peek(5000), (48, 2));
        assert_eq!(w.pending(), 3);
        assert_eq!(w.next_pending(0, 100_000), Some(5000));
        assert_eq!(w.next_pending(6000, 100_000), Some(7000));
        assert_eq!(w.count_between(0, 6000), 2);
        assert_eq!(w.clear(5000), 2);
        assert_eq!(w.pending(), 1);
        assert_eq!(w.peek(5000), (-1, 0));
    }

    #[test]
    fn a_wrapped_slot_is_refused_while_pending() {
        let mut w = TimingWheel::new(1000, 10);
        w.place(3000, 0).unwrap();
        // 13 s lands on the same slot as 3 s.
        assert_eq!(
            w.prev_for(13_000),
            Err(PlaceError::Occupied { holds: 3000 })
        );
        assert_eq!(w.prev_for(13_500), Err(PlaceError::Unaligned));
        w.clear(3000);
        assert_eq!(w.prev_for(13_000), Ok(-1));
        w.place(13_000, 48).unwrap();
        assert_eq!(w.peek(3000), (-1, 0));
        assert_eq!(w.peek(13_000), (48, 1));
    }
}
