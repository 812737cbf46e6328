//! Times `LedgerStore` appends and syncs on the real disk: 200,000 entries of
//! 512 bytes in batches of 32, one sync per batch (see
//! docs/benchmarks-ledger-disk.md). `cargo run --release -p basalt-ledger
//! --example ledger_store_speed -- DIR` (DIR must not exist yet).

use std::error::Error;
use std::time::Instant;

use basalt_ledger::core::LogRead;
use basalt_ledger::entry::{EntryHeader, EntryKind, HEADER_SIZE, place};
use basalt_ledger::store::{LedgerStore, StoreOptions};

fn main() -> Result<(), Box<dyn Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: ledger_store_speed DIR")?;
    let data = 64 << 20;
    let opts = StoreOptions {
        dir: dir.into(),
        data_file_size: data,
        index_file_size: 32 << 20,
    };
    let (mut s, _) = LedgerStore::open(opts)?;
    let body = vec![7u8; 512];
    let (n, batch) = (200_000i64, 32);
    let t = Instant::now();
    let mut sync_ns = 0u128;
    for b in 0..n / batch {
        let mut headers = Vec::new();
        let mut end = s.end_pos();
        for k in 0..batch {
            let size = (HEADER_SIZE + body.len()) as i64;
            let pos = place(end, size, data)?;
            headers.push(EntryHeader::new(
                EntryKind::Normal,
                b * batch + k,
                1,
                pos,
                &body,
            ));
            end = pos + size;
        }
        let entries: Vec<_> = headers.iter().map(|h| (*h, &body[..])).collect();
        s.append(&entries)?;
        let ts = Instant::now();
        s.prepare_sync().run()?;
        sync_ns += ts.elapsed().as_nanos();
    }
    let total = t.elapsed().as_secs_f64();
    println!(
        "{n} appends of 512 B in batches of {batch}: {total:.3} s, {:.2} us/entry, sync {:.1} us/batch",
        total * 1e6 / n as f64,
        sync_ns as f64 / 1e3 / (n / batch) as f64
    );
    Ok(())
}
