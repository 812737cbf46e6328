//! The writer task of a connection.
//!
//! It takes everything queued at once, encodes all headers into one buffer
//! (copying small bodies next to them) and writes headers, large bodies and
//! bodies in pieces (`RemotingCommand::body_parts`) with vectored writes, so a burst of responses costs one syscall and a
//! large pull body is never copied. Its buffers are sized by the batch at
//! hand and given back whenever the queue runs dry, so a quiet connection
//! holds none.

use std::io::{self, IoSlice};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::Channel;
use crate::codec::encode_header_into;
use crate::command::RemotingCommand;

/// Commands taken from the queue per write.
const MAX_BATCH: usize = 256;
/// Bodies up to this size are copied next to their header; larger ones are
/// written from their own buffer.
const INLINE_BODY_MAX: usize = 4096;
/// Room reserved per command for its length words and header; a header
/// that needs more grows the buffer.
const HEADER_ESTIMATE: usize = 256;

pub(super) async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::Receiver<RemotingCommand>,
    channel: Channel,
    gather_bursts: bool,
) {
    let mut close = channel.close_signal();
    let mut closing = false;
    let mut bufs = WriteBuffers::default();
    loop {
        // Size the batch by what is queued (the queue knows its length), so
        // a fresh batch does not grow by doubling.
        let queued = rx.len().min(MAX_BATCH);
        if bufs.batch.capacity() < queued {
            bufs.batch.reserve_exact(queued);
        }
        let n = if closing {
            rx.recv_many(&mut bufs.batch, MAX_BATCH).await
        } else {
            tokio::select! {
                biased;
                n = rx.recv_many(&mut bufs.batch, MAX_BATCH) => n,
                _ = super::signalled(&mut close) => {
                    // Send what is already queued, then stop.
                    closing = true;
                    rx.close();
                    continue;
                }
            }
        };
        if n == 0 {
            break;
        }
        if gather_bursts && n < MAX_BATCH && !closing {
            gather_burst(&mut rx, &mut bufs.batch).await;
        }
        if let Err(e) = bufs.write(&mut wr).await {
            tracing::debug!(peer = %channel.remote_addr(), error = %e, "write failed");
            channel.close();
            return;
        }
        if rx.is_empty() {
            bufs.release();
        }
    }
    let _ = wr.shutdown().await;
}

/// Yields once, then takes what else was queued meanwhile. Responses come
/// in bursts (one group commit answers every request it covers, each from
/// its own task); without the yield the writer woke on the first of them
/// and wrote each response with a syscall of its own.
async fn gather_burst(rx: &mut mpsc::Receiver<RemotingCommand>, batch: &mut Vec<RemotingCommand>) {
    tokio::task::yield_now().await;
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(c) => batch.push(c),
            Err(_) => break,
        }
    }
}

/// A range of the header buffer, or a body written from its own buffer.
enum Segment {
    Head(usize, usize),
    Body(Bytes),
}

/// The writer's buffers: the batch taken from the queue, the encoded
/// headers with small bodies, and the order of header ranges and large
/// bodies. Empty (unallocated) between bursts.
#[derive(Default)]
struct WriteBuffers {
    batch: Vec<RemotingCommand>,
    head: BytesMut,
    segments: Vec<Segment>,
}

impl WriteBuffers {
    /// Bytes allocated, for tests.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.batch.capacity() * std::mem::size_of::<RemotingCommand>()
            + self.head.capacity()
            + self.segments.capacity() * std::mem::size_of::<Segment>()
    }

    /// Gives every buffer back to the allocator.
    fn release(&mut self) {
        *self = Self::default();
    }

    /// Encodes the batch and writes it out; the batch is empty afterwards.
    async fn write<W: tokio::io::AsyncWrite + Unpin>(&mut self, wr: &mut W) -> io::Result<()> {
        self.encode();
        let head = &self.head;
        let mut slices: Vec<IoSlice<'_>> = self
            .segments
            .iter()
            .filter_map(|s| match s {
                Segment::Head(a, b) if a < b => Some(IoSlice::new(&head[*a..*b])),
                Segment::Head(..) => None,
                Segment::Body(b) => Some(IoSlice::new(b)),
            })
            .collect();
        let mut bufs = &mut slices[..];
        while !bufs.is_empty() {
            let n = wr.write_vectored(bufs).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut bufs, n);
        }
        drop(slices);
        // Release large bodies (mapped-file slices) as soon as they are written.
        self.segments.clear();
        Ok(())
    }

    /// Encodes every command of the batch into `head` and `segments`.
    fn encode(&mut self) {
        self.head.clear();
        self.segments.clear();
        let estimate: usize = self
            .batch
            .iter()
            .map(|c| HEADER_ESTIMATE + inline_len(c))
            .sum();
        self.head.reserve(estimate);
        self.segments.reserve(2 * self.batch.len() + 1);
        let mut seg_start = 0;
        for cmd in self.batch.drain(..) {
            let before = self.head.len();
            if let Err(e) = encode_header_into(&cmd, &mut self.head) {
                tracing::error!(code = cmd.code, opaque = cmd.opaque, reason = %e,
                    "dropping a command that cannot be encoded");
                self.head.truncate(before);
                continue;
            }
            if inline_len(&cmd) == cmd.body.len() && cmd.body_parts.is_empty() {
                self.head.extend_from_slice(&cmd.body);
            } else {
                // A large body, or one in pieces: each piece is written from
                // its own buffer, in order, right after the header.
                self.segments
                    .push(Segment::Head(seg_start, self.head.len()));
                let pieces = std::iter::once(cmd.body).chain(cmd.body_parts);
                self.segments
                    .extend(pieces.filter(|b| !b.is_empty()).map(Segment::Body));
                seg_start = self.head.len();
            }
        }
        if seg_start < self.head.len() {
            self.segments
                .push(Segment::Head(seg_start, self.head.len()));
        }
    }
}

