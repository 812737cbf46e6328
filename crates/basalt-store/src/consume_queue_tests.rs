//! Tests of [`super::ConsumeQueue`] (kept apart to keep the module short).

use super::*;
use std::path::PathBuf;

fn unit(p: i64) -> CqUnit {
    CqUnit {
        physical_offset: p,
        size: 100,
        tags_code: p * 7,
    }
}

#[test]
fn put_read_roll_recover() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 10 * UNIT_SIZE);
    cq.load().unwrap();
    for i in 0..25 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    assert_eq!(cq.max_offset(), 25);
    assert_eq!(cq.min_offset(), 0);
    assert_eq!(cq.unit_at(13), Some(unit(1300)));
    let run = cq.units_from(7).unwrap();
    assert_eq!(run.len(), 3);
    assert_eq!(run.iter().next(), Some(unit(700)));
    // A repeat is skipped.
    cq.put_unit(24, unit(2400)).unwrap();
    assert_eq!(cq.max_offset(), 25);
    drop(cq);

    let cq = ConsumeQueue::new(dir.path(), "T", 0, 10 * UNIT_SIZE);
    cq.load().unwrap();
    cq.recover().unwrap();
    assert_eq!(cq.max_offset(), 25);
    assert_eq!(cq.max_physic_offset(), 2500);
    cq.truncate_dirty(1500).unwrap();
    assert_eq!(cq.max_offset(), 15);
    assert_eq!(cq.max_physic_offset(), 1500);
    cq.put_unit(15, unit(1500)).unwrap();
    assert_eq!(cq.max_offset(), 16);
}

#[test]
fn first_file_may_start_late_and_gaps_are_filled() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 1, 10 * UNIT_SIZE);
    cq.load().unwrap();
    cq.put_unit(23, unit(5000)).unwrap();
    assert_eq!(cq.min_offset(), 23);
    assert_eq!(cq.max_offset(), 24);
    assert!(cq.unit_at(20).unwrap().is_filler());
    cq.put_unit(26, unit(6000)).unwrap();
    assert_eq!(cq.max_offset(), 27);
    assert!(cq.unit_at(25).unwrap().is_filler());
}

#[test]
fn delete_expired_and_correct_min() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 10 * UNIT_SIZE);
    cq.load().unwrap();
    for i in 0..35 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    // CommitLog now starts at 1300: units 0..=12 are gone; file 0 goes.
    assert_eq!(cq.delete_expired(1300).unwrap(), 1);
    assert_eq!(cq.min_offset(), 13);
    assert!(cq.units_from(5).is_none());
}

#[test]
fn recover_cuts_torn_units() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 10 * UNIT_SIZE);
    cq.load().unwrap();
    for i in 0..5 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    cq.flush(0).unwrap();
    let path = cq.files().first().unwrap().path().to_path_buf();
    drop(cq);
    // Zero unit 3 (a torn write): units 3 and 4 go.
    let mut raw = std::fs::read(&path).unwrap();
    raw[60..80].fill(0);
    std::fs::write(&path, raw).unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 10 * UNIT_SIZE);
    cq.load().unwrap();
    assert_eq!(cq.recover().unwrap(), 1);
    assert_eq!(cq.max_offset(), 3);
}

/// Drops the file's pages from the page cache (they are clean: flushed),
/// so that what recovery reads shows up in `mincore`.
fn evict(path: &Path) {
    use std::os::unix::io::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    // SAFETY: fadvise on a descriptor we own.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0);
}

