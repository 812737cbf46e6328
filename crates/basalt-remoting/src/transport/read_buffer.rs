//! [`ReadBuffer`]: the bytes a connection has read but not yet decoded.
//!
//! An idle connection holds no buffer at all: the reader waits for the
//! socket to become readable first and only then takes memory to read into.
//! The size of each read adapts to the traffic (as Netty's adaptive receive
//! buffer does): reads that fill the space offered double the next offer,
//! reads that come back small halve it. A frame longer than the offer is not
//! reserved in full when its length prefix arrives: the buffer at most
//! doubles per read, so a peer that announces 16 MiB and sends ten bytes
//! costs one read's worth, not 16 MiB.

use std::io;

use bytes::BytesMut;

/// Smallest read offered.
pub(crate) const MIN_READ: usize = 512;
/// The first read of a connection (and of every burst after a quiet spell).
pub(crate) const INITIAL_READ: usize = 4 * 1024;
/// Largest read offered, unless a frame in progress needs more.
pub(crate) const MAX_READ: usize = 64 * 1024;
/// Consecutive short reads (under half the offer) before the offer halves.
const SHORT_READS_TO_SHRINK: u32 = 2;

/// Bytes read from a connection and not yet decoded, plus the size of the
/// next read.
///
/// Invariant: `next_read` stays within `MIN_READ..=MAX_READ`; the buffer is
/// unallocated whenever it holds no bytes and [`ReadBuffer::release_if_empty`]
/// was called.
#[derive(Debug)]
pub(crate) struct ReadBuffer {
    buf: BytesMut,
    next_read: usize,
    short_reads: u32,
}

impl Default for ReadBuffer {
    fn default() -> Self {
        Self {
            buf: BytesMut::new(),
            next_read: INITIAL_READ,
            short_reads: 0,
        }
    }
}

