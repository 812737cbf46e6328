//! Bodies of the store's fuzz targets (crates/basalt-store/fuzz), shared with
//! a proptest so CI runs them without cargo-fuzz. Each must never panic.

use basalt_common::record::{RecordView, decode_all};

/// Record parsing as recovery, dispatch and clients do it.
pub fn record_parse(data: &[u8]) {
    if let Ok(v) = RecordView::parse(data, true) {
        assert!(v.total_size() <= data.len());
        let _ = v.property("TAGS");
        let _ = crate::dispatch::DispatchRequest::from_record(&v, &Default::default());
        let _ = basalt_common::properties::Properties::decode(v.properties);
    }
    let _ = decode_all(data, true);
    let _ = basalt_common::record::peek_head(data);
}

/// The recovery scan over arbitrary bytes taken as one CommitLog file, and
/// the search for valid records after damage.
pub fn scan_file(data: &[u8]) {
    let mut seen = 0usize;
    let stop = crate::recovery::scan_file(
        data,
        0,
        0,
        &crate::record_check::RecordCheck::crc_only(true),
        |v| {
            seen += v.total_size();
            Ok(())
        },
    );
    if let Ok(stop) = stop {
        let pos = match stop {
            crate::recovery::ScanStop::EndOfFile => data.len(),
            crate::recovery::ScanStop::Zeros { pos }
            | crate::recovery::ScanStop::Invalid { pos, .. } => pos,
        };
        assert!(pos <= data.len());
        let _ = crate::recovery::find_valid_record_in(data, 0, pos + 1, data.len());
    }
}

/// Checkpoint image decoding.
pub fn checkpoint_decode(data: &[u8]) {
    let _ = crate::checkpoint::decode(data);
}
