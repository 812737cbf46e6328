use std::path::{Path, PathBuf};

use super::*;

fn sim(seed: u64) -> (std::sync::Arc<SimDisk>, Disk) {
    let d = SimDisk::new(seed);
    let h = Disk::Sim(d.handle());
    h.create_dir_all_durable(Path::new("/s/log")).unwrap();
    (d, h)
}

fn seg_path() -> PathBuf {
    PathBuf::from("/s/log/00000000000000000000")
}

#[test]
fn real_segment_write_sync_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("seg");
    let disk = Disk::Real;
    let (mut seg, fresh) = disk
        .create_segment(
            &p,
            8192,
            8192,
            SegmentOptions {
                keep_fd: true,
                random_access: false,
            },
        )
        .unwrap();
    assert!(fresh);
    seg.write(100, b"hello");
    seg.sync_range(100, 105).unwrap();
    disk.sync_dir(dir.path()).unwrap();
    drop(seg);
    let mut again = disk.open_segment(&p, SegmentOptions::default()).unwrap();
    assert_eq!(again.len(), 8192);
    assert_eq!(again.read(100, 5), b"hello");
    assert_eq!(disk.file_len(&p).unwrap(), Some(8192));
    assert!(disk.remove_file(&p).unwrap());
    assert!(!disk.remove_file(&p).unwrap());
}

#[test]
fn real_atomic_replace_and_listing() {
    let dir = tempfile::tempdir().unwrap();
    let disk = Disk::Real;
    let p = dir.path().join("meta");
    disk.atomic_replace(&p, b"one").unwrap();
    disk.atomic_replace(&p, b"two").unwrap();
    assert_eq!(disk.read_file(&p).unwrap().as_deref(), Some(&b"two"[..]));
    assert_eq!(disk.read_file(&dir.path().join("none")).unwrap(), None);
    let names: Vec<String> = disk
        .list_dir(dir.path())
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec!["meta".to_string()]);
}

#[test]
fn synced_bytes_survive_power_loss_unsynced_may_not() {
    // Over many seeds: synced bytes always survive; an unsynced sector is
    // sometimes lost, sometimes kept, sometimes torn.
    let (mut lost, mut kept, mut torn) = (0, 0, 0);
    for seed in 0..200 {
        let (d, disk) = sim(seed);
        let (seg, _) = disk
            .create_segment(&seg_path(), 4096, 4096, SegmentOptions::default())
            .unwrap();
        disk.sync_dir(Path::new("/s/log")).unwrap();
        // SAFETY: this test is the only user of the segment.
        unsafe { seg.write_at(0, &[1u8; 512]) };
        seg.sync_range(0, 512).unwrap();
        // SAFETY: as above.
        unsafe { seg.write_at(512, &[2u8; 512]) };
        drop(seg);
        let after = Disk::Sim(d.power_loss());
        let bytes = after.read_file(&seg_path()).unwrap().unwrap();
        assert_eq!(
            &bytes[..512],
            &[1u8; 512][..],
            "seed {seed}: synced sector changed"
        );
        let s = &bytes[512..1024];
        if s.iter().all(|b| *b == 0) {
            lost += 1;
        } else if s.iter().all(|b| *b == 2) {
            kept += 1;
        } else {
            torn += 1;
        }
    }
    assert!(
        lost > 0 && kept > 0 && torn > 0,
        "lost {lost} kept {kept} torn {torn}"
    );
}

#[test]
fn a_later_sector_can_survive_an_earlier_lost_one() {
    let found = (0..200).any(|seed| {
        let (d, disk) = sim(seed);
        let (seg, _) = disk
            .create_segment(&seg_path(), 4096, 4096, SegmentOptions::default())
            .unwrap();
        disk.sync_dir(Path::new("/s/log")).unwrap();
        // SAFETY: sole user.
        unsafe { seg.write_at(0, &[7u8; 2048]) };
        drop(seg);
        let after = Disk::Sim(d.power_loss());
        let b = after.read_file(&seg_path()).unwrap().unwrap();
        b[..512].iter().all(|x| *x == 0) && b[1536..2048].iter().all(|x| *x == 7)
    });
    assert!(
        found,
        "out-of-order persistence never happened in 200 seeds"
    );
}

#[test]
fn unsynced_directory_entries_can_vanish() {
    let mut vanished = 0;
    for seed in 0..50 {
        let (d, disk) = sim(seed);
        let (seg, _) = disk
            .create_segment(&seg_path(), 4096, 0, SegmentOptions::default())
            .unwrap();
        seg.sync_all().unwrap();
        drop(seg);
        let after = Disk::Sim(d.power_loss());
        if !after.exists(&seg_path()) {
            vanished += 1;
        }
    }
    assert!(vanished > 0 && vanished < 50, "vanished {vanished}/50");
}

