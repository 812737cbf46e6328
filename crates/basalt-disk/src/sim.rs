//! The simulated disk: a file system in memory that keeps what a process
//! sees (its page cache) apart from what the device holds (the durable
//! image), and loses, keeps or tears unsynced sectors at a power loss.
//!
//! * Contents: every write lands in the page cache. Only a sync of a range
//!   copies it into the durable image.
//! * Names: creating, removing and renaming change the live namespace; only
//!   a sync of the parent directory makes the change durable.
//! * [`SimDisk::power_loss`] decides, per unsynced sector, lost / kept /
//!   torn (new bytes up to a random split, old after, or the reverse), and,
//!   per unsynced name, whether it reached the device; then the live state is
//!   rebuilt from the device and the handles of the dead "process" stop
//!   working (every operation fails with EIO).
//! * Faults, all drawn from the seeded RNG: failed syncs (EIO), full disk
//!   (ENOSPC), a flipped bit when a segment is read back from the device.
//!   Failing syncs or a full disk can also be set per directory.
//!
//! Everything is deterministic for a seed as long as the caller's sequence
//! of operations is. With [`FaultDraws::PerFile`] failed syncs need less:
//! only each file's own sequence of syncs (see [`draws`]).
//!
//! The disk also keeps a simulated clock ([`SimDisk::now_millis`]), which
//! the store reads through [`crate::Disk::now_millis`] for its timestamps,
//! so that store times (and what depends on them) replay with a seed.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{DiskError, DiskResult};
pub use draws::FaultDraws;
use draws::PerFileDraws;

/// Sector size: the unit a power loss keeps, loses or tears.
pub const SECTOR: usize = 512;

/// Probabilities of random faults, as "one in N" (0: never).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimFaults {
    /// A sync (of a segment, a directory or an atomic replace) fails with EIO.
    pub fsync_fail_one_in: u32,
    /// A block reservation or atomic replace fails with ENOSPC.
    pub no_space_one_in: u32,
    /// Random ENOSPC only for paths containing this ("" : every path).
    pub no_space_in: &'static str,
    /// Opening a segment reads one flipped bit within its written extent.
    pub read_flip_one_in: u32,
}

/// What the simulated disk has done, for the simulator's checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    pub syncs: u64,
    pub failed_syncs: u64,
    pub no_space: u64,
    pub power_losses: u64,
    /// Bits flipped on read: (file, byte offset).
    pub flips: Vec<(PathBuf, usize)>,
}

/// Heap memory standing in for a file's page cache. The pointer is fixed
/// for the buffer's life; access discipline is the segment's.
pub(crate) struct SimBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: owns its allocation; concurrent access follows the segment
// contracts (single writer, no reader of bytes being written).
unsafe impl Send for SimBuf {}
// SAFETY: as for Send above.
unsafe impl Sync for SimBuf {}

impl SimBuf {
    fn from_bytes(bytes: &[u8]) -> Arc<SimBuf> {
        let boxed: Box<[u8]> = bytes.to_vec().into_boxed_slice();
        let len = boxed.len();
        let ptr = Box::into_raw(boxed) as *mut u8;
        Arc::new(SimBuf { ptr, len })
    }

    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// # Safety
    /// No thread writes the buffer while the slice lives.
    unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: the allocation is `len` bytes; no writer, per the contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for SimBuf {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: `ptr`/`len` came from `Box::into_raw` of a boxed slice of
        // exactly this length, and are freed once, here.
        drop(unsafe { Box::from_raw(slice) });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Dir,
    File(u64),
}

struct Inode {
    cache: Arc<SimBuf>,
    durable: Vec<u8>,
    reserved: usize,
}

struct SimState {
    generation: u64,
    rng: StdRng,
    faults: SimFaults,
    draws: FaultDraws,
    per_file: PerFileDraws,
    next_ino: u64,
    inodes: HashMap<u64, Inode>,
    live: BTreeMap<PathBuf, Node>,
    durable: BTreeMap<PathBuf, Node>,
    failing_sync_dirs: Vec<PathBuf>,
    full_dirs: Vec<PathBuf>,
    /// Test switch: syncs of files whose path contains one of these report
    /// success and make nothing durable (a "forgotten fsync").
    skipped_sync: Vec<String>,
    stats: SimStats,
}

/// The simulated disk shared by the simulator and the stores running on it.
/// See the module documentation.
pub struct SimDisk {
    state: Mutex<SimState>,
    /// The simulated clock, ms since the epoch; moves only when told to.
    clock_ms: AtomicI64,
}

/// A running process's view of the simulated disk. After a power loss the
/// old handles are dead: every operation through them fails with EIO.
#[derive(Clone)]
pub struct SimHandle {
    disk: Arc<SimDisk>,
    generation: u64,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimHandle(generation {})", self.generation)
    }
}

fn one_in(rng: &mut StdRng, n: u32) -> bool {
    n != 0 && rng.random_range(0..n) == 0
}

fn parent(path: &Path) -> PathBuf {
    path.parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"))
}