/// Writes `n` units into a fresh queue of `file_units`-unit files and
/// flushes them; returns the path of its first file.
fn written_queue(dir: &Path, file_units: usize, n: i64) -> PathBuf {
    let cq = ConsumeQueue::new(dir, "T", 0, file_units * UNIT_SIZE);
    cq.load().unwrap();
    if n == 0 {
        // An empty file, as a crash right after its creation leaves it.
        cq.files().last_writable_for(0, UNIT_SIZE).unwrap();
    }
    for i in 0..n {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    cq.flush(0).unwrap();
    cq.files().first().unwrap().path().to_path_buf()
}

/// Recovers the queue in `dir` from a cold page cache and returns it with
/// the file's resident pages afterwards.
fn recover_cold(dir: &Path, file_units: usize, path: &Path) -> (ConsumeQueue, u64, usize) {
    evict(path);
    let cq = ConsumeQueue::new(dir, "T", 0, file_units * UNIT_SIZE);
    cq.load().unwrap();
    let f = cq.files().first().unwrap();
    assert_eq!(
        f.resident_pages(),
        Some(0),
        "page cache dropped before recovery"
    );
    let dropped = cq.recover().unwrap();
    let resident = f.resident_pages().unwrap();
    (cq, dropped, resident)
}

/// Pages that hold units `[0, n)`.
fn pages_of(n: usize) -> usize {
    (n * UNIT_SIZE).div_ceil(crate::mapped_file::PAGE_SIZE)
}

#[test]
fn used_length_of_an_empty_file_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let units = 3 * 4096; // a 60-page file
    let path = written_queue(dir.path(), units, 0);
    let (cq, dropped, resident) = recover_cold(dir.path(), units, &path);
    assert_eq!((cq.max_offset(), dropped), (0, 0));
    assert_eq!(cq.max_physic_offset(), -1);
    assert_eq!(resident, 0, "an empty queue file is never read");
    // It costs at most one page of blocks on disk, not the file's size.
    use std::os::unix::fs::MetadataExt;
    assert!(std::fs::metadata(&path).unwrap().blocks() * 512 <= 4096);
    cq.put_unit(0, unit(0)).unwrap();
    assert_eq!(cq.max_offset(), 1);
}

#[test]
fn used_length_of_a_full_file() {
    let dir = tempfile::tempdir().unwrap();
    let units = 4096; // 20 pages exactly
    let path = written_queue(dir.path(), units, units as i64);
    let (cq, dropped, resident) = recover_cold(dir.path(), units, &path);
    assert_eq!((cq.max_offset(), dropped), (units as i64, 0));
    assert_eq!(cq.max_physic_offset(), (units as i64 - 1) * 100 + 100);
    assert!(resident <= pages_of(units), "{resident} pages");
    assert_eq!(
        used_prefix(&cq.files().first().unwrap()).len,
        units * UNIT_SIZE
    );
}

#[test]
fn used_length_with_a_torn_last_unit_reads_only_the_used_pages() {
    let dir = tempfile::tempdir().unwrap();
    let units = 3 * 4096; // a 60-page file
    let n = 1000;
    let path = written_queue(dir.path(), units, n);
    // Tear unit 999: its offset reached the disk, its size did not.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&[0u8; 4], 999 * UNIT_SIZE as u64 + 8)
            .unwrap();
        f.sync_all().unwrap();
    }
    let torn = MappedFile::open(&path, 0, units * UNIT_SIZE).unwrap();
    assert!(
        used_prefix(&torn).dirty_tail,
        "the torn unit's offset is past the used part"
    );
    drop(torn);
    let (cq, dropped, resident) = recover_cold(dir.path(), units, &path);
    assert_eq!((cq.max_offset(), dropped), (999, 0));
    assert_eq!(cq.max_physic_offset(), 998 * 100 + 100);
    assert!(
        resident <= pages_of(n as usize),
        "{resident} pages resident; the units use {}",
        pages_of(n as usize)
    );
    // The cut cleared the torn unit's bytes: nothing past the used part
    // is left to clear.
    let after = used_prefix(&cq.files().first().unwrap());
    assert_eq!((after.len, after.dirty_tail), (999 * UNIT_SIZE, false));
    // The torn unit is gone for good and its slot is written again.
    cq.put_unit(999, unit(99_900)).unwrap();
    assert_eq!(cq.unit_at(999), Some(unit(99_900)));
}

#[test]
fn a_unit_torn_across_a_hole_is_read_as_zeros() {
    let raw = [7u8; 40];
    // Only 32 bytes written: the second unit's tags lie in a hole.
    let u = unit_below(&raw, 20, 32);
    assert_eq!(u.size, i32::from_be_bytes([7; 4]));
    assert_eq!(u.tags_code, 0);
    assert_eq!(unit_below(&raw, 20, 0), CqUnit::decode(&[0; 20]));
}

