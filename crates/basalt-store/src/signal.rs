//! Wake-up primitives for the store's service threads.
//!
//! Services sleep until there is work ([`Signal`]) and waiters sleep until an
//! offset is reached ([`OffsetWatch`]). Neither polls: an idle store makes no
//! wake-ups at all, and a busy writer pays one atomic load per append when the
//! service is already awake.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// A level-triggered "there is work" flag with a sleeping consumer, like
/// RocketMQ's `ServiceThread.waitForRunning` / `wakeup`.
#[derive(Debug, Default)]
pub struct Signal {
    pending: AtomicBool,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Signal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks work pending and wakes the sleeper if there is one.
    #[inline]
    pub fn notify(&self) {
        if self.pending.load(Ordering::Acquire) {
            return;
        }
        if !self.pending.swap(true, Ordering::SeqCst) && self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
    }

    /// Sleeps until notified or until `timeout` passes (`None`: no timeout).
    /// Returns at once if a notification is pending; consumes it either way.
    pub fn wait(&self, timeout: Option<Duration>) {
        if self.pending.swap(false, Ordering::SeqCst) {
            return;
        }
        let mut g = self.lock.lock();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        if !self.pending.load(Ordering::SeqCst) {
            match timeout {
                Some(t) => {
                    let deadline = Instant::now() + t;
                    while !self.pending.load(Ordering::SeqCst) {
                        if self.cv.wait_until(&mut g, deadline).timed_out() {
                            break;
                        }
                    }
                }
                None => {
                    while !self.pending.load(Ordering::SeqCst) {
                        self.cv.wait(&mut g);
                    }
                }
            }
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        self.pending.store(false, Ordering::SeqCst);
    }
}

/// Why a wait on an [`OffsetWatch`] ended without reaching the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitError {
    /// The watch was failed (the store is poisoned or shut down).
    Failed,
    /// The timeout passed first.
    TimedOut,
}

/// A monotonically increasing offset that async and blocking waiters can wait
/// on, e.g. "flushed up to here". One publisher, any number of waiters.
#[derive(Debug)]
pub struct OffsetWatch {
    value: AtomicI64,
    failed: AtomicBool,
    notify: tokio::sync::Notify,
    blocking_waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
}

impl OffsetWatch {
    pub fn new(initial: i64) -> Self {
        OffsetWatch {
            value: AtomicI64::new(initial),
            failed: AtomicBool::new(false),
            notify: tokio::sync::Notify::new(),
            blocking_waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    #[inline]
    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Acquire)
    }

    /// Raises the value (never lowers it) and wakes waiters.
    pub fn publish(&self, v: i64) {
        self.value.fetch_max(v, Ordering::AcqRel);
        self.wake_all();
    }

    /// Sets the value unconditionally (recovery and truncation only).
    pub fn reset(&self, v: i64) {
        self.value.store(v, Ordering::Release);
        self.wake_all();
    }

    /// Fails every current and future wait.
    pub fn fail(&self) {
        self.failed.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    fn wake_all(&self) {
        self.notify.notify_waiters();
        if self.blocking_waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock();
            self.cv.notify_all();
        }
    }

    /// Waits until the value reaches `target`.
    pub async fn wait_for(&self, target: i64) -> Result<(), WaitError> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.get() >= target {
                return Ok(());
            }
            if self.is_failed() {
                return Err(WaitError::Failed);
            }
            notified.await;
        }
    }

    /// Blocks the thread until the value reaches `target` or `timeout` passes.
    pub fn wait_blocking(&self, target: i64, timeout: Duration) -> Result<(), WaitError> {
        let deadline = Instant::now() + timeout;
        let mut g = self.lock.lock();
        self.blocking_waiters.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            if self.get() >= target {
                break Ok(());
            }
            if self.is_failed() {
                break Err(WaitError::Failed);
            }
            if self.cv.wait_until(&mut g, deadline).timed_out() {
                if self.get() >= target {
                    break Ok(());
                }
                break Err(WaitError::TimedOut);
            }
        };
        self.blocking_waiters.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn signal_wakes_sleeper_and_keeps_pending() {
        let s = Arc::new(Signal::new());
        s.notify();
        // A pending notification returns at once.
        s.wait(Some(Duration::from_secs(10)));
        let s2 = s.clone();
        let t = std::thread::spawn(move || s2.wait(None));
        std::thread::sleep(Duration::from_millis(20));
        s.notify();
        t.join().unwrap();
    }

    #[test]
    fn signal_wait_times_out() {
        let s = Signal::new();
        let t0 = Instant::now();
        s.wait(Some(Duration::from_millis(20)));
        assert!(t0.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn offset_watch_blocking_and_async() {
        let w = Arc::new(OffsetWatch::new(0));
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.wait_blocking(10, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(10));
        w.publish(5);
        w.publish(10);
        assert_eq!(t.join().unwrap(), Ok(()));
        assert_eq!(
            w.wait_blocking(11, Duration::from_millis(10)),
            Err(WaitError::TimedOut)
        );

        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let w3 = w.clone();
        rt.block_on(async move {
            let waiter = tokio::spawn({
                let w = w3.clone();
                async move { w.wait_for(20).await }
            });
            tokio::task::yield_now().await;
            w3.publish(20);
            assert_eq!(waiter.await.unwrap(), Ok(()));
            w3.fail();
            assert_eq!(w3.wait_for(100).await, Err(WaitError::Failed));
        });
    }
}
