//! One TimerLog entry (docs/storage-format.md#timerlog): a timer message
//! placed in a wheel slot, 48 bytes, checked on every read.
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 0 | 4 | magic `BTL1` (0x42544C31) |
//! | 4 | 4 | size of the timer message's record |
//! | 8 | 8 | slot time (ms, a multiple of the precision) |
//! | 16 | 8 | CommitLog offset of the timer message |
//! | 24 | 8 | its offset in the timer topic's queue 0 |
//! | 32 | 8 | TimerLog position of the previous entry of the same slot, −1 for none |
//! | 40 | 4 | reserved, 0 |
//! | 44 | 4 | CRC32 of bytes 0..44 |

/// Bytes per entry.
pub const ENTRY_SIZE: usize = 48;

const MAGIC: u32 = 0x4254_4C31;

/// A decoded entry. Invariant (kept by [`TimerEntry::decode`]): size > 0,
/// offsets ≥ 0, `prev` ≥ −1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerEntry {
    /// The wheel slot the timer waits in: its delivery time rounded to the
    /// precision, or a later slot when it arrived after that one was read.
    pub slot_ms: i64,
    pub phys: i64,
    pub size: i32,
    pub queue_offset: i64,
    pub prev: i64,
}

impl TimerEntry {
    pub fn encode(&self, out: &mut [u8]) {
        assert_eq!(
            out.len(),
            ENTRY_SIZE,
            "a TimerLog entry is {ENTRY_SIZE} bytes"
        );
        out[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        out[4..8].copy_from_slice(&self.size.to_be_bytes());
        out[8..16].copy_from_slice(&self.slot_ms.to_be_bytes());
        out[16..24].copy_from_slice(&self.phys.to_be_bytes());
        out[24..32].copy_from_slice(&self.queue_offset.to_be_bytes());
        out[32..40].copy_from_slice(&self.prev.to_be_bytes());
        out[40..44].copy_from_slice(&0u32.to_be_bytes());
        let crc = crc32fast::hash(&out[..44]);
        out[44..48].copy_from_slice(&crc.to_be_bytes());
    }

    pub fn to_bytes(&self) -> [u8; ENTRY_SIZE] {
        let mut b = [0u8; ENTRY_SIZE];
        self.encode(&mut b);
        b
    }

    /// Decodes 48 bytes: `Ok(None)` when they are all zero (the end of the
    /// written data), an error saying what is wrong otherwise.
    pub fn decode(b: &[u8]) -> Result<Option<TimerEntry>, String> {
        if b.len() != ENTRY_SIZE {
            return Err(format!("entry is {} bytes, expected {ENTRY_SIZE}", b.len()));
        }
        if b.iter().all(|x| *x == 0) {
            return Ok(None);
        }
        let u32_at = |a: usize| u32::from_be_bytes([b[a], b[a + 1], b[a + 2], b[a + 3]]);
        let i64_at = |a: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[a..a + 8]);
            i64::from_be_bytes(x)
        };
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(format!("bad magic {magic:#010x}"));
        }
        let stored = u32_at(44);
        let computed = crc32fast::hash(&b[..44]);
        if stored != computed {
            return Err(format!(
                "CRC {stored:#010x} does not match {computed:#010x}"
            ));
        }
        let e = TimerEntry {
            size: u32_at(4) as i32,
            slot_ms: i64_at(8),
            phys: i64_at(16),
            queue_offset: i64_at(24),
            prev: i64_at(32),
        };
        if e.size <= 0 || e.phys < 0 || e.queue_offset < 0 || e.prev < -1 || e.slot_ms < 0 {
            return Err(format!("field out of range in {e:?}"));
        }
        Ok(Some(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> TimerEntry {
        TimerEntry {
            slot_ms: 1_700_000_001_000,
            phys: 4096,
            size: 300,
            queue_offset: 7,
            prev: -1,
        }
    }

    #[test]
    fn zeros_are_the_end_and_damage_is_named() {
        assert_eq!(TimerEntry::decode(&[0u8; ENTRY_SIZE]), Ok(None));
        let mut b = sample().to_bytes();
        b[20] ^= 1;
        let e = TimerEntry::decode(&b).unwrap_err();
        assert!(e.contains("CRC"), "{e}");
        let mut b = sample().to_bytes();
        b[0] = 0;
        assert!(TimerEntry::decode(&b).unwrap_err().contains("magic"));
        let bad = TimerEntry {
            size: 0,
            ..sample()
        };
        assert!(TimerEntry::decode(&bad.to_bytes()).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(slot in 0i64..i64::MAX, phys in 0i64..i64::MAX, size in 1i32..i32::MAX,
                      q in 0i64..i64::MAX, prev in -1i64..i64::MAX) {
            let e = TimerEntry { slot_ms: slot, phys, size, queue_offset: q, prev };
            prop_assert_eq!(TimerEntry::decode(&e.to_bytes()).unwrap(), Some(e));
        }

        #[test]
        fn any_bytes_decode_without_panic(b in proptest::collection::vec(any::<u8>(), ENTRY_SIZE)) {
            let _ = TimerEntry::decode(&b);
        }
    }
}