#[test]
fn atomic_replace_is_old_or_new_after_power_loss() {
    for seed in 0..100 {
        let (d, disk) = sim(seed);
        let p = Path::new("/s/checkpoint");
        disk.atomic_replace(p, b"old").unwrap();
        disk.atomic_replace(p, b"new!").unwrap();
        let after = Disk::Sim(d.power_loss());
        assert_eq!(
            after.read_file(p).unwrap().as_deref(),
            Some(&b"new!"[..]),
            "seed {seed}"
        );
    }
}

#[test]
fn dead_handles_fail_and_do_not_touch_the_device() {
    let (d, disk) = sim(1);
    let (seg, _) = disk
        .create_segment(&seg_path(), 4096, 0, SegmentOptions::default())
        .unwrap();
    disk.sync_dir(Path::new("/s/log")).unwrap();
    let fresh = Disk::Sim(d.power_loss());
    // SAFETY: sole user; the buffer is the dead process's page cache.
    unsafe { seg.write_at(0, b"zombie") };
    assert!(seg.sync_range(0, 6).is_err());
    assert!(disk.atomic_replace(Path::new("/s/x"), b"x").is_err());
    let b = fresh.read_file(&seg_path()).unwrap().unwrap();
    assert_eq!(&b[..6], &[0u8; 6]);
}

#[test]
fn faults_are_injected() {
    let (d, disk) = sim(3);
    d.fail_syncs_under(Path::new("/s/log"));
    let (seg, _) = disk
        .create_segment(&seg_path(), 4096, 0, SegmentOptions::default())
        .unwrap();
    assert!(seg.sync_all().is_err());
    d.clear_dir_faults();
    seg.sync_all().unwrap();
    d.fill_disk_under(Path::new("/s"));
    let e = disk
        .create_segment(
            Path::new("/s/log/00000000000000004096"),
            4096,
            4096,
            SegmentOptions::default(),
        )
        .unwrap_err();
    assert!(matches!(e, DiskError::NoSpace { .. }), "{e}");
    assert!(
        !disk.exists(Path::new("/s/log/00000000000000004096")),
        "half-made file left"
    );
    assert!(disk.atomic_replace(Path::new("/s/meta"), b"x").is_err());
    d.clear_dir_faults();
    d.set_faults(SimFaults {
        fsync_fail_one_in: 2,
        ..SimFaults::default()
    });
    let failures = (0..100).filter(|_| seg.sync_all().is_err()).count();
    assert!((20..80).contains(&failures), "{failures}");
    assert_eq!(d.stats().failed_syncs as usize, failures + 1);
}

#[test]
fn bit_flips_on_read_are_recorded() {
    let (d, disk) = sim(4);
    let (seg, _) = disk
        .create_segment(&seg_path(), 4096, 0, SegmentOptions::default())
        .unwrap();
    disk.sync_dir(Path::new("/s/log")).unwrap();
    // SAFETY: sole user.
    unsafe { seg.write_at(0, &[0xAAu8; 1000]) };
    seg.sync_all().unwrap();
    drop(seg);
    d.set_faults(SimFaults {
        read_flip_one_in: 1,
        ..SimFaults::default()
    });
    let mut seg = disk
        .open_segment(&seg_path(), SegmentOptions::default())
        .unwrap();
    let flips = d.stats().flips;
    assert_eq!(flips.len(), 1);
    let (path, at) = &flips[0];
    assert_eq!(path, &seg_path());
    assert!(*at < 1000);
    assert_ne!(seg.read(*at, 1)[0], 0xAA);
}

#[test]
fn skipped_syncs_make_nothing_durable() {
    let (d, disk) = sim(5);
    d.skip_syncs_of("log/");
    let (seg, _) = disk
        .create_segment(&seg_path(), 4096, 0, SegmentOptions::default())
        .unwrap();
    disk.sync_dir(Path::new("/s/log")).unwrap();
    // SAFETY: sole user.
    unsafe { seg.write_at(0, &[9u8; 4096]) };
    seg.sync_all().unwrap();
    assert_eq!(d.durable_contents(&seg_path()).unwrap(), vec![0u8; 4096]);
}

