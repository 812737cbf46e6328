//! The entry header's own CRC (kept in DLedger's unused `chainCrc`) and the
//! checkpoint's header-CRC rule: a torn header is damage even when every field
//! the scan's continuity checks look at is intact, and a DLedger log written
//! without header CRCs still opens.

mod common;

use std::path::{Path, PathBuf};

use basalt_ledger::core::LogRead;
use basalt_ledger::entry::{EntryHeader, EntryKind, HEADER_CRC_OFFSET, HEADER_SIZE, place};
use basalt_ledger::store::{LedgerStore, check_ledger_dir};
use common::{DATA, open_refused, opts, poke};

/// Offset of the term inside an entry header.
const TERM_OFFSET: u64 = 16;

/// Appends no-ops `from..to` of term `term` (no body, so no body CRC either:
/// the header is all there is to check, as in soak seed 12080).
fn append_noops(store: &mut LedgerStore, from: i64, to: i64, term: i64) {
    for i in from..to {
        let pos = place(store.end_pos(), HEADER_SIZE as i64, DATA).unwrap();
        let h = EntryHeader::new(EntryKind::Noop, i, term, pos, b"");
        store.append(&[(h, b"")]).unwrap();
    }
}

/// A store of no-ops 0..40 of term 1, synced, with a checkpoint claiming
/// `claimed`.
fn store_with_checkpoint(dir: &Path, claimed: i64) -> LedgerStore {
    let (mut s, _) = LedgerStore::open(opts(dir)).unwrap();
    append_noops(&mut s, 0, 40, 1);
    s.prepare_sync().run().unwrap();
    s.prepare_checkpoint(claimed, claimed).run().unwrap();
    s
}

/// The data file holding `pos` and the offset of `pos` in it.
fn spot(dir: &Path, pos: i64) -> (PathBuf, u64) {
    let file = dir
        .join("data")
        .join(format!("{:020}", (pos / DATA) * DATA));
    (file, (pos % DATA) as u64)
}

fn pos_of(s: &LedgerStore, index: i64) -> i64 {
    s.entry(index).unwrap().unwrap().pos()
}

#[test]
fn every_written_header_carries_its_crc() {
    let dir = tempfile::tempdir().unwrap();
    let s = store_with_checkpoint(dir.path(), 39);
    let (file, off) = spot(dir.path(), pos_of(&s, 7));
    let bytes = std::fs::read(file).unwrap();
    let h = EntryHeader::decode(&bytes[off as usize..off as usize + HEADER_SIZE]).unwrap();
    assert_ne!(h.chain_crc, 0);
    assert_eq!(h.chain_crc, h.header_crc());
    let text = std::fs::read_to_string(dir.path().join("checkpoint")).unwrap();
    assert!(text.contains("headerCrcFrom=0"), "{text}");
}

/// Soak seed 12080: a power loss tore an unsynced no-op's header inside its
/// sector, zeroing its term; before header CRCs recovery kept the entry with
/// term 0. Both shapes of the tear (the CRC zeroed with the term, or kept)
/// are now damage past the durable point, and are cut.
#[test]
fn a_torn_header_that_zeroes_the_term_past_the_durable_point_is_cut() {
    for zero_crc_too in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let s = store_with_checkpoint(dir.path(), 29);
        let pos = pos_of(&s, 35);
        let (file, off) = spot(dir.path(), pos);
        poke(&file, off + TERM_OFFSET, &[0u8; 8]);
        if zero_crc_too {
            poke(&file, off + HEADER_CRC_OFFSET as u64, &[0u8; 4]);
        }
        drop(s);
        let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
        assert_eq!(s.end_index(), 34, "zero_crc_too={zero_crc_too}");
        let (cut_pos, reason) = rec.cut.clone().unwrap();
        assert_eq!(cut_pos, pos);
        let want = if zero_crc_too {
            "without its CRC"
        } else {
            "header CRC mismatch"
        };
        assert!(reason.contains(want), "{reason}");
        drop(s);
        let report = check_ledger_dir(dir.path()).unwrap();
        assert_eq!(report.first_bad, None, "{report:?}");
        assert_eq!(report.last_index, 34);
    }
}

#[test]
fn a_header_without_its_crc_inside_the_durable_region_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = store_with_checkpoint(dir.path(), 39);
    let pos = pos_of(&s, 36);
    let (file, off) = spot(dir.path(), pos);
    poke(&file, off + HEADER_CRC_OFFSET as u64, &[0u8; 4]);
    drop(s);
    let report = check_ledger_dir(dir.path()).unwrap();
    let bad = report.first_bad.clone().unwrap();
    assert_eq!((bad.path.clone(), bad.offset), (file.clone(), off));
    let (path, offset, reason) = open_refused(dir.path());
    assert_eq!((path, offset), (file, off));
    assert!(reason.contains("without its CRC"), "{reason}");
}

/// A log written by DLedger (every `chainCrc` 0, a checkpoint without the
/// rule) opens whole; the rule then starts where this store's own entries
/// start, and covers them.
#[test]
fn a_log_without_header_crcs_opens_and_the_rule_starts_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let s = store_with_checkpoint(dir.path(), 39);
    let positions: Vec<i64> = (0..40).map(|i| pos_of(&s, i)).collect();
    let end = s.end_pos();
    drop(s);
    for pos in &positions {
        let (file, off) = spot(dir.path(), *pos);
        poke(&file, off + HEADER_CRC_OFFSET as u64, &[0u8; 4]);
    }
    std::fs::write(
        dir.path().join("checkpoint"),
        "endIndex=39\ncommittedIndex=39\n",
    )
    .unwrap();

    let (mut s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!((s.end_index(), rec.cut.clone()), (39, None));
    let text = std::fs::read_to_string(dir.path().join("checkpoint")).unwrap();
    assert!(text.contains(&format!("headerCrcFrom={end}")), "{text}");
    assert!(text.contains("endIndex=39"), "the claim is kept: {text}");
    // A new entry under the rule, torn to no CRC, is damage; the old ones are not.
    append_noops(&mut s, 40, 42, 2);
    s.prepare_sync().run().unwrap();
    let pos = pos_of(&s, 41);
    drop(s);
    let (file, off) = spot(dir.path(), pos);
    poke(&file, off + HEADER_CRC_OFFSET as u64, &[0u8; 4]);
    let (s, rec) = LedgerStore::open(opts(dir.path())).unwrap();
    assert_eq!(s.end_index(), 40);
    assert_eq!(rec.cut.map(|c| c.0), Some(pos));
}
