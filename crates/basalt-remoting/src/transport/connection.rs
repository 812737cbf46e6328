//! The two tasks of a connection.
//!
//! The reader decodes frames, routes responses to waiting requests and runs
//! each request until it first waits, then leaves it to a task of its own. The writer takes everything queued at once, encodes
//! all headers into one buffer (copying small bodies next to them) and writes
//! headers and large bodies with vectored writes, so a burst of responses costs
//! one syscall and a large pull body is never copied.

use std::future::Future;
use std::io::{self, IoSlice};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use super::{Channel, ConnectionConfig, RequestProcessor};
use crate::codec::{FrameDecoder, encode_header_into};
use crate::command::RemotingCommand;

/// Commands taken from the queue per write.
const MAX_BATCH: usize = 256;
/// Bodies up to this size are copied next to their header; larger ones are
/// written from their own buffer.
const INLINE_BODY_MAX: usize = 4096;
/// Minimum free space offered to each socket read.
const READ_CHUNK: usize = 64 * 1024;

/// Starts the tasks of a connection and returns its channel plus a handle
/// that completes when both tasks have stopped and `on_channel_closed` ran.
pub(crate) fn spawn_connection<P: RequestProcessor>(
    stream: TcpStream,
    label: String,
    processor: Arc<P>,
    config: &ConnectionConfig,
) -> io::Result<(Channel, JoinHandle<()>)> {
    let remote = stream.peer_addr()?;
    let local = stream.local_addr()?;
    stream.set_nodelay(true)?;
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel(config.write_queue_capacity.max(1));
    let channel = Channel::new(remote, local, label, tx, config.max_frame_size);
    let decoder = FrameDecoder::new(config.max_frame_size);
    let inflight = Arc::new(Semaphore::new(config.max_inflight_requests.max(1)));

    let writer = tokio::spawn(write_loop(wr, rx, channel.clone()));
    let ch = channel.clone();
    let handle = tokio::spawn(async move {
        read_loop(rd, &ch, &processor, decoder, inflight).await;
        ch.close();
        let _ = writer.await;
        processor.on_channel_closed(&ch);
        tracing::debug!(peer = %ch.label(), id = ch.id(), "connection closed");
    });
    Ok((channel, handle))
}

async fn read_loop<P: RequestProcessor>(
    mut rd: OwnedReadHalf,
    channel: &Channel,
    processor: &Arc<P>,
    decoder: FrameDecoder,
    inflight: Arc<Semaphore>,
) {
    let mut close = channel.close_signal();
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(cmd)) => {
                    if cmd.is_response() {
                        channel.complete(cmd);
                        continue;
                    }
                    let permit = tokio::select! {
                        p = inflight.clone().acquire_owned() => match p {
                            Ok(p) => p,
                            Err(_) => return,
                        },
                        _ = super::signalled(&mut close) => return,
                    };
                    let ch = channel.clone();
                    let p = processor.clone();
                    let mut task = Box::pin(async move {
                        let opaque = cmd.opaque;
                        let oneway = cmd.is_oneway();
                        // Answer in the header form the request came in:
                        // every client decodes both, and one that chose the
                        // binary form is spared JSON.
                        let serialize_type = cmd.serialize_type;
                        let resp = p.process(&ch, cmd).await;
                        if let (Some(mut resp), false) = (resp, oneway) {
                            resp.opaque = opaque;
                            resp.serialize_type = serialize_type;
                            resp.mark_response();

                            let _ = ch.send(resp).await;
                        }
                        drop(permit);
                    });
                    // Run the request inline up to its first pending await:
                    // requests then start in arrival order, and one that
                    // completes at once costs no task. Only a request that
                    // waits (long polling, flush) gets a task of its own,
                    // whose first poll registers the real waker.
                    // A panicking processor loses only its own request, as
                    // it would in a task of its own.
                    let mut cx = Context::from_waker(Waker::noop());
                    match catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(&mut cx))) {
                        Ok(Poll::Pending) => {
                            tokio::spawn(task);
                        }
                        Ok(Poll::Ready(())) => {}
                        Err(_) => tracing::error!(peer = %channel.remote_addr(),
                            "request processor panicked; the request gets no reply"),
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(peer = %channel.remote_addr(), reason = %e,
                        "closing connection: undecodable frame");
                    return;
                }
            }
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        tokio::select! {
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(peer = %channel.remote_addr(), error = %e, "read failed");
                    return;
                }
            },
            _ = super::signalled(&mut close) => return,
        }
    }
}

enum Segment {
    /// A range of the shared header buffer.
    Head(usize, usize),
    Body(Bytes),
}

async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<RemotingCommand>,
    channel: Channel,
) {
    let mut close = channel.close_signal();
    let mut closing = false;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut head = BytesMut::with_capacity(64 * 1024);
    let mut segments = Vec::with_capacity(2 * MAX_BATCH + 1);
    loop {
        let n = if closing {
            rx.recv_many(&mut batch, MAX_BATCH).await
        } else {
            tokio::select! {
                biased;
                n = rx.recv_many(&mut batch, MAX_BATCH) => n,
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
        if let Err(e) = write_batch(&mut wr, &mut batch, &mut head, &mut segments).await {
            tracing::debug!(peer = %channel.remote_addr(), error = %e, "write failed");
            channel.close();
            return;
        }
    }
    let _ = wr.shutdown().await;
}

async fn write_batch(
    wr: &mut OwnedWriteHalf,
    batch: &mut Vec<RemotingCommand>,
    head: &mut BytesMut,
    segments: &mut Vec<Segment>,
) -> io::Result<()> {
    head.clear();
    segments.clear();
    let mut seg_start = 0;
    for cmd in batch.drain(..) {
        let before = head.len();
        if let Err(e) = encode_header_into(&cmd, head) {
            tracing::error!(code = cmd.code, opaque = cmd.opaque, reason = %e,
                "dropping a command that cannot be encoded");
            head.truncate(before);
            continue;
        }
        if cmd.body.len() <= INLINE_BODY_MAX {
            head.extend_from_slice(&cmd.body);
        } else {
            segments.push(Segment::Head(seg_start, head.len()));
            segments.push(Segment::Body(cmd.body));
            seg_start = head.len();
        }
    }
    if seg_start < head.len() {
        segments.push(Segment::Head(seg_start, head.len()));
    }
    let mut slices: Vec<IoSlice<'_>> = segments
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
    segments.clear();
    Ok(())
}