/// Body bytes copied into the header buffer for `cmd`.
fn inline_len(cmd: &RemotingCommand) -> usize {
    if cmd.body_parts.is_empty() && cmd.body.len() <= INLINE_BODY_MAX {
        cmd.body.len()
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::FrameDecoder;

    fn command(opaque: i32, body: usize) -> RemotingCommand {
        let mut c = RemotingCommand::request(10);
        c.opaque = opaque;
        c.body = Bytes::from(vec![opaque as u8; body]);
        c
    }

    /// Responses queued by other tasks woken together with the first one
    /// join its write: one syscall for the burst, not one per response.
    #[tokio::test(flavor = "current_thread")]
    async fn a_burst_from_many_tasks_goes_out_in_one_batch() {
        let (tx, mut rx) = mpsc::channel(64);
        tx.send(command(0, 10)).await.unwrap();
        for i in 1..10 {
            let tx = tx.clone();
            tokio::spawn(async move { tx.send(command(i, 10)).await.unwrap() });
        }
        let mut batch = Vec::new();
        assert_eq!(rx.recv_many(&mut batch, MAX_BATCH).await, 1);
        gather_burst(&mut rx, &mut batch).await;
        let opaques: Vec<i32> = batch.iter().map(|c| c.opaque).collect();
        assert_eq!(opaques, (0..10).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn writes_a_batch_in_order_and_gives_the_buffers_back() {
        let mut bufs = WriteBuffers::default();
        assert_eq!(bufs.capacity(), 0, "a new writer holds nothing");
        // Small bodies go inline, large ones as their own slices.
        let sizes = [0, 100, INLINE_BODY_MAX, INLINE_BODY_MAX + 1, 64 * 1024, 7];
        bufs.batch
            .extend(sizes.iter().enumerate().map(|(i, &n)| command(i as i32, n)));
        let mut out = Vec::new();
        bufs.write(&mut out).await.unwrap();
        assert!(bufs.batch.is_empty());
        assert!(bufs.capacity() > 0);
        bufs.release();
        assert_eq!(bufs.capacity(), 0, "released buffers hold nothing");

        let mut wire = BytesMut::from(&out[..]);
        let decoder = FrameDecoder::default();
        for (i, &n) in sizes.iter().enumerate() {
            let cmd = decoder.decode(&mut wire).unwrap().expect("a whole frame");
            assert_eq!(cmd.opaque, i as i32);
            assert_eq!(cmd.body.len(), n);
            assert!(cmd.body.iter().all(|&b| b == i as u8));
        }
        assert!(wire.is_empty());
    }

    #[tokio::test]
    async fn bodies_in_pieces_are_sent_in_order_without_inlining() {
        let mut bufs = WriteBuffers::default();
        bufs.batch.push(command(1, 10));
        let parts = vec![
            Bytes::from_static(b"-two-"),
            Bytes::new(),
            Bytes::from(vec![7u8; 5000]),
            Bytes::from_static(b"end"),
        ];
        let multi = RemotingCommand::request(11).with_body_parts(Bytes::from_static(b"one"), parts);
        assert_eq!(multi.body_len(), 3 + 5 + 5000 + 3);
        bufs.batch.push(multi);
        bufs.batch.push(command(3, 20));
        let mut out = Vec::new();
        bufs.write(&mut out).await.unwrap();
        // The pieces were written from their own buffers, not copied next
        // to the headers.
        assert!(bufs.head.len() < 1000, "{} bytes copied", bufs.head.len());
        let mut wire = BytesMut::from(&out[..]);
        let decoder = FrameDecoder::default();
        let first = decoder.decode(&mut wire).unwrap().expect("frame 1");
        assert_eq!(first.body.len(), 10);
        let joined = decoder.decode(&mut wire).unwrap().expect("frame 11");
        assert_eq!(joined.code, 11);
        let mut want = b"one-two-".to_vec();
        want.extend(vec![7u8; 5000]);
        want.extend_from_slice(b"end");
        assert_eq!(&joined.body[..], &want[..]);
        assert!(joined.body_parts.is_empty(), "a decoded body is one buffer");
        let last = decoder.decode(&mut wire).unwrap().expect("frame 3");
        assert_eq!(last.body.len(), 20);
        assert!(wire.is_empty());
    }

    #[tokio::test]
    async fn the_header_buffer_is_sized_by_the_batch() {
        let mut bufs = WriteBuffers::default();
        bufs.batch.push(command(1, 10));
        bufs.write(&mut Vec::new()).await.unwrap();
        let one = bufs.head.capacity();
        assert!(one < 4096, "one small command took {one} bytes");
        bufs.release();
        bufs.batch
            .extend((0..MAX_BATCH as i32).map(|i| command(i, 1000)));
        bufs.write(&mut Vec::new()).await.unwrap();
        assert!(bufs.head.capacity() >= MAX_BATCH * 1000);
    }
}