/// Overwrites bytes of a queue file on disk (a torn write left them).
fn patch(path: &Path, at: usize, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, at as u64).unwrap();
    f.sync_all().unwrap();
}

/// Regression (soak seeds 12694, 14709, 19817): the first unit of a later
/// file, torn to an offset below the end of the unit before it (the last
/// of the previous file), passed as valid; recovery kept it and every
/// unit after it, and the queue's max physical offset fell below the
/// re-dispatched region, so the cut of that region skipped the queue.
#[test]
fn a_torn_first_unit_of_a_later_file_ends_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 4 * UNIT_SIZE);
    cq.load().unwrap();
    for i in 0..6 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    cq.flush(0).unwrap();
    let second = cq.files().files()[1].path().to_path_buf();
    drop(cq);
    // Unit 4's offset lost its high bytes: 400 became 133.
    patch(&second, 0, &133i64.to_be_bytes());
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 4 * UNIT_SIZE);
    cq.load().unwrap();
    cq.recover().unwrap();
    assert_eq!(cq.max_offset(), 4);
    assert_eq!(cq.max_physic_offset(), 400);
    cq.put_unit(4, unit(400)).unwrap();
    assert_eq!(cq.unit_at(4), Some(unit(400)));
}

/// Regression (soak seeds 6206, 12522): a filler whose last bytes a power
/// loss lost (size 0x7fff0000) is a valid unit posing as a record of 2 GiB
/// at offset 0. The abnormal recovery's cut of the re-dispatched region
/// kept it (it starts below the region), and every re-dispatched unit was
/// then skipped as a repeat: the queue held no units for its records.
#[test]
fn a_torn_filler_is_cut_with_the_redispatched_region() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 16 * UNIT_SIZE);
    cq.load().unwrap();
    // A queue first dispatched at offset 5: fillers 0..5.
    cq.put_unit(5, unit(9399)).unwrap();
    cq.flush(0).unwrap();
    let path = cq.files().first().unwrap().path().to_path_buf();
    drop(cq);
    let mut torn = [0u8; 6 * UNIT_SIZE];
    torn[8..12].copy_from_slice(&0x7fff_0000i32.to_be_bytes());
    patch(&path, 0, &torn);
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 16 * UNIT_SIZE);
    cq.load().unwrap();
    cq.recover().unwrap();
    assert_eq!(cq.max_offset(), 1, "the torn filler looks valid");
    // Abnormal recovery: re-dispatch from the CommitLog file at 8192.
    cq.truncate_dirty(8192).unwrap();
    assert_eq!(cq.max_offset(), 0);
    cq.put_unit(5, unit(9399)).unwrap();
    assert_eq!(cq.max_offset(), 6);
    assert_eq!(cq.unit_at(5), Some(unit(9399)));
    assert!(cq.unit_at(0).unwrap().is_filler());
}

/// Regression (soak seeds 5609, 18685): the min offset stopped on a filler
/// (the slot of a unit lost with its message already cleaned up) at the end
/// of a file, and the first pull there found only the filler and answered
/// `NoMatchedMessage`. Fillers before the first message still in the
/// CommitLog are passed over.
#[test]
fn the_min_offset_passes_over_leading_fillers() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 10 * UNIT_SIZE);
    cq.load().unwrap();
    for i in 0..9 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    // Unit 9 was lost; its slot is filled when unit 10 arrives.
    cq.put_unit(10, unit(5000)).unwrap();
    assert!(cq.unit_at(9).unwrap().is_filler());
    // The CommitLog now starts past every message before unit 10's.
    cq.correct_min_offset(4096);
    assert_eq!(cq.min_offset(), 10);
    let run = cq.units_from(cq.min_offset()).unwrap();
    assert_eq!(run.iter().next(), Some(unit(5000)));
}

