//! Timer messages' on-disk state (RocketMQ 5's timing wheel, our own
//! formats; docs/storage-format.md#timers).
//!
//! A timer message waits in the CommitLog under the timer topic
//! (`rmq_sys_wheel_timer`, queue 0) with its real topic and queue in
//! properties. The broker's enqueue task reads that queue and appends one
//! [`TimerEntry`] per message to the [`TimerLog`], linking it to the
//! previous entry of the same wheel slot; the [`TimingWheel`] points at
//! each slot's newest entry. The delivery task walks a slot's chain when the
//! slot is over and re-puts each message to its real topic.
//!
//! * [`entry`] — the 48-byte TimerLog entry;
//! * [`log`] — the TimerLog segments;
//! * [`wheel`] — the in-memory wheel (a fixed array, rebuilt at start);
//! * [`checkpoint`] — what is on disk and how far delivery got;
//! * [`recover`] — opening all of it after a stop or a crash.

pub mod checkpoint;
pub mod entry;
pub mod log;
pub mod recover;
pub mod wheel;

use std::path::PathBuf;

pub use checkpoint::TimerCheckpoint;
pub use entry::{ENTRY_SIZE, TimerEntry};
pub use log::{TimerLog, TimerLogScanStop};
pub use recover::{RecoveredTimers, TimerRecoveryReport, recover};
pub use wheel::{PlaceError, TimingWheel};

/// Most wheel slots a configuration may ask for (about 200 MiB of wheel).
pub const MAX_SLOTS: usize = 8 << 20;

/// How the timer state is laid out and sized.
#[derive(Debug, Clone)]
pub struct TimerConfig {
    /// The store root (`storePathRootDir`).
    pub root: PathBuf,
    /// `timerPrecisionMs`: the width of a slot.
    pub precision_ms: i64,
    /// `timerMaxDelaySec` in ms: the longest delay a send may ask for.
    pub max_delay_ms: i64,
    /// Bytes per TimerLog segment (`mappedFileSizeTimerLog`, rounded down
    /// to whole entries).
    pub segment_size: usize,
    /// The disk the TimerLog and its checkpoint live on (the real one, or
    /// the simulated disk of the power-loss tests).
    pub disk: basalt_disk::Disk,
}

impl TimerConfig {
    /// Slots beyond the maximum delay: how far the reader may fall behind
    /// the clock before new timers wait for it (one hour, at least 64).
    pub fn margin_slots(&self) -> usize {
        ((3_600_000 / self.precision_ms) as usize).max(64)
    }

    /// Slots in the wheel: the maximum delay plus the margin.
    pub fn slot_count(&self) -> usize {
        let p = self.precision_ms;
        ((self.max_delay_ms + p - 1) / p) as usize + self.margin_slots()
    }

    pub fn log_dir(&self) -> PathBuf {
        self.root.join("timerlog")
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.root.join("config").join("timercheck")
    }

    /// Checks the settings; the error names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=60_000).contains(&self.precision_ms) {
            return Err(format!(
                "timerPrecisionMs {} must be in 1..=60000",
                self.precision_ms
            ));
        }
        if self.max_delay_ms <= 0 {
            return Err("timerMaxDelaySec must be positive".into());
        }
        if self.slot_count() > MAX_SLOTS {
            return Err(format!(
                "timerMaxDelaySec / timerPrecisionMs needs {} wheel slots; at most {MAX_SLOTS}",
                self.slot_count()
            ));
        }
        if self.segment_size < ENTRY_SIZE * 1024 || !self.segment_size.is_multiple_of(ENTRY_SIZE) {
            return Err(format!(
                "mappedFileSizeTimerLog {} must be a multiple of {ENTRY_SIZE} and at least {}",
                self.segment_size,
                ENTRY_SIZE * 1024
            ));
        }
        Ok(())
    }
}

/// The wheel slot a delivery time goes to, as RocketMQ rounds it: a time on
/// a slot boundary to the slot before it, any other time to the slot it
/// falls in. A slot is delivered once it is over, so a timer is never
/// delivered before its time and at most one precision unit after.
pub fn slot_for_delivery(deliver_ms: i64, precision_ms: i64) -> i64 {
    if deliver_ms.rem_euclid(precision_ms) == 0 {
        deliver_ms - precision_ms
    } else {
        deliver_ms.div_euclid(precision_ms) * precision_ms
    }
}

/// When the slot starting at `slot_ms` is over and may be delivered.
pub fn slot_due_ms(slot_ms: i64, precision_ms: i64) -> i64 {
    slot_ms + precision_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_never_delivers_early() {
        assert_eq!(slot_for_delivery(12_000, 1000), 11_000);
        assert_eq!(slot_for_delivery(12_001, 1000), 12_000);
        assert_eq!(slot_for_delivery(12_999, 1000), 12_000);
        assert_eq!(slot_for_delivery(12_050, 100), 12_000);
        for d in 10_000..14_000 {
            for p in [1, 100, 200, 500, 1000] {
                let due = slot_due_ms(slot_for_delivery(d, p), p);
                assert!(due >= d && due < d + p, "d={d} p={p} due={due}");
            }
        }
    }

    #[test]
    fn default_wheel_size() {
        let c = TimerConfig {
            root: "/tmp".into(),
            precision_ms: 1000,
            max_delay_ms: 3 * 86_400_000,
            segment_size: ENTRY_SIZE << 21,
            disk: basalt_disk::Disk::Real,
        };
        c.validate().unwrap();
        assert_eq!(c.slot_count(), 259_200 + 3600);
        let fine = TimerConfig {
            precision_ms: 1,
            ..c.clone()
        };
        assert!(fine.validate().unwrap_err().contains("slots"));
    }
}
