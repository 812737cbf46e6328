//! What `basalt store check` and `basalt store dump` read: a broker's store
//! root in either mode. A ledger-mode broker keeps its records in its ledger
//! (`dledger-{selfId}/`), stamped with the position of their entry's body as
//! their physical offset, and its CommitLog stays empty; there the
//! ConsumeQueue units are checked against the ledger's entries, and the
//! dump lists them.

use std::cell::Cell;
use std::fmt;
use std::path::{Path, PathBuf};

use basalt_common::record::RecordView;
use basalt_ledger::entry::EntryKind;
use basalt_ledger::{LedgerCheckReport, LedgerFilesView};
use basalt_store::check::{CheckReport, DumpLine, RecordLookup};

/// A ledger's entries as the records a ledger-mode broker's ConsumeQueue
/// units point at.
struct LedgerRecords {
    view: LedgerFilesView,
    /// Units that point at entries past the checkpoint's commit index. The
    /// member learned of their commit after its last checkpoint (entries are
    /// dispatched only once committed), so they are not damage.
    past_checkpoint: Cell<u64>,
}

impl RecordLookup for LedgerRecords {
    fn min_offset(&self) -> i64 {
        self.view.begin_pos()
    }
    fn end_offset(&self) -> i64 {
        self.view.end_pos()
    }
    fn record_at(&self, offset: i64) -> Result<RecordView<'_>, String> {
        let e = self.view.entry_with_body_at(offset)?;
        if e.kind != EntryKind::Normal {
            return Err(format!("ledger entry {} is a {:?} entry", e.index, e.kind));
        }
        let v = RecordView::parse(e.body, true)
            .map_err(|err| format!("ledger entry {} holds no valid record: {err}", e.index))?;
        if v.physical_offset != offset {
            return Err(format!(
                "ledger entry {} holds a record stamped with offset {}",
                e.index, v.physical_offset
            ));
        }
        if e.index > self.view.checkpoint_committed_index() {
            self.past_checkpoint.set(self.past_checkpoint.get() + 1);
        }
        Ok(v)
    }
}

/// Ledger directories (`dledger-*`) of a store root, sorted.
fn ledger_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.is_dir()
                        && p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("dledger-"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The ledger of a ledger-mode store root: None for a classic store, an
/// error when the root holds several (a broker keeps one).
pub fn ledger_of(root: &Path) -> Result<Option<PathBuf>, String> {
    let mut ledgers = ledger_dirs(root);
    match ledgers.len() {
        0 => Ok(None),
        1 => Ok(ledgers.pop()),
        _ => Err(format!(
            "{} holds several ledgers ({}); a broker keeps one",
            root.display(),
            ledgers
                .iter()
                .map(|l| l.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// What [`check_store_root`] found: the store's report and, in ledger mode,
/// the ledger's own.
#[derive(Debug)]
pub struct StoreRootCheck {
    pub store: CheckReport,
    /// The ledger directory and its report (ledger mode).
    pub ledger: Option<(PathBuf, LedgerCheckReport)>,
    /// Units pointing at entries committed after the ledger's checkpoint.
    pub units_past_checkpoint: u64,
    pub checkpoint_committed_index: i64,
}

impl StoreRootCheck {
    /// Neither the store nor its ledger is damaged.
    pub fn is_ok(&self) -> bool {
        self.store.is_ok() && self.ledger.as_ref().is_none_or(|(_, r)| r.is_ok())
    }
}

impl fmt::Display for StoreRootCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some((dir, ledger)) = &self.ledger else {
            return write!(f, "{}", self.store);
        };
        writeln!(f, "{}", self.store)?;
        if self.units_past_checkpoint > 0 {
            writeln!(
                f,
                "            {} units point at entries committed after the checkpoint (committedIndex {})",
                self.units_past_checkpoint, self.checkpoint_committed_index
            )?;
        }
        writeln!(f)?;
        writeln!(f, "ledger      {}", dir.display())?;
        writeln!(f, "{ledger}")?;
        write!(
            f,
            "store and ledger {}",
            if self.is_ok() { "OK" } else { "CORRUPT" }
        )
    }
}

/// Checks a broker's store root: every CommitLog record, every ConsumeQueue
/// unit against the record it points at (in the ledger, in ledger mode),
/// and the ledger's entries.
pub fn check_store_root(root: &Path, file_size: Option<usize>) -> Result<StoreRootCheck, String> {
    let ledger = ledger_of(root)?;
    if !root.join("commitlog").is_dir() && ledger.is_none() {
        return Err(format!(
            "{} has neither a commitlog/ nor a dledger-*/ directory",
            root.display()
        ));
    }
    let Some(ledger) = ledger else {
        let store = basalt_store::check::check_store(root, file_size).map_err(|e| e.to_string())?;
        return Ok(StoreRootCheck {
            store,
            ledger: None,
            units_past_checkpoint: 0,
            checkpoint_committed_index: -1,
        });
    };
    let records = LedgerRecords {
        view: LedgerFilesView::open(&ledger).map_err(|e| e.to_string())?,
        past_checkpoint: Cell::new(0),
    };
    let what = format!("the ledger's entries in {}", ledger.display());
    let store = basalt_store::check::check_store_over(root, file_size, Some((&records, &what)))
        .map_err(|e| e.to_string())?;
    let ledger_report = basalt_ledger::check_ledger_dir(&ledger).map_err(|e| e.to_string())?;
    Ok(StoreRootCheck {
        store,
        units_past_checkpoint: records.past_checkpoint.get(),
        checkpoint_committed_index: records.view.checkpoint_committed_index(),
        ledger: Some((ledger, ledger_report)),
    })
}

/// Lists records of a store root from physical offset `from`, at most
/// `limit`, calling `emit` for each line (in ledger mode, from the ledger's
/// entries). Returns how many records were listed.
pub fn dump_store_root(
    root: &Path,
    file_size: Option<usize>,
    from: Option<i64>,
    limit: usize,
    mut emit: impl FnMut(&str),
) -> Result<usize, String> {
    let Some(ledger) = ledger_of(root)? else {
        return basalt_store::check::dump_store(root, file_size, from, limit, |l| {
            emit(&l.to_string())
        })
        .map_err(|e| e.to_string());
    };
    let view = LedgerFilesView::open(&ledger).map_err(|e| e.to_string())?;
    let mut n = 0usize;
    let damage = view.for_each_entry(from.unwrap_or(0), |e| {
        if n >= limit {
            return false;
        }
        if e.kind != EntryKind::Normal {
            return true;
        }
        match RecordView::parse(e.body, false) {
            Ok(v) => emit(&DumpLine::of(&v, e.body.len()).to_string()),
            Err(err) => emit(&format!(
                "ledger entry {} holds no valid record: {err}",
                e.index
            )),
        }
        n += 1;
        true
    });
    if let Some((pos, why)) = damage {
        emit(&format!("the ledger's valid entries end at {pos}: {why}"));
    }
    Ok(n)
}
