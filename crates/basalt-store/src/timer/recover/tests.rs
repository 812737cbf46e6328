use super::*;
use crate::consume_queue::CqUnit;
use crate::timer::entry::TimerEntry;

const P: i64 = 1000;

fn config(root: &std::path::Path) -> TimerConfig {
    TimerConfig {
        root: root.to_path_buf(),
        precision_ms: P,
        max_delay_ms: 60_000,
        segment_size: ENTRY_SIZE * 1024,
        disk: basalt_disk::Disk::Real,
    }
}

fn queue(root: &std::path::Path) -> Arc<ConsumeQueue> {
    let q = Arc::new(ConsumeQueue::new(
        &root.join("consumequeue"),
        "rmq_sys_wheel_timer",
        0,
        20 * 100,
    ));
    q.load().unwrap();
    q
}

/// Enqueues timers as the broker does: a queue unit, a TimerLog entry
/// linked into its slot, the wheel updated.
fn enqueue(log: &TimerLog, wheel: &mut TimingWheel, q: &ConsumeQueue, slots: &[i64]) {
    for slot in slots {
        let qoff = q.max_offset();
        let phys = 1000 + qoff * 200;
        q.put_unit(
            qoff,
            CqUnit {
                physical_offset: phys,
                size: 200,
                tags_code: 0,
            },
        )
        .unwrap();
        let prev = wheel.prev_for(*slot).unwrap();
        let e = TimerEntry {
            slot_ms: *slot,
            phys,
            size: 200,
            queue_offset: qoff,
            prev,
        };
        let pos = log.append(&e).unwrap();
        wheel.place(*slot, pos).unwrap();
    }
}

#[test]
fn a_fresh_store_starts_empty_at_the_current_slot() {
    let dir = tempfile::tempdir().unwrap();
    let r = recover(&config(dir.path()), None, 12_345).unwrap();
    assert_eq!(r.read_ms, 12_000);
    assert_eq!(r.enqueue_next, 0);
    assert_eq!(r.wheel.pending(), 0);
}

/// The checkpoint covers 4 entries; 2 more were written after it (and a
/// torn half entry after those). Recovery keeps the 4, rebuilds the wheel
/// from the ones not yet delivered, and enqueues the rest again.
#[test]
fn entries_past_the_checkpoint_are_cut_and_enqueued_again() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let q = queue(dir.path());
    {
        let log = TimerLog::new(cfg.log_dir(), cfg.segment_size);
        log.load().unwrap();
        let mut wheel = TimingWheel::new(P, cfg.slot_count());
        enqueue(&log, &mut wheel, &q, &[5000, 9000, 9000, 7000]);
        log.flush().unwrap();
        TimerCheckpoint {
            log_end: 4 * 48,
            enqueue_next: 4,
            read_ms: 6000,
        }
        .save(&cfg.checkpoint_path())
        .unwrap();
        enqueue(&log, &mut wheel, &q, &[9000, 8000]);
        log.flush().unwrap();
    }
    let seg = cfg.log_dir().join(crate::mapped_file::file_name(0));
    let mut raw = std::fs::read(&seg).unwrap();
    raw[6 * 48..6 * 48 + 20].fill(0xab);
    std::fs::write(&seg, raw).unwrap();

    let r = recover(&cfg, Some(&q), 10_000).unwrap();
    assert_eq!(r.report.rebuilt_because, None);
    assert_eq!(r.report.entries_scanned, 4);
    assert_eq!(r.report.entries_cut, 3, "two entries and the torn one");
    assert_eq!(r.log.end(), 4 * 48);
    assert_eq!(r.enqueue_next, 4);
    assert_eq!(r.read_ms, 6000);
    // 5000 is delivered; 9000 (two) and 7000 wait.
    assert_eq!(r.wheel.pending(), 3);
    assert_eq!(r.wheel.peek(9000), (96, 2));
    assert_eq!(r.wheel.peek(5000), (-1, 0));
    // Appending continues the chains where they were.
    assert_eq!(r.wheel.prev_for(9000), Ok(96));
}

