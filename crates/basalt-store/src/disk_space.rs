//! How full the store's disk is, and what follows from it (RocketMQ's
//! `diskMaxUsedSpaceRatio`, `diskSpaceCleanForciblyRatio`,
//! `diskSpaceWarningLevelRatio`).
//!
//! The usage is sampled by the cleanup service about once a second and when
//! a CommitLog file is created — never per message — and kept in atomics, so
//! a put pays one atomic load to learn whether the disk counts as full.
//!
//! * above `diskMaxUsedSpaceRatio`: expired CommitLog files are deleted at
//!   any hour, not only at `deleteWhen`;
//! * above `diskSpaceCleanForciblyRatio` (with `cleanFileForciblyEnable`):
//!   the oldest CommitLog files are deleted whether expired or not, one at a
//!   time until usage drops below the ratio (never a file dispatch has not
//!   passed, never the newest);
//! * above `diskSpaceWarningLevelRatio`: the disk is full; puts are refused
//!   with SERVICE_NOT_AVAILABLE and a reason naming the disk, until a sample
//!   finds usage at or below the ratio again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::config::StoreConfig;

/// Where usage figures come from. The store uses [`StatvfsUsage`]; tests
/// inject a [`FixedUsage`] to play a full disk.
pub trait DiskUsageSource: Send + Sync + std::fmt::Debug {
    /// Percent (0..=100) of the file system holding `path` in use, if known.
    fn used_percent(&self, path: &Path) -> Option<u32>;
}

/// The real figure, from `statvfs` (as `df` counts it).
#[derive(Debug, Default, Clone, Copy)]
pub struct StatvfsUsage;

impl DiskUsageSource for StatvfsUsage {
    fn used_percent(&self, path: &Path) -> Option<u32> {
        crate::fs_util::disk_used_percent(path)
    }
}

/// A figure set by hand, for tests.
#[derive(Debug)]
pub struct FixedUsage(AtomicU32);

const UNKNOWN: u32 = u32::MAX;

impl FixedUsage {
    pub fn new(percent: u32) -> Arc<FixedUsage> {
        Arc::new(FixedUsage(AtomicU32::new(percent)))
    }

    pub fn set(&self, percent: u32) {
        self.0.store(percent, Ordering::Release);
    }
}

impl DiskUsageSource for FixedUsage {
    fn used_percent(&self, _path: &Path) -> Option<u32> {
        Some(self.0.load(Ordering::Acquire))
    }
}

/// The last usage sample of the store's disk and the thresholds it is held
/// against. Invariant: `full` is true exactly when the last known sample was
/// above the warning ratio.
#[derive(Debug)]
pub struct DiskSpaceMonitor {
    path: PathBuf,
    source: Arc<dyn DiskUsageSource>,
    max_used_ratio: u32,
    clean_forcibly_ratio: u32,
    warning_ratio: u32,
    /// Last sample in percent; `UNKNOWN` before the first or when unknown.
    used: AtomicU32,
    full: AtomicBool,
}

impl DiskSpaceMonitor {
    /// A monitor of the disk holding `config.root_dir`, sampled once now.
    pub fn new(config: &StoreConfig) -> DiskSpaceMonitor {
        let m = DiskSpaceMonitor {
            path: config.root_dir.clone(),
            source: Arc::clone(&config.disk_usage),
            max_used_ratio: config.disk_max_used_space_ratio,
            clean_forcibly_ratio: config.disk_space_clean_forcibly_ratio,
            warning_ratio: config.disk_space_warning_level_ratio,
            used: AtomicU32::new(UNKNOWN),
            full: AtomicBool::new(false),
        };
        m.sample();
        m
    }

    /// Reads the usage now, updates the cached figure and the full flag,
    /// and logs when the disk becomes full or stops being full. An unknown
    /// figure leaves the flag as it was.
    pub fn sample(&self) -> Option<u32> {
        let used = self.source.used_percent(&self.path);
        self.used.store(used.unwrap_or(UNKNOWN), Ordering::Release);
        let used = used?;
        let full = used > self.warning_ratio;
        let was = self.full.swap(full, Ordering::AcqRel);
        if full && !was {
            tracing::error!(
                disk = %self.path.display(),
                used_percent = used,
                diskSpaceWarningLevelRatio = self.warning_ratio,
                "disk full: puts are refused until usage falls to the warning ratio"
            );
        } else if was && !full {
            tracing::warn!(
                disk = %self.path.display(),
                used_percent = used,
                "disk no longer full: puts are accepted again"
            );
        }
        Some(used)
    }

    /// The last sampled usage in percent.
    pub fn used_percent(&self) -> Option<u32> {
        match self.used.load(Ordering::Acquire) {
            UNKNOWN => None,
            p => Some(p),
        }
    }

    /// Whether the disk counts as full (puts are refused).
    #[inline]
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// Why a put is refused, when the disk counts as full.
    pub fn refusal(&self) -> Option<String> {
        if !self.is_full() {
            return None;
        }
        let used = self
            .used_percent()
            .map(|p| format!("{p}%"))
            .unwrap_or_else(|| "?".into());
        Some(format!(
            "disk full: {} is {used} used, above diskSpaceWarningLevelRatio {}%; \
             messages are refused until space is freed",
            self.path.display(),
            self.warning_ratio
        ))
    }

    /// Usage is above `diskMaxUsedSpaceRatio`: expired files may go at any hour.
    pub fn over_max_used(&self) -> bool {
        self.used_percent().is_some_and(|p| p > self.max_used_ratio)
    }

    /// Usage is above `diskSpaceCleanForciblyRatio`, or the disk is full:
    /// the oldest files go whether expired or not.
    pub fn wants_forced_cleanup(&self) -> bool {
        self.is_full()
            || self
                .used_percent()
                .is_some_and(|p| p > self.clean_forcibly_ratio)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn monitor(usage: &Arc<FixedUsage>) -> DiskSpaceMonitor {
        let mut c = StoreConfig::for_tests("/nonexistent");
        c.disk_usage = Arc::clone(usage) as Arc<dyn DiskUsageSource>;
        DiskSpaceMonitor::new(&c)
    }

    #[test]
    fn thresholds_follow_the_samples() {
        let usage = FixedUsage::new(50);
        let m = monitor(&usage);
        assert_eq!(m.used_percent(), Some(50));
        assert!(!m.is_full() && !m.over_max_used() && !m.wants_forced_cleanup());
        usage.set(80);
        // Nothing changes until the next sample.
        assert!(!m.over_max_used());
        m.sample();
        assert!(m.over_max_used() && !m.wants_forced_cleanup() && !m.is_full());
        usage.set(86);
        m.sample();
        assert!(m.wants_forced_cleanup() && !m.is_full());
        assert!(m.refusal().is_none());
        usage.set(91);
        m.sample();
        assert!(m.is_full());
        let why = m.refusal().unwrap();
        assert!(why.contains("/nonexistent") && why.contains("91%"), "{why}");
        usage.set(90);
        m.sample();
        assert!(!m.is_full() && m.refusal().is_none());
    }

    #[test]
    fn statvfs_gives_a_figure_for_a_real_directory() {
        let dir = tempfile::tempdir().unwrap();
        let p = StatvfsUsage.used_percent(dir.path()).unwrap();
        assert!(p <= 100);
    }
}