impl SimDisk {
    /// An empty disk whose random choices all come from `seed`.
    pub fn new(seed: u64) -> Arc<SimDisk> {
        Arc::new(SimDisk {
            state: Mutex::new(SimState {
                generation: 0,
                rng: StdRng::seed_from_u64(seed),
                faults: SimFaults::default(),
                draws: FaultDraws::Shared,
                per_file: PerFileDraws::new(seed),
                next_ino: 1,
                inodes: HashMap::new(),
                live: BTreeMap::new(),
                durable: BTreeMap::new(),
                failing_sync_dirs: Vec::new(),
                full_dirs: Vec::new(),
                skipped_sync: Vec::new(),
                stats: SimStats::default(),
            }),
            clock_ms: AtomicI64::new(draws::CLOCK_START_MS),
        })
    }

    /// How failed syncs are decided from now on (see [`FaultDraws`]).
    pub fn set_fault_draws(&self, draws: FaultDraws) {
        self.state.lock().draws = draws;
    }

    /// The simulated clock: ms since the Unix epoch. It starts at
    /// 2026-01-01T00:00:00Z and moves only by [`SimDisk::advance_clock`].
    pub fn now_millis(&self) -> i64 {
        self.clock_ms.load(Ordering::Acquire)
    }

    /// Moves the simulated clock forward by `ms`.
    pub fn advance_clock(&self, ms: i64) {
        self.clock_ms.fetch_add(ms.max(0), Ordering::AcqRel);
    }

    /// The handle of the process currently running on the disk.
    pub fn handle(self: &Arc<Self>) -> SimHandle {
        SimHandle {
            disk: Arc::clone(self),
            generation: self.state.lock().generation,
        }
    }

    /// Sets the random fault rates.
    pub fn set_faults(&self, faults: SimFaults) {
        self.state.lock().faults = faults;
    }

    /// The random fault rates now.
    pub fn faults(&self) -> SimFaults {
        self.state.lock().faults
    }

    /// Every sync of a file or directory under `dir` fails with EIO.
    pub fn fail_syncs_under(&self, dir: &Path) {
        self.state.lock().failing_sync_dirs.push(dir.to_path_buf());
    }

    /// Reservations and replacements under `dir` fail with ENOSPC.
    pub fn fill_disk_under(&self, dir: &Path) {
        self.state.lock().full_dirs.push(dir.to_path_buf());
    }

    /// Removes the per-directory faults.
    pub fn clear_dir_faults(&self) {
        let mut st = self.state.lock();
        st.failing_sync_dirs.clear();
        st.full_dirs.clear();
    }

    /// Test switch: segment syncs of files whose path contains `pattern`
    /// report success and make nothing durable, as if the code had forgotten
    /// the call. For proving that the simulator catches a missing fsync.
    pub fn skip_syncs_of(&self, pattern: &str) {
        self.state.lock().skipped_sync.push(pattern.to_string());
    }

    /// A copy of the counters.
    pub fn stats(&self) -> SimStats {
        self.state.lock().stats.clone()
    }

    /// Paths whose live and durable entries differ now (unsynced name
    /// changes), for diagnostics.
    pub fn unsynced_names(&self) -> Vec<PathBuf> {
        let st = self.state.lock();
        let mut out: Vec<PathBuf> = st
            .live
            .keys()
            .chain(st.durable.keys())
            .filter(|k| st.live.get(*k) != st.durable.get(*k))
            .cloned()
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The durable bytes of `path` as the device holds them now, if the
    /// durable namespace has the file.
    pub fn durable_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.lock();
        match st.durable.get(path) {
            Some(Node::File(ino)) => st.inodes.get(ino).map(|i| i.durable.clone()),
            _ => None,
        }
    }

    /// Flips bit `bit` of byte `offset` of `path` on the device and in the
    /// page cache (latent corruption). Only when no process writes the file.
    pub fn corrupt(&self, path: &Path, offset: usize, bit: u8) -> bool {
        let mut st = self.state.lock();
        let Some(Node::File(ino)) = st.live.get(path).copied() else {
            return false;
        };
        let Some(inode) = st.inodes.get_mut(&ino) else {
            return false;
        };
        if offset >= inode.durable.len() {
            return false;
        }
        inode.durable[offset] ^= 1 << (bit % 8);
        // SAFETY: in bounds; the caller guarantees no process writes the file.
        unsafe { *inode.cache.ptr().add(offset) ^= 1 << (bit % 8) };
        st.stats.flips.push((path.to_path_buf(), offset));
        true
    }