/// A torn unit may hold any offset: one near `i64::MAX` is a unit whose
/// end saturates, not an overflow (a panic in debug builds), and the cut
/// of the re-dispatched region drops it.
#[test]
fn a_unit_torn_to_a_huge_offset_does_not_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 16 * UNIT_SIZE);
    cq.load().unwrap();
    cq.put_unit(0, unit(0)).unwrap();
    cq.put_unit(1, unit(100)).unwrap();
    cq.flush(0).unwrap();
    let path = cq.files().first().unwrap().path().to_path_buf();
    drop(cq);
    patch(&path, UNIT_SIZE, &(i64::MAX - 10).to_be_bytes());
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 16 * UNIT_SIZE);
    cq.load().unwrap();
    cq.recover().unwrap();
    assert_eq!(cq.max_physic_offset(), i64::MAX);
    cq.truncate_dirty(4096).unwrap();
    assert_eq!(cq.max_offset(), 1);
    assert_eq!(cq.max_physic_offset(), 100);
}

/// Regression (soak seed 3320, found once store times came from the
/// simulated clock): recovery's cut of units zeroed them in the page cache
/// only. Past the queue's new end no flush synced that range again, so a
/// later power loss brought the cut units back, and a recovery whose scan
/// started after them kept units pointing at other queues' records. The
/// cut is durable before recovery goes on.
#[test]
fn a_recovery_cut_of_units_is_durable_at_once() {
    let sim = basalt_disk::SimDisk::new(3320);
    let disk = basalt_disk::Disk::Sim(sim.handle());
    let root = Path::new("/cq");
    let cq = ConsumeQueue::new_on(&disk, root, "T", 0, 16 * UNIT_SIZE);
    cq.load().unwrap();
    for i in 0..6 {
        cq.put_unit(i, unit(i * 100)).unwrap();
    }
    cq.flush(0).unwrap();
    let path = cq.files().first().unwrap().path().to_path_buf();
    disk.sync_dir(path.parent().unwrap()).unwrap();
    let slot = |n: usize| {
        let on_device = sim.durable_contents(&path).unwrap();
        on_device[n * UNIT_SIZE..(n + 1) * UNIT_SIZE].to_vec()
    };
    assert_ne!(slot(4), vec![0; UNIT_SIZE]);
    // An abnormal recovery re-dispatching from offset 400 cuts units 4, 5.
    cq.truncate_dirty(400).unwrap();
    assert_eq!(cq.max_offset(), 4);
    assert_eq!(
        slot(4),
        vec![0; UNIT_SIZE],
        "the cut unit is still on the device"
    );
    assert_eq!(slot(5), vec![0; UNIT_SIZE]);
    assert_eq!(CqUnit::decode(&slot(3)), unit(300));
}

/// Regression (soak seeds 6915, 10339): a unit re-dispatched over zeros
/// (the recovery's durable cut) and torn by a power loss to a low physical
/// offset passed as a queue's first unit, and a recovery whose scan began
/// after it kept it. Re-dispatching the record of that queue offset then
/// found a unit "already present" and skipped the record: pulls returned
/// another record. Units that point below the record of their own queue
/// offset are torn and are replaced from the log.
#[test]
fn a_unit_pointing_below_the_record_of_its_offset_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let cq = ConsumeQueue::new(dir.path(), "T", 0, 16 * UNIT_SIZE);
    cq.load().unwrap();
    // The torn unit 0, then unit 1 after it.
    cq.put_unit(0, unit(0)).unwrap();
    cq.put_unit(1, unit(9000)).unwrap();
    let real = CqUnit {
        physical_offset: 8192,
        size: 687,
        tags_code: 1,
    };
    cq.truncate_dirty(8192).unwrap();
    assert_eq!(cq.max_offset(), 1, "the torn unit is kept by the cut");
    cq.put_unit(0, real).unwrap();
    assert_eq!(cq.unit_at(0), Some(real));
    assert_eq!(cq.max_offset(), 1);
    cq.put_unit(1, unit(9000)).unwrap();
    assert_eq!(cq.unit_at(1), Some(unit(9000)));
    assert_eq!(cq.max_physic_offset(), 9100);
}
