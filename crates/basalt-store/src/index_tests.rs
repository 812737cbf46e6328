//! Index tests on the simulated disk (kept apart to keep the module short).

use super::*;

/// Two keys of one hash slot, the slot in the header's sector.
fn keys_sharing_a_slot(slot_num: usize) -> (String, String) {
    let slot = |k: &str| index_key_hash(&format!("T#{k}")) as usize % slot_num;
    let a = "a".to_string();
    let b = (0..)
        .map(|i| format!("b{i}"))
        .find(|b| slot(b) == slot(&a))
        .expect("a colliding key");
    assert!(HEADER_SIZE + slot(&a) * SLOT_SIZE < basalt_disk::sim::SECTOR);
    (a, b)
}

fn req<'a>(key: &'a str, phys: i64) -> IndexRequest<'a> {
    IndexRequest {
        topic: "T",
        physical_offset: phys,
        store_timestamp: 1_767_225_600_000 + phys,
        uniq_key: None,
        keys: Some(key),
    }
}

/// Regression (soak seed 18700, found once recovery scans started after
/// the first CommitLog file): a power loss kept the header sector of the
/// newest index file (its count and the slot pointing at a new entry) and
/// lost the entry's sector, so the slot's chain ended at a zeroed entry and
/// the fsynced entries behind it could no longer be found. Re-indexing the
/// re-dispatched region repaired only the keys it re-indexed; a key below
/// the scan's start stayed lost. Abnormal recovery now relinks the newest
/// file's chains over the entries that are intact.
#[test]
fn a_torn_index_entry_does_not_hide_the_fsynced_ones_behind_it() {
    let slot_num = 200;
    let (a, b) = keys_sharing_a_slot(slot_num);
    let dir = PathBuf::from("/idx");
    let torn = (0..256u64).find_map(|seed| {
        let sim = basalt_disk::SimDisk::new(seed);
        let disk = Disk::Sim(sim.handle());
        let svc = IndexService::new(dir.clone(), slot_num, 64).with_disk(disk);
        svc.load().unwrap();
        svc.build_index(&req(&a, 1000)).unwrap();
        svc.flush().unwrap();
        svc.build_index(&req(&b, 2000)).unwrap();
        let path = svc.files()[0].path().to_path_buf();
        let after = sim.power_loss();
        let raw = sim.durable_contents(&path).unwrap();
        let count = i32::from_be_bytes(raw[36..40].try_into().unwrap());
        let entry2 = HEADER_SIZE + slot_num * SLOT_SIZE + 2 * ENTRY_SIZE;
        let lost = raw[entry2..entry2 + ENTRY_SIZE].iter().all(|x| *x == 0);
        (count == 3 && lost).then_some(after)
    });
    let handle = torn.expect("a seed that keeps the header and loses the entry");
    let svc = IndexService::new(dir, slot_num, 64).with_disk(Disk::Sim(handle));
    svc.load().unwrap();
    // Abnormal recovery re-dispatching from 2000.
    svc.recover_after_crash(2000);
    svc.build_index(&req(&b, 2000)).unwrap();
    assert_eq!(svc.query_offsets("T", &b, 32, 0, i64::MAX), vec![2000]);
    assert_eq!(svc.query_offsets("T", &a, 32, 0, i64::MAX), vec![1000]);
}

/// Regression (fresh-clone CI, `crash::kill9_under_sync_flush_loses_no_acknowledged_message`):
/// a kill -9 between creating the newest index file and setting its length
/// left it 0 bytes, and the store refused to open ("index file is 0 bytes,
/// expected ..."). An empty index file holds nothing: it is dropped, the
/// files before it stay, and a new one is made for the next entry.
#[test]
fn an_index_file_left_empty_by_a_crash_during_its_creation_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("index");
    let svc = IndexService::new(idx.clone(), 200, 64);
    svc.load().unwrap();
    svc.build_index(&req("a", 1000)).unwrap();
    svc.flush().unwrap();
    let kept = svc.files()[0].path().to_path_buf();
    drop(svc);
    let empty = idx.join("99991231235959999");
    std::fs::write(&empty, b"").unwrap();

    let svc = IndexService::new(idx, 200, 64);
    svc.load().unwrap();
    assert!(!empty.exists(), "the empty file is removed");
    let files: Vec<_> = svc.files().iter().map(|f| f.path().to_path_buf()).collect();
    assert_eq!(files, vec![kept]);
    assert_eq!(svc.query_offsets("T", "a", 32, 0, i64::MAX), vec![1000]);
    svc.build_index(&req("b", 2000)).unwrap();
    assert_eq!(svc.query_offsets("T", "b", 32, 0, i64::MAX), vec![2000]);
}