#[test]
fn damage_before_the_checkpoint_rebuilds_from_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let q = queue(dir.path());
    {
        let log = TimerLog::new(cfg.log_dir(), cfg.segment_size);
        log.load().unwrap();
        let mut wheel = TimingWheel::new(P, cfg.slot_count());
        enqueue(&log, &mut wheel, &q, &[5000, 9000, 9000]);
        log.flush().unwrap();
        TimerCheckpoint {
            log_end: 3 * 48,
            enqueue_next: 3,
            read_ms: 6000,
        }
        .save(&cfg.checkpoint_path())
        .unwrap();
    }
    let seg = cfg.log_dir().join(crate::mapped_file::file_name(0));
    let mut raw = std::fs::read(&seg).unwrap();
    raw[48 + 30] ^= 0x10;
    std::fs::write(&seg, raw).unwrap();
    let r = recover(&cfg, Some(&q), 10_000).unwrap();
    let why = r.report.rebuilt_because.clone().unwrap();
    assert!(why.contains("at 48") && why.contains("CRC"), "{why}");
    assert_eq!(r.enqueue_next, 0, "every timer is enqueued again");
    assert_eq!(r.read_ms, 6000);
    assert_eq!(r.log.end(), 0);
    assert_eq!(r.wheel.pending(), 0);
}

#[test]
fn entries_for_messages_the_queue_lost_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let q = queue(dir.path());
    {
        let log = TimerLog::new(cfg.log_dir(), cfg.segment_size);
        log.load().unwrap();
        let mut wheel = TimingWheel::new(P, cfg.slot_count());
        enqueue(&log, &mut wheel, &q, &[5000, 9000, 9000, 8000]);
        log.flush().unwrap();
        TimerCheckpoint {
            log_end: 4 * 48,
            enqueue_next: 4,
            read_ms: 1000,
        }
        .save(&cfg.checkpoint_path())
        .unwrap();
    }
    // The CommitLog lost its tail: the queue now ends after unit 1.
    q.truncate_dirty(1000 + 2 * 200).unwrap();
    assert_eq!(q.max_offset(), 2);
    let r = recover(&cfg, Some(&q), 10_000).unwrap();
    assert_eq!(r.report.rebuilt_because, None);
    assert_eq!(r.log.end(), 2 * 48);
    assert_eq!(r.enqueue_next, 2);
    assert_eq!(r.wheel.pending(), 2);
    assert_eq!(r.wheel.peek(9000), (48, 1));
}

#[test]
fn a_timerlog_without_checkpoint_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let q = queue(dir.path());
    {
        let log = TimerLog::new(cfg.log_dir(), cfg.segment_size);
        log.load().unwrap();
        let mut wheel = TimingWheel::new(P, cfg.slot_count());
        enqueue(&log, &mut wheel, &q, &[5000, 9000]);
        log.flush().unwrap();
    }
    let r = recover(&cfg, Some(&q), 10_500).unwrap();
    assert!(r.report.rebuilt_because.is_some());
    assert_eq!(r.read_ms, 10_000);
    assert_eq!(r.enqueue_next, 0);
    assert!(
        !cfg.log_dir()
            .join(crate::mapped_file::file_name(0))
            .exists()
    );
}

#[test]
fn a_changed_precision_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let q = queue(dir.path());
    {
        let log = TimerLog::new(cfg.log_dir(), cfg.segment_size);
        log.load().unwrap();
        let mut wheel = TimingWheel::new(P, cfg.slot_count());
        enqueue(&log, &mut wheel, &q, &[5000, 9000]);
        log.flush().unwrap();
        TimerCheckpoint {
            log_end: 2 * 48,
            enqueue_next: 2,
            read_ms: 3000,
        }
        .save(&cfg.checkpoint_path())
        .unwrap();
    }
    let coarse = TimerConfig {
        precision_ms: 2000,
        ..cfg
    };
    let r = recover(&coarse, Some(&q), 10_500).unwrap();
    assert!(r.report.rebuilt_because.is_some());
    assert_eq!(r.enqueue_next, 0);
}