#[test]
fn removal_is_durable_only_after_the_directory_sync() {
    let (d, disk) = sim(6);
    disk.atomic_replace(Path::new("/s/log/a"), b"a").unwrap();
    assert!(disk.remove_file(Path::new("/s/log/a")).unwrap());
    disk.sync_dir(Path::new("/s/log")).unwrap();
    let after = Disk::Sim(d.power_loss());
    assert!(!after.exists(Path::new("/s/log/a")));
    assert!(after.remove_dir(Path::new("/s"), true).unwrap());
    assert!(after.list_dir(Path::new("/s")).is_err());
}

#[test]
fn a_punched_hole_reads_as_zeros_and_is_durable_only_after_sync_file() {
    // Real disk: the hole reads as zeros at once, through the mapping.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("seg");
    let (mut seg, _) = Disk::Real
        .create_segment(&p, 8192, 8192, SegmentOptions::default())
        .unwrap();
    seg.write(0, &[7u8; 8192]);
    seg.sync_file().unwrap();
    // SAFETY: the segment is held exclusively here.
    let _ = unsafe { seg.punch_hole(4096) }.unwrap();
    assert_eq!(seg.read(4095, 2), &[7, 0]);

    // Simulated disk: an unsynced punch may be lost; after sync_file it is not.
    let (d, disk) = sim(3);
    let (mut seg, _) = disk
        .create_segment(&seg_path(), 4096, 4096, SegmentOptions::default())
        .unwrap();
    seg.write(0, &[9u8; 4096]);
    seg.sync_file().unwrap();
    disk.sync_dir(Path::new("/s/log")).unwrap();
    // SAFETY: the segment is held exclusively here.
    assert!(unsafe { seg.punch_hole(1024) }.unwrap());
    assert_eq!(seg.read(1023, 2), &[9, 0]);
    assert_eq!(d.durable_contents(&seg_path()).unwrap()[2048], 9);
    seg.sync_file().unwrap();
    assert_eq!(d.durable_contents(&seg_path()).unwrap()[2048], 0);
}

/// Issue 12: with per-file draws, which syncs of a file fail does not
/// depend on the syncs of other files made in between (another thread's),
/// so the store simulator replays whatever its threads' interleaving.
#[test]
fn per_file_sync_faults_do_not_depend_on_other_files_syncs() {
    let outcomes = |interleave: bool| {
        let (d, disk) = sim(11);
        d.set_fault_draws(FaultDraws::PerFile);
        d.set_faults(SimFaults {
            fsync_fail_one_in: 3,
            ..SimFaults::default()
        });
        let (seg, _) = disk
            .create_segment(&seg_path(), 4096, 0, SegmentOptions::default())
            .unwrap();
        (0..60)
            .map(|_| {
                if interleave {
                    let _ = disk.sync_dir(Path::new("/s/log"));
                    let _ = disk.sync_dir(Path::new("/s"));
                }
                seg.sync_all().is_ok()
            })
            .collect::<Vec<bool>>()
    };
    let alone = outcomes(false);
    assert_eq!(alone, outcomes(true));
    let failed = alone.iter().filter(|ok| !**ok).count();
    assert!((8..35).contains(&failed), "{failed} of 60 at one in 3");
}

/// The shared stream, by contrast, gives the file other draws when other
/// syncs come in between: why the store simulator does not use it.
#[test]
fn shared_sync_faults_shift_with_other_files_syncs() {
    let outcomes = |interleave: bool| {
        let (d, disk) = sim(11);
        d.set_faults(SimFaults {
            fsync_fail_one_in: 3,
            ..SimFaults::default()
        });
        let (seg, _) = disk
            .create_segment(&seg_path(), 4096, 0, SegmentOptions::default())
            .unwrap();
        (0..60)
            .map(|_| {
                if interleave {
                    let _ = disk.sync_dir(Path::new("/s/log"));
                }
                seg.sync_all().is_ok()
            })
            .collect::<Vec<bool>>()
    };
    assert_ne!(outcomes(false), outcomes(true));
}

#[test]
fn the_simulated_clock_moves_only_when_told() {
    let (d, disk) = sim(1);
    let t0 = disk.now_millis();
    assert_eq!(t0, 1_767_225_600_000);
    assert_eq!(disk.now_millis(), t0);
    d.advance_clock(250);
    assert_eq!(disk.now_millis(), t0 + 250);
    // It survives a power loss: time goes on for the next process.
    let after = Disk::Sim(d.power_loss());
    assert_eq!(after.now_millis(), t0 + 250);
    assert!(Disk::Real.now_millis() > 1_600_000_000_000);
}
