use super::*;
use proptest::prelude::*;

fn journal_of(batches: &[&[&[u8]]]) -> Vec<u8> {
    batches.iter().flat_map(|b| encode_frame(b)).collect()
}

fn bodies<'a>(d: &DecodedJournal<'a>) -> Vec<&'a [u8]> {
    d.entries.iter().map(|(_, e)| *e).collect()
}

#[test]
fn frames_decode_to_their_entries() {
    let bytes = journal_of(&[&[b"a", b"bc"], &[b""], &[b"def"]]);
    let d = decode_journal(&bytes).unwrap();
    assert_eq!(bodies(&d), vec![&b"a"[..], b"bc", b"", b"def"]);
    assert_eq!(d.valid_len, bytes.len() as u64);
    assert_eq!(decode_journal(&[]).unwrap().entries.len(), 0);
}

#[test]
fn a_torn_tail_is_ignored() {
    let whole = journal_of(&[&[b"one"], &[b"two", b"three"]]);
    let first = encode_frame(&[b"one"]).len();
    // Every cut inside the second frame keeps the first frame only.
    for cut in first + 1..whole.len() {
        let d = decode_journal(&whole[..cut]).unwrap();
        assert_eq!(bodies(&d), vec![&b"one"[..]], "cut at {cut}");
        assert_eq!(d.valid_len, first as u64);
        assert!(d.torn(cut as u64));
    }
    // The last frame complete in length but with a flipped byte: torn too.
    let mut bad = whole.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(bodies(&decode_journal(&bad).unwrap()), vec![&b"one"[..]]);
    // Zeros the file system allocated past the last frame.
    let mut zeros = whole.clone();
    zeros.extend_from_slice(&[0; 100]);
    let d = decode_journal(&zeros).unwrap();
    assert_eq!(d.entries.len(), 3);
    assert_eq!(d.valid_len, whole.len() as u64);
}

#[test]
fn damage_before_the_tail_is_refused_with_its_offset() {
    let first = encode_frame(&[b"one"]);
    let mut bytes = journal_of(&[&[b"one"], &[b"two"], &[b"three"]]);
    // Flip a payload byte of the second frame: a valid frame follows it.
    let second_at = first.len();
    bytes[second_at + FRAME_HEADER + 5] ^= 0x40;
    let err = decode_journal(&bytes).unwrap_err();
    assert_eq!(err.offset, second_at as u64);
    assert_eq!(err.reason, "CRC mismatch");
}

#[test]
fn a_damaged_file_names_itself_and_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.journal");
    let mut bytes = journal_of(&[&[b"one"], &[b"two"]]);
    bytes[FRAME_HEADER + 5] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let err = JournalFile::open(&path).unwrap_err().to_string();
    assert!(err.contains("t.journal"), "{err}");
    assert!(err.contains("offset 0"), "{err}");
}

#[test]
fn append_overwrites_a_torn_tail_and_clear_empties() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.journal");
    {
        let (mut j, entries) = JournalFile::open(&path).unwrap();
        assert!(entries.is_empty() && j.is_empty());
        j.append(&[b"a", b"b"]).unwrap();
        j.append(&[b"c"]).unwrap();
    }
    // A crash in the middle of a third frame.
    let mut bytes = std::fs::read(&path).unwrap();
    let torn = encode_frame(&[b"lost"]);
    bytes.extend_from_slice(&torn[..torn.len() - 2]);
    std::fs::write(&path, &bytes).unwrap();
    let (mut j, entries) = JournalFile::open(&path).unwrap();
    let bodies: Vec<Vec<u8>> = entries.into_iter().map(|(_, e)| e).collect();
    assert_eq!(bodies, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    j.append(&[b"dd"]).unwrap();
    drop(j);
    let (mut j, entries) = JournalFile::open(&path).unwrap();
    assert_eq!(entries.last().unwrap().1, b"dd");
    assert_eq!(entries.len(), 4);
    j.clear().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    let (_, entries) = JournalFile::open(&path).unwrap();
    assert!(entries.is_empty());
}

fn batches() -> impl Strategy<Value = Vec<Vec<Vec<u8>>>> {
    let entry = prop::collection::vec(any::<u8>(), 0..40);
    prop::collection::vec(prop::collection::vec(entry, 1..5), 0..6)
}

proptest! {
    #[test]
    fn codec_round_trips(batches in batches()) {
        let bytes: Vec<u8> = batches.iter().flat_map(|b| encode_frame(b)).collect();
        let d = decode_journal(&bytes).unwrap();
        let want: Vec<&[u8]> = batches.iter().flatten().map(|e| e.as_slice()).collect();
        prop_assert_eq!(bodies(&d), want);
        prop_assert_eq!(d.valid_len, bytes.len() as u64);
    }

    /// Any cut of a valid journal decodes to a prefix of its entries.
    #[test]
    fn any_cut_decodes_to_a_prefix(batches in batches(), cut in any::<prop::sample::Index>()) {
        let bytes: Vec<u8> = batches.iter().flat_map(|b| encode_frame(b)).collect();
        let cut = cut.index(bytes.len() + 1);
        let d = decode_journal(&bytes[..cut]).unwrap();
        let want: Vec<&[u8]> = batches.iter().flatten().map(|e| e.as_slice()).collect();
        prop_assert!(want.starts_with(&bodies(&d)));
    }

    #[test]
    fn fuzz_body_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..300)) {
        fuzzing::journal_decode(&data);
    }

    #[test]
    fn fuzz_body_on_mutated_journals(batches in batches(), at in any::<prop::sample::Index>(), x in 1u8..) {
        let mut bytes: Vec<u8> = batches.iter().flat_map(|b| encode_frame(b)).collect();
        if !bytes.is_empty() {
            let i = at.index(bytes.len());
            bytes[i] ^= x;
        }
        fuzzing::journal_decode(&bytes);
    }
}
