//! `basalt store export-rocketmq SRC DEST` (or `SRC --in-place`): turns a
//! cleanly stopped Basalt store into one Apache RocketMQ 5 opens and serves
//! the same way, so an operator can roll back to the Java broker
//! (docs/storage-format.md#migrating-to-and-from-rocketmq).
//!
//! The store files are done by [`basalt_store::export`]; here the broker's
//! config files: topics.json's journal (Basalt only; RocketMQ reads
//! topics.json alone) is folded into topics.json and removed, and the
//! other tables RocketMQ reads are checked to parse. With DEST the source
//! is copied first (sparse files stay sparse) and left untouched.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use basalt_store::export::{StoreExport, make_rocketmq_readable};
use basalt_store::fs_util::{self, LockFile};

use crate::metadata::file::ConfigFile;
use crate::metadata::formats::TopicsFile;
use crate::metadata::formats::{parse_delay_offsets, parse_offset_table};
use crate::metadata::topic_journal::{replay_topics_journal, topics_journal_path};

/// Bytes copied per read; chunks that are all zeros are not written, so
/// the copy of a sparse file stays sparse.
const COPY_CHUNK: usize = 1 << 20;

/// What an export did.
#[derive(Debug)]
pub struct ExportReport {
    /// The store RocketMQ should open.
    pub root: PathBuf,
    /// Bytes written by the copy (0 in place).
    pub copied_bytes: u64,
    pub store: StoreExport,
    /// Topics in topics.json after the journal was folded in.
    pub topics: usize,
    /// Whether a non-empty journal was folded into topics.json.
    pub journal_folded: bool,
    /// Offset-table entries (`topic@group`) in consumerOffset.json.
    pub offset_entries: usize,
    /// Delay levels in delayOffset.json.
    pub delay_levels: usize,
}

impl std::fmt::Display for ExportReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "exported store: {}", self.root.display())?;
        if self.copied_bytes > 0 {
            writeln!(f, "copied {} bytes", self.copied_bytes)?;
        }
        writeln!(f, "{}", self.store)?;
        writeln!(
            f,
            "topics.json: {} topics{}; consumerOffset.json: {} topic@group entries; \
             delayOffset.json: {} levels",
            self.topics,
            if self.journal_folded {
                " (journal folded in)"
            } else {
                ""
            },
            self.offset_entries,
            self.delay_levels
        )?;
        write!(
            f,
            "start the RocketMQ broker with storePathRootDir={}",
            self.root.display()
        )
    }
}

/// Exports `src` to `dest` (a new or empty directory), or in place when
/// `dest` is `None`. Refuses a ledger-mode store, one that was not stopped
/// cleanly, one a broker holds, and any record that fails its checks.
pub fn export_rocketmq(src: &Path, dest: Option<&Path>) -> Result<ExportReport, String> {
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()));
    let src = &absolute(src)?;
    let dest = dest.map(absolute).transpose()?;
    let dest = dest.as_deref();
    if !src.join("commitlog").is_dir() {
        return Err(format!(
            "{} holds no commitlog/: not a classic store root",
            src.display()
        ));
    }
    if has_ledger(src)? {
        return Err(format!(
            "{} is a ledger-mode store (dledger-*/): RocketMQ's DLedger CommitLog is not exported",
            src.display()
        ));
    }
    let _src_lock = LockFile::acquire(&src.join("lock")).map_err(|e| e.to_string())?;
    if src.join("abort").exists() {
        return Err(format!(
            "{} was not stopped cleanly (abort is present): start Basalt on it once (it \
             recovers the store) and stop it, then export",
            src.display()
        ));
    }
    let mut copied_bytes = 0;
    let root = match dest {
        Some(d) => {
            prepare_dest(d)?;
            copied_bytes = copy_tree(src, d)?;
            d.to_path_buf()
        }
        None => src.to_path_buf(),
    };
    let _dest_lock = match dest {
        Some(d) => Some(LockFile::acquire(&d.join("lock")).map_err(|e| e.to_string())?),
        None => None,
    };
    let store = make_rocketmq_readable(&root).map_err(|e| e.to_string())?;
    let (topics, journal_folded) = fold_topics_journal(&root)?;
    let offsets = ConfigFile::new(&root, "consumerOffset.json").load(parse_offset_table);
    let delays = ConfigFile::new(&root, "delayOffset.json").load(parse_delay_offsets);
    Ok(ExportReport {
        root,
        copied_bytes,
        store,
        topics,
        journal_folded,
        offset_entries: offsets.map_or(0, |t| t.len()),
        delay_levels: delays.map_or(0, |t| t.len()),
    })
}

