//! How a [`crate::mapped_file::MappedFile`] uses the disk and the kernel:
//! block reservation steps, descriptor keeping, read-ahead advice
//! ([`MappedFilePolicy`]).

use crate::mapped_file::PAGE_SIZE;

/// How a [`MappedFile`] reserves its blocks and whether it keeps its file
/// descriptor. Invariant: `reserve_step` is a positive multiple of
/// [`PAGE_SIZE`] or `usize::MAX` (the whole file at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedFilePolicy {
    /// Bytes reserved per step ahead of the writer.
    pub reserve_step: usize,
    /// Keep the descriptor open (the CommitLog commits and fsyncs through
    /// it). Without it the file costs no descriptor while mapped: fsyncs go
    /// through `msync(MS_SYNC)` on the mapping, and the rare calls that need
    /// a descriptor (reserving, SEEK_DATA) open the file for their duration.
    pub keep_fd: bool,
    /// Advise the kernel that reads are random (`MADV_RANDOM`): a fault reads
    /// its own page and no read-ahead, so touching the first unit of a queue
    /// file never pulls its unused (zero) pages into the page cache.
    pub random_access: bool,
    /// fsync the directory (and any directory made for it) when a file is
    /// created, before the file is used. Without it the owner must call
    /// [`crate::mapped_file_queue::MappedFileQueue::sync_new_dirs`] before
    /// it relies on the file surviving a crash (the ConsumeQueue flush does,
    /// before the checkpoint moves): a broker creating thousands of queues
    /// then pays a few directory fsyncs per flush round, not three per queue
    /// on the dispatch thread.
    pub sync_dir_on_create: bool,
}

impl MappedFilePolicy {
    /// CommitLog, timer log: reserve the whole file when it is created.
    pub const WHOLE: MappedFilePolicy = MappedFilePolicy {
        reserve_step: usize::MAX,
        keep_fd: true,
        random_access: false,
        sync_dir_on_create: true,
    };
    /// ConsumeQueue files: one page reserved at a time, no descriptor kept,
    /// no read-ahead. Thousands of mostly empty queues cost one block and
    /// one mapping each, and nothing resident beyond the pages they use.
    pub const CONSUME_QUEUE: MappedFilePolicy = MappedFilePolicy {
        reserve_step: PAGE_SIZE,
        keep_fd: false,
        random_access: true,
        sync_dir_on_create: false,
    };

    /// The reservation that covers `[0, end)` in a file of `size` bytes.
    pub(crate) fn reserve_target(&self, end: usize, size: usize) -> usize {
        if self.reserve_step == usize::MAX {
            return size;
        }
        end.div_ceil(self.reserve_step)
            .saturating_mul(self.reserve_step)
            .min(size)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;
    use crate::mapped_file::MappedFile;

    #[test]
    fn queue_policy_reserves_page_by_page_and_flushes_without_a_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let size = 64 * PAGE_SIZE;
        let p = MappedFilePolicy::CONSUME_QUEUE;
        let mf = MappedFile::create_with(dir.path(), 0, size, None, p).unwrap();
        assert_eq!(mf.reserved_to(), PAGE_SIZE);
        let blocks = || std::fs::metadata(mf.path()).unwrap().blocks() * 512;
        assert!(blocks() <= PAGE_SIZE as u64, "{} bytes allocated", blocks());
        // A write that crosses into the next page reserves that page first.
        mf.ensure_reserved_until(PAGE_SIZE + 20).unwrap();
        assert_eq!(mf.reserved_to(), 2 * PAGE_SIZE);
        mf.append(&[9u8; PAGE_SIZE + 20]).unwrap();
        assert_eq!(mf.flush(0).unwrap(), PAGE_SIZE + 20);
        // The bytes reached the file (read through another descriptor).
        let on_disk = std::fs::read(mf.path()).unwrap();
        assert!(on_disk[..PAGE_SIZE + 20].iter().all(|b| *b == 9));
        assert!(blocks() <= 2 * PAGE_SIZE as u64);
        // Reserving on a full disk fails cleanly and reserves nothing.
        crate::faults::fill_disk_under(dir.path());
        let err = mf.ensure_reserved_until(3 * PAGE_SIZE).unwrap_err();
        crate::faults::free_disk_under(dir.path());
        assert!(err.is_no_space(), "{err}");
        assert_eq!(mf.reserved_to(), 2 * PAGE_SIZE);
        mf.ensure_reserved_until(3 * PAGE_SIZE).unwrap();
        assert_eq!(mf.reserved_to(), 3 * PAGE_SIZE);
    }

    #[test]
    fn reserve_targets() {
        let whole = MappedFilePolicy::WHOLE;
        assert_eq!(whole.reserve_target(1, 10_000), 10_000);
        let q = MappedFilePolicy::CONSUME_QUEUE;
        assert_eq!(q.reserve_target(1, 6_000_000), PAGE_SIZE);
        assert_eq!(q.reserve_target(PAGE_SIZE, 6_000_000), PAGE_SIZE);
        assert_eq!(q.reserve_target(PAGE_SIZE + 1, 6_000_000), 2 * PAGE_SIZE);
        // Never past the end of a file whose size is not a page multiple.
        assert_eq!(q.reserve_target(5_999_990, 6_000_000), 6_000_000);
    }
}
