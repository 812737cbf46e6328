//! How a [`crate::mapped_file::MappedFile`] uses the disk and the kernel:
//! block reservation steps, descriptor keeping, read-ahead advice
//! ([`MappedFilePolicy`]), and the SEEK_DATA walk that finds written ranges
//! without touching pages.

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
}

impl MappedFilePolicy {
    /// CommitLog, timer log: reserve the whole file when it is created.
    pub const WHOLE: MappedFilePolicy = MappedFilePolicy {
        reserve_step: usize::MAX,
        keep_fd: true,
        random_access: false,
    };
    /// ConsumeQueue files: one page reserved at a time, no descriptor kept,
    /// no read-ahead. Thousands of mostly empty queues cost one block and
    /// one mapping each, and nothing resident beyond the pages they use.
    pub const CONSUME_QUEUE: MappedFilePolicy = MappedFilePolicy {
        reserve_step: PAGE_SIZE,
        keep_fd: false,
        random_access: true,
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

/// Byte ranges of `[from, size)` of the file open as `fd` that hold data
/// (`SEEK_DATA`/`SEEK_HOLE`); the whole range when the file system cannot say.
pub(crate) fn seek_data_ranges(fd: std::os::unix::io::RawFd, from: usize, size: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = from as libc::off_t;
    while (at as usize) < size {
        // SAFETY: plain lseek on a descriptor we own.
        let data = unsafe { libc::lseek(fd, at, libc::SEEK_DATA) };
        if data < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
                break; // no more data
            }
            return vec![(from, size)];
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        let hole = if hole < 0 { size as libc::off_t } else { hole };
        let (s, e) = ((data as usize).max(from), (hole as usize).min(size));
        if s >= size {
            break;
        }
        if e > s {
            out.push((s, e));
        }
        at = hole;
    }
    out
}