    /// Power loss. Decides the fate of every unsynced sector and name
    /// change, rebuilds the live state from the device and kills the old
    /// handles. Returns the handle for the restarted process.
    ///
    /// No thread may write through a segment of this disk during the call
    /// (the simulator calls it between operations, with the store idle).
    pub fn power_loss(self: &Arc<Self>) -> SimHandle {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        st.stats.power_losses += 1;
        let mut inos: Vec<u64> = st.inodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let Some(inode) = st.inodes.get_mut(&ino) else {
                continue;
            };
            // SAFETY: no writer runs during a power loss (documented above).
            let cache = unsafe { inode.cache.bytes() };
            settle_sectors(&mut st.rng, cache, &mut inode.durable);
        }
        let keys: Vec<PathBuf> = st.live.keys().chain(st.durable.keys()).cloned().collect();
        for k in keys {
            let (l, d) = (st.live.get(&k).copied(), st.durable.get(&k).copied());
            if l != d && st.rng.random_bool(0.5) {
                match l {
                    Some(n) => st.durable.insert(k, n),
                    None => st.durable.remove(&k),
                };
            }
        }
        prune_unreachable(&mut st.durable);
        let used: std::collections::HashSet<u64> = st
            .durable
            .values()
            .filter_map(|n| match n {
                Node::File(i) => Some(*i),
                Node::Dir => None,
            })
            .collect();
        st.inodes.retain(|i, _| used.contains(i));
        for inode in st.inodes.values_mut() {
            inode.cache = SimBuf::from_bytes(&inode.durable);
        }
        st.live = st.durable.clone();
        st.generation += 1;
        SimHandle {
            disk: Arc::clone(self),
            generation: st.generation,
        }
    }
}

/// Per sector that differs between `cache` and `durable`: lost, kept, or
/// torn at a random split.
fn settle_sectors(rng: &mut StdRng, cache: &[u8], durable: &mut [u8]) {
    let len = cache.len().min(durable.len());
    let mut at = 0;
    while at < len {
        let end = (at + SECTOR).min(len);
        if cache[at..end] != durable[at..end] {
            match rng.random_range(0..4u32) {
                0 => {}
                1 | 2 => durable[at..end].copy_from_slice(&cache[at..end]),
                _ => {
                    let split = at + rng.random_range(1..(end - at).max(2));
                    let split = split.min(end);
                    if rng.random_bool(0.5) {
                        durable[at..split].copy_from_slice(&cache[at..split]);
                    } else {
                        durable[split..end].copy_from_slice(&cache[split..end]);
                    }
                }
            }
        }
        at = end;
    }
}

/// Drops entries whose ancestors are not all directories.
fn prune_unreachable(names: &mut BTreeMap<PathBuf, Node>) {
    let snapshot = names.clone();
    names.retain(|p, _| {
        p.ancestors()
            .skip(1)
            .filter(|a| a.parent().is_some() && !a.as_os_str().is_empty())
            .all(|a| snapshot.get(a) == Some(&Node::Dir))
    });
}

impl SimState {
    fn alive(&self, h: &SimHandle, path: &Path) -> DiskResult<()> {
        if h.generation != self.generation {
            return Err(DiskError::eio(path));
        }
        Ok(())
    }

    fn dir_exists(&self, dir: &Path) -> bool {
        dir.parent().is_none()
            || dir.as_os_str().is_empty()
            || self.live.get(dir) == Some(&Node::Dir)
    }

    /// The sync faults for `path`: EIO when a failing directory holds it or
    /// the RNG says so.
    fn sync_fault(&mut self, path: &Path) -> DiskResult<()> {
        self.stats.syncs += 1;
        let failing = self.failing_sync_dirs.iter().any(|d| path.starts_with(d));
        let n = self.faults.fsync_fail_one_in;
        let drawn = match self.draws {
            FaultDraws::Shared => one_in(&mut self.rng, n),
            FaultDraws::PerFile => self.per_file.sync_fails(path, n),
        };
        if failing || drawn {
            self.stats.failed_syncs += 1;
            return Err(DiskError::eio(path));
        }
        Ok(())
    }

    fn space_fault(&mut self, path: &Path, bytes: u64) -> DiskResult<()> {
        let full = self.full_dirs.iter().any(|d| path.starts_with(d));
        let in_scope = path.to_string_lossy().contains(self.faults.no_space_in);
        if full || (in_scope && one_in(&mut self.rng, self.faults.no_space_one_in)) {
            self.stats.no_space += 1;
            return Err(DiskError::no_space(path, bytes));
        }
        Ok(())
    }

    fn sync_dir(&mut self, dir: &Path) -> DiskResult<()> {
        self.sync_fault(dir)?;
        let children: Vec<PathBuf> = self
            .live
            .keys()
            .chain(self.durable.keys())
            .filter(|p| p.parent() == Some(dir))
            .cloned()
            .collect();
        for c in children {
            match self.live.get(&c).copied() {
                Some(n) => self.durable.insert(c, n),
                None => self.durable.remove(&c),
            };
        }
        Ok(())
    }

    fn new_inode(&mut self, bytes: &[u8], durable_len: usize) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(
            ino,
            Inode {
                cache: SimBuf::from_bytes(bytes),
                durable: vec![0; durable_len],
                reserved: 0,
            },
        );
        ino
    }

    fn file(&self, path: &Path) -> DiskResult<u64> {
        match self.live.get(path) {
            Some(Node::File(ino)) => Ok(*ino),
            _ => Err(DiskError::not_found(path)),
        }
    }
}

pub mod draws;
mod ops;