impl ReadBuffer {
    /// The undecoded bytes; the decoder splits complete frames off the front.
    pub(crate) fn bytes(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// Bytes currently allocated.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The size the next read is offered.
    #[cfg(test)]
    fn next_read(&self) -> usize {
        self.next_read
    }

    /// Drops the allocation when no partial frame is held, so a connection
    /// that goes quiet keeps nothing. Returns whether the buffer is empty.
    pub(crate) fn release_if_empty(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        if self.buf.capacity() > 0 {
            self.buf = BytesMut::new();
        }
        true
    }

    /// Makes room for one read and runs `read` on the buffer (`read` appends
    /// what it read, as `try_read_buf` does). Adapts the next read's size to
    /// how much came in.
    pub(crate) fn read_with(
        &mut self,
        read: impl FnOnce(&mut BytesMut) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let offered = self.room_for_read();
        if self.buf.capacity() - self.buf.len() < offered {
            self.buf.reserve(offered);
        }
        let n = read(&mut self.buf)?;
        self.adapt(n);
        Ok(n)
    }

    /// As [`ReadBuffer::read_with`], for a stream without readiness (TLS):
    /// reserves the offer, then awaits the read. Cancel-safe: a read that
    /// did not complete appended nothing.
    pub(crate) async fn read_async<R: tokio::io::AsyncRead + Unpin>(
        &mut self,
        rd: &mut R,
    ) -> io::Result<usize> {
        use tokio::io::AsyncReadExt;
        let offered = self.room_for_read();
        if self.buf.capacity() - self.buf.len() < offered {
            self.buf.reserve(offered);
        }
        let n = rd.read_buf(&mut self.buf).await?;
        self.adapt(n);
        Ok(n)
    }

    /// How many bytes the next read is offered: the adaptive size, or more
    /// when a frame in progress needs more, but never more than what has
    /// already arrived (growth by doubling, paid for by the peer's bytes).
    fn room_for_read(&self) -> usize {
        let have = self.buf.len();
        let missing = self
            .declared_frame_len()
            .map_or(0, |need| need.saturating_sub(have));
        if missing > self.next_read {
            missing.min(have.max(self.next_read))
        } else {
            self.next_read
        }
    }

    /// Length (prefix included) of the frame at the front, once its prefix
    /// has arrived. A negative length is the decoder's to reject.
    fn declared_frame_len(&self) -> Option<usize> {
        let b = self.buf.get(..4)?;
        let len = i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        usize::try_from(len).ok().map(|l| l.saturating_add(4))
    }

    /// A read of at least the offer means more is waiting: offer twice as
    /// much next time. Two reads in a row under half the offer: halve it.
    fn adapt(&mut self, n: usize) {
        if n >= self.next_read {
            self.next_read = (self.next_read * 2).min(MAX_READ);
            self.short_reads = 0;
        } else if n < self.next_read / 2 {
            self.short_reads += 1;
            if self.short_reads >= SHORT_READS_TO_SHRINK {
                self.next_read = (self.next_read / 2).max(MIN_READ);
                self.short_reads = 0;
            }
        } else {
            self.short_reads = 0;
        }
        debug_assert!((MIN_READ..=MAX_READ).contains(&self.next_read));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read that appends `n` bytes of `b` (as a socket read would).
    fn feed(rb: &mut ReadBuffer, n: usize, b: u8) -> usize {
        rb.read_with(|buf| {
            let n = n.min(buf.capacity() - buf.len());
            buf.extend(std::iter::repeat_n(b, n));
            Ok(n)
        })
        .unwrap()
    }

    /// A read that fills all the room offered.
    fn fill(rb: &mut ReadBuffer) -> usize {
        feed(rb, usize::MAX, 0)
    }

    #[test]
    fn a_new_buffer_holds_no_memory() {
        let rb = ReadBuffer::default();
        assert_eq!(rb.capacity(), 0);
        assert_eq!(rb.next_read(), INITIAL_READ);
    }

    #[test]
    fn full_reads_grow_the_offer_up_to_the_maximum() {
        let mut rb = ReadBuffer::default();
        let mut offers = Vec::new();
        for _ in 0..10 {
            offers.push(rb.next_read());
            fill(&mut rb);
            rb.bytes().clear();
        }
        assert_eq!(offers[0], INITIAL_READ);
        assert_eq!(offers[1], 2 * INITIAL_READ);
        assert_eq!(rb.next_read(), MAX_READ);
        assert!(offers.windows(2).all(|w| w[1] >= w[0]));
    }

    #[test]
    fn short_reads_shrink_the_offer_down_to_the_minimum() {
        let mut rb = ReadBuffer::default();
        for _ in 0..6 {
            fill(&mut rb);
            rb.bytes().clear();
        }
        assert_eq!(rb.next_read(), MAX_READ);
        // One short read is not enough to shrink.
        feed(&mut rb, 100, 1);
        assert_eq!(rb.next_read(), MAX_READ);
        feed(&mut rb, 100, 1);
        assert_eq!(rb.next_read(), MAX_READ / 2);
        for _ in 0..40 {
            feed(&mut rb, 10, 1);
        }
        assert_eq!(rb.next_read(), MIN_READ);
        // A read of about half the offer keeps it where it is.
        let keep = rb.next_read();
        feed(&mut rb, keep / 2 + 1, 1);
        feed(&mut rb, keep / 2 + 1, 1);
        assert_eq!(rb.next_read(), keep);
    }

    #[test]
    fn a_quiet_connection_gives_its_buffer_back() {
        let mut rb = ReadBuffer::default();
        fill(&mut rb);
        assert!(rb.capacity() >= INITIAL_READ);
        assert!(!rb.release_if_empty(), "bytes are still undecoded");
        assert!(rb.capacity() > 0);
        let _frame = rb.bytes().split();
        assert!(rb.release_if_empty());
        assert_eq!(rb.capacity(), 0);
    }

    #[test]
    fn a_huge_declared_frame_is_not_reserved_up_front() {
        let mut rb = ReadBuffer::default();
        // A prefix that announces a 16 MiB frame, then a trickle.
        rb.read_with(|buf| {
            buf.extend_from_slice(&(16 * 1024 * 1024i32).to_be_bytes());
            buf.extend_from_slice(&[0; 6]);
            Ok(10)
        })
        .unwrap();
        for _ in 0..3 {
            feed(&mut rb, 10, 7);
        }
        assert!(
            rb.capacity() <= 4 * MAX_READ,
            "capacity {} for 40 bytes received",
            rb.capacity()
        );
    }

    #[test]
    fn a_large_frame_grows_the_buffer_with_what_arrives() {
        let mut rb = ReadBuffer::default();
        let total = 1024 * 1024;
        rb.read_with(|buf| {
            buf.extend_from_slice(&(total as i32 - 4).to_be_bytes());
            Ok(4)
        })
        .unwrap();
        let mut reads = 0;
        while rb.bytes().len() < total {
            let before = rb.bytes().len();
            let n = feed(&mut rb, total - before, 3);
            assert!(n > 0);
            // Never more than doubles what had arrived (or one offer).
            assert!(n <= before.max(MAX_READ), "read {n} after {before}");
            reads += 1;
        }
        assert_eq!(rb.bytes().len(), total);
        assert!(reads < 30, "{reads} reads for one 1 MiB frame");
        assert!(rb.capacity() <= 2 * total);
    }

    #[test]
    fn read_errors_pass_through_and_change_nothing() {
        let mut rb = ReadBuffer::default();
        let err = rb
            .read_with(|_| Err(io::ErrorKind::WouldBlock.into()))
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert_eq!(rb.next_read(), INITIAL_READ);
        assert!(rb.release_if_empty());
        assert_eq!(rb.capacity(), 0);
    }
}