fn has_ledger(root: &Path) -> Result<bool, String> {
    let entries = std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    Ok(entries
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("dledger-")))
}

fn prepare_dest(dest: &Path) -> Result<(), String> {
    if dest.exists() {
        let mut entries =
            std::fs::read_dir(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
        if entries.next().is_some() {
            return Err(format!(
                "{} is not empty; give a new directory",
                dest.display()
            ));
        }
    }
    fs_util::create_dir_all_durable(dest).map_err(|e| e.to_string())
}

/// Copies `src` into `dest` recursively (not the lock file), keeping holes;
/// fsyncs every file and directory. Returns the bytes written.
fn copy_tree(src: &Path, dest: &Path) -> Result<u64, String> {
    let mut written = 0;
    let entries = std::fs::read_dir(src).map_err(|e| format!("{}: {e}", src.display()))?;
    for e in entries {
        let e = e.map_err(|e| format!("{}: {e}", src.display()))?;
        let name = e.file_name();
        let from = e.path();
        let to = dest.join(&name);
        let kind = e
            .file_type()
            .map_err(|e| format!("{}: {e}", from.display()))?;
        if kind.is_dir() {
            std::fs::create_dir_all(&to).map_err(|e| format!("{}: {e}", to.display()))?;
            written += copy_tree(&from, &to)?;
        } else if kind.is_file() && name != "lock" {
            written += copy_file(&from, &to)?;
        }
    }
    fs_util::fsync_dir(dest).map_err(|e| e.to_string())?;
    Ok(written)
}

fn copy_file(from: &Path, to: &Path) -> Result<u64, String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut src = File::open(from).map_err(|e| io(from, e))?;
    let len = src.metadata().map_err(|e| io(from, e))?.len();
    let out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)
        .map_err(|e| io(to, e))?;
    out.set_len(len).map_err(|e| io(to, e))?;
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut at = 0u64;
    let mut written = 0;
    loop {
        let n = src.read(&mut buf).map_err(|e| io(from, e))?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|b| *b != 0) {
            out.write_all_at(&buf[..n], at).map_err(|e| io(to, e))?;
            written += n as u64;
        }
        at += n as u64;
    }
    out.sync_all().map_err(|e| io(to, e))?;
    Ok(written)
}

/// Applies topics.json.journal to topics.json, writes topics.json and
/// removes the journal. Returns the topic count and whether the journal
/// held anything.
fn fold_topics_journal(root: &Path) -> Result<(usize, bool), String> {
    let file = ConfigFile::new(root, "topics.json");
    let loaded = file.load(TopicsFile::parse);
    let journal_path = topics_journal_path(root);
    let journal_len = std::fs::metadata(&journal_path).map_or(0, |m| m.len());
    let Some(mut table) = loaded.or_else(|| (journal_len > 0).then(TopicsFile::default)) else {
        return Ok((0, false));
    };
    if journal_len == 0 {
        let _ = std::fs::remove_file(&journal_path);
        return Ok((table.topic_config_table.len(), false));
    }
    let journal = replay_topics_journal(root, &mut table).map_err(|e| e.to_string())?;
    drop(journal);
    file.save(&table.render()).map_err(|e| e.to_string())?;
    std::fs::remove_file(&journal_path).map_err(|e| format!("{}: {e}", journal_path.display()))?;
    fs_util::fsync_dir(&root.join("config")).map_err(|e| e.to_string())?;
    Ok((table.topic_config_table.len(), true))
}
