//! The transient store pool: a fixed number of heap write buffers, one file in
//! size, that CommitLog files borrow while they are being written
//! (`transientStorePoolEnable`). Appends then cost a memcpy into ordinary
//! memory; a commit service moves the bytes into the file in large writes.

use parking_lot::Mutex;

use crate::mapped_file::WriteBuffer;

/// Owns the idle write buffers. Invariant: every buffer is exactly
/// `buffer_size` bytes, and a buffer is either here or owned by one file.
#[derive(Debug)]
pub struct TransientStorePool {
    buffer_size: usize,
    idle: Mutex<Vec<WriteBuffer>>,
}

impl TransientStorePool {
    /// Allocates `count` zeroed buffers of `buffer_size` bytes.
    pub fn new(count: usize, buffer_size: usize) -> Self {
        let idle = (0..count)
            .map(|_| vec![0u8; buffer_size].into_boxed_slice())
            .collect();
        TransientStorePool {
            buffer_size,
            idle: Mutex::new(idle),
        }
    }

    /// Lends a buffer, or `None` if all are in use.
    pub fn borrow(&self) -> Option<WriteBuffer> {
        self.idle.lock().pop()
    }

    /// Takes a buffer back.
    pub fn give_back(&self, buf: WriteBuffer) {
        debug_assert_eq!(buf.len(), self.buffer_size);
        self.idle.lock().push(buf);
    }

    /// Buffers ready to lend.
    pub fn available(&self) -> usize {
        self.idle.lock().len()
    }
}
