//! How a [`crate::mapped_file::MappedFile`] uses the disk and the kernel:
//! block reservation steps, descriptor keeping, read-ahead advice
//! ([`MappedFilePolicy`]).

use crate::mapped_file::PAGE_SIZE;

/// How a [`MappedFile`] reserves its blocks and whether it keeps its file
/// descriptor. Invariant: `reserve_step` and `reserve_step_max` are positive
/// multiples of [`PAGE_SIZE`] with `reserve_step <= reserve_step_max`, or
/// `reserve_step` is `usize::MAX` (the whole file at once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedFilePolicy {
    /// Bytes reserved by the first step ahead of the writer.
    pub reserve_step: usize,
    /// Later steps double what is reserved, up to this many bytes per step:
    /// a queue that is written to reserves about once per doubling and then
    /// once per `reserve_step_max`, not once per page, while a queue holding
    /// one unit still costs one page. At most about half of a file's
    /// reserved blocks are ahead of its data (or `reserve_step_max`).
    pub reserve_step_max: usize,
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
        reserve_step_max: usize::MAX,
        keep_fd: true,
        random_access: false,
        sync_dir_on_create: true,
    };
    /// ConsumeQueue files: one page reserved first, then doubling steps up
    /// to 64 pages; no descriptor kept, no read-ahead. Thousands of mostly
    /// empty queues cost one block and one mapping each, and nothing
    /// resident beyond the pages they use. (One page per step cost the
    /// dispatch thread an open, an `fallocate` and a close every 204 units
    /// of each queue: about 0.4 µs per message in `bench produce`.)
    pub const CONSUME_QUEUE: MappedFilePolicy = MappedFilePolicy {
        reserve_step: PAGE_SIZE,
        reserve_step_max: 64 * PAGE_SIZE,
        keep_fd: false,
        random_access: true,
        sync_dir_on_create: false,
    };

    /// The reservation that covers `[0, end)` in a file of `size` bytes of
    /// which `[0, reserved)` is reserved already.
    pub(crate) fn reserve_target(&self, end: usize, size: usize, reserved: usize) -> usize {
        if self.reserve_step == usize::MAX {
            return size;
        }
        debug_assert!(self.reserve_step <= self.reserve_step_max);
        let step = reserved.clamp(self.reserve_step, self.reserve_step_max);
        let wanted = end.max(reserved.saturating_add(step));
        wanted
            .div_ceil(self.reserve_step)
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
        // The next step doubles what was reserved.
        mf.ensure_reserved_until(3 * PAGE_SIZE).unwrap();
        assert_eq!(mf.reserved_to(), 4 * PAGE_SIZE);
        assert!(blocks() <= 4 * PAGE_SIZE as u64);
    }

    #[test]
    fn reserve_targets() {
        let whole = MappedFilePolicy::WHOLE;
        assert_eq!(whole.reserve_target(1, 10_000, 0), 10_000);
        let q = MappedFilePolicy::CONSUME_QUEUE;
        let size = 6_000_000;
        assert_eq!(q.reserve_target(1, size, 0), PAGE_SIZE);
        assert_eq!(q.reserve_target(PAGE_SIZE, size, 0), PAGE_SIZE);
        // Steps double what is reserved...
        assert_eq!(
            q.reserve_target(PAGE_SIZE + 1, size, PAGE_SIZE),
            2 * PAGE_SIZE
        );
        assert_eq!(
            q.reserve_target(2 * PAGE_SIZE + 1, size, 2 * PAGE_SIZE),
            4 * PAGE_SIZE
        );
        // ...up to 64 pages a step.
        let big = 1000 * PAGE_SIZE;
        assert_eq!(q.reserve_target(big + 1, size, big), big + 64 * PAGE_SIZE);
        // A write past the step still gets all it needs (a file found on
        // disk starts from nothing reserved).
        assert_eq!(q.reserve_target(10 * PAGE_SIZE, size, 0), 10 * PAGE_SIZE);
        // Never past the end of a file whose size is not a page multiple.
        assert_eq!(q.reserve_target(5_999_990, size, 5_000_000), size);
        // Reserving page after page as units are appended takes about
        // log2(64) + pages / 64 steps, not one per page.
        let (mut reserved, mut steps) = (0, 0);
        for end in (20..size).step_by(20) {
            if end > reserved {
                reserved = q.reserve_target(end, size, reserved);
                steps += 1;
            }
            assert!(reserved >= end && reserved <= size);
            assert!(reserved - end <= (end + PAGE_SIZE).min(64 * PAGE_SIZE) + PAGE_SIZE);
        }
        assert!(steps < 35, "{steps} reservations for a full queue file");
    }
}
