//! The file operations of a process on the simulated disk.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::Rng;

use super::{Node, SimBuf, SimHandle, one_in, parent};
use crate::DirEntry;
use crate::error::{DiskError, DiskResult};
use crate::segment::Segment;

impl SimHandle {
    /// The disk this handle runs on.
    pub fn disk(&self) -> &Arc<super::SimDisk> {
        &self.disk
    }

    /// Whether the handle still belongs to the running process (no power
    /// loss since it was taken).
    pub fn is_alive(&self) -> bool {
        self.disk.state.lock().generation == self.generation
    }

    pub(crate) fn create_dir_all(&self, dir: &Path, durable: bool) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, dir)?;
        let mut missing: Vec<PathBuf> = dir
            .ancestors()
            .filter(|a| !st.dir_exists(a))
            .map(Path::to_path_buf)
            .collect();
        missing.reverse();
        for d in missing {
            if let Some(Node::File(_)) = st.live.get(&d) {
                return Err(DiskError::io(
                    &d,
                    std::io::Error::from(std::io::ErrorKind::AlreadyExists),
                ));
            }
            st.live.insert(d.clone(), Node::Dir);
            if durable {
                st.sync_dir(&parent(&d))?;
            }
        }
        Ok(())
    }

    pub(crate) fn sync_dir(&self, dir: &Path) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, dir)?;
        if !st.dir_exists(dir) {
            return Err(DiskError::not_found(dir));
        }
        st.sync_dir(dir)
    }

    /// [`crate::Disk::sync_tree`]: one sync (one fault draw, for `dir`)
    /// that makes every name under `dir` (and `dir`'s own entry) and every
    /// byte of every file under it durable. Files the skip switch names
    /// stay as they were. Like a power loss it reads the page cache of
    /// every file under `dir`: no thread may write them meanwhile.
    pub(crate) fn sync_tree(&self, dir: &Path) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, dir)?;
        if !st.dir_exists(dir) {
            return Err(DiskError::not_found(dir));
        }
        st.sync_fault(dir)?;
        let names: Vec<PathBuf> = st
            .live
            .keys()
            .chain(st.durable.keys())
            .filter(|p| p.starts_with(dir))
            .cloned()
            .collect();
        for p in names {
            match st.live.get(&p).copied() {
                Some(n) => st.durable.insert(p, n),
                None => st.durable.remove(&p),
            };
        }
        let files: Vec<(PathBuf, u64)> = st
            .live
            .iter()
            .filter(|(p, _)| p.starts_with(dir))
            .filter_map(|(p, n)| match n {
                Node::File(ino) => Some((p.clone(), *ino)),
                Node::Dir => None,
            })
            .collect();
        for (path, ino) in files {
            let lossy = path.to_string_lossy();
            if st.skipped_sync.iter().any(|s| lossy.contains(s.as_str())) {
                continue;
            }
            if let Some(inode) = st.inodes.get_mut(&ino) {
                // SAFETY: no thread writes files under `dir` during the call
                // (documented above).
                let cache = unsafe { inode.cache.bytes() };
                let n = cache.len().min(inode.durable.len());
                inode.durable[..n].copy_from_slice(&cache[..n]);
            }
        }
        Ok(())
    }

    pub(crate) fn list_dir(&self, dir: &Path) -> DiskResult<Vec<DirEntry>> {
        let st = self.disk.state.lock();
        st.alive(self, dir)?;
        if !st.dir_exists(dir) {
            return Err(DiskError::not_found(dir));
        }
        Ok(st
            .live
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .map(|(p, n)| DirEntry {
                name: p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                path: p.clone(),
                is_dir: *n == Node::Dir,
            })
            .collect())
    }

    pub(crate) fn create_segment(
        &self,
        path: &Path,
        size: usize,
        reserve: usize,
    ) -> DiskResult<(Segment, bool)> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        if !st.dir_exists(&parent(path)) {
            return Err(DiskError::not_found(path));
        }
        let (ino, fresh) = match st.live.get(path).copied() {
            Some(Node::File(ino)) => (ino, false),
            Some(Node::Dir) => {
                return Err(DiskError::io(
                    path,
                    std::io::Error::from_raw_os_error(libc::EISDIR),
                ));
            }
            None => {
                let ino = st.new_inode(&vec![0; size], size);
                st.live.insert(path.to_path_buf(), Node::File(ino));
                (ino, true)
            }
        };
        resize(&mut st.inodes, ino, size);
        let reserved = st.inodes.get(&ino).map_or(0, |i| i.reserved);
        if reserve > reserved
            && let Err(e) = st.space_fault(path, reserve as u64)
        {
            if fresh {
                st.live.remove(path);
                st.inodes.remove(&ino);
            }
            return Err(e);
        }
        let inode = st
            .inodes
            .get_mut(&ino)
            .ok_or_else(|| DiskError::not_found(path))?;
        inode.reserved = inode.reserved.max(reserve);
        let buf = Arc::clone(&inode.cache);
        Ok((
            Segment::simulated(path.to_path_buf(), buf, self.clone(), ino),
            fresh,
        ))
    }

    pub(crate) fn open_segment(&self, path: &Path) -> DiskResult<Segment> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        let ino = st.file(path)?;
        let flip_rate = st.faults.read_flip_one_in;
        let flip = one_in(&mut st.rng, flip_rate);
        let inode = st
            .inodes
            .get(&ino)
            .ok_or_else(|| DiskError::not_found(path))?;
        let buf = Arc::clone(&inode.cache);
        let extent = inode
            .durable
            .iter()
            .rposition(|b| *b != 0)
            .map_or(0, |p| p + 1);
        if flip && extent > 0 {
            let at = st.rng.random_range(0..extent);
            let bit = st.rng.random_range(0..8u8);
            // SAFETY: in bounds; a segment is opened before anyone writes it
            // (recovery maps files first), so nobody touches this byte now.
            unsafe { *buf.ptr().add(at) ^= 1 << bit };
            st.stats.flips.push((path.to_path_buf(), at));
        }
        Ok(Segment::simulated(
            path.to_path_buf(),
            buf,
            self.clone(),
            ino,
        ))
    }

    pub(crate) fn extend(&self, path: &Path, len: usize) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        let ino = st.file(path)?;
        resize(&mut st.inodes, ino, len);
        Ok(())
    }

    pub(crate) fn file_len(&self, path: &Path) -> DiskResult<Option<u64>> {
        let st = self.disk.state.lock();
        st.alive(self, path)?;
        Ok(match st.live.get(path) {
            Some(Node::File(ino)) => st.inodes.get(ino).map(|i| i.cache.len() as u64),
            _ => None,
        })
    }

    pub(crate) fn exists(&self, path: &Path) -> DiskResult<Option<bool>> {
        let st = self.disk.state.lock();
        st.alive(self, path)?;
        Ok(st.live.get(path).map(|n| *n == Node::Dir))
    }

    pub(crate) fn read_file(&self, path: &Path) -> DiskResult<Option<Vec<u8>>> {
        let st = self.disk.state.lock();
        st.alive(self, path)?;
        let Some(Node::File(ino)) = st.live.get(path) else {
            return Ok(None);
        };
        let inode = st
            .inodes
            .get(ino)
            .ok_or_else(|| DiskError::not_found(path))?;
        // SAFETY: small files (checkpoints, metadata) are never mapped for
        // writing: their cache is only written under this lock.
        Ok(Some(unsafe { inode.cache.bytes() }.to_vec()))
    }

    pub(crate) fn atomic_replace(&self, path: &Path, bytes: &[u8]) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        let dir = parent(path);
        if !st.dir_exists(&dir) {
            return Err(DiskError::not_found(path));
        }
        let tmp = crate::real::temp_path(path);
        st.space_fault(&tmp, bytes.len() as u64)?;
        let ino = st.new_inode(bytes, bytes.len());
        // fsync of the temp file.
        if let Err(e) = st.sync_fault(&tmp) {
            st.inodes.remove(&ino);
            return Err(e);
        }
        if let Some(inode) = st.inodes.get_mut(&ino) {
            inode.durable.copy_from_slice(bytes);
        }
        // rename over `path`, then fsync of the directory.
        st.live.insert(path.to_path_buf(), Node::File(ino));
        st.sync_dir(&dir)
    }

    pub(crate) fn create_marker(&self, path: &Path) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        let dir = parent(path);
        if !st.dir_exists(&dir) {
            return Err(DiskError::not_found(path));
        }
        if !st.live.contains_key(path) {
            let ino = st.new_inode(&[], 0);
            st.live.insert(path.to_path_buf(), Node::File(ino));
        }
        st.sync_dir(&dir)
    }

    pub(crate) fn remove_file(&self, path: &Path) -> DiskResult<bool> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        match st.live.get(path) {
            Some(Node::File(_)) => {
                st.live.remove(path);
                Ok(true)
            }
            Some(Node::Dir) => Err(DiskError::io(
                path,
                std::io::Error::from_raw_os_error(libc::EISDIR),
            )),
            None => Ok(false),
        }
    }

    pub(crate) fn remove_dir(&self, dir: &Path, recursive: bool) -> DiskResult<bool> {
        let mut st = self.disk.state.lock();
        st.alive(self, dir)?;
        if st.live.get(dir) != Some(&Node::Dir) {
            return Ok(false);
        }
        let inside: Vec<PathBuf> = st
            .live
            .keys()
            .filter(|p| p.starts_with(dir) && *p != dir)
            .cloned()
            .collect();
        if !inside.is_empty() && !recursive {
            return Err(DiskError::io(
                dir,
                std::io::Error::from_raw_os_error(libc::ENOTEMPTY),
            ));
        }
        for p in inside {
            st.live.remove(&p);
        }
        st.live.remove(dir);
        Ok(true)
    }

    /// A segment's sync: copies `[from, to)` of what the process wrote into
    /// the durable image, unless a fault or the skip switch says otherwise.
    pub(crate) fn sync_segment(
        &self,
        path: &Path,
        ino: u64,
        buf: &SimBuf,
        from: usize,
        to: usize,
    ) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        st.sync_fault(path)?;
        let lossy = path.to_string_lossy();
        if st.skipped_sync.iter().any(|p| lossy.contains(p.as_str())) {
            return Ok(());
        }
        let Some(inode) = st.inodes.get_mut(&ino) else {
            // Unlinked and forgotten: nothing of it can be durable any more.
            return Ok(());
        };
        let to = to.min(inode.durable.len()).min(buf.len());
        if from < to {
            // SAFETY: [from, to) is below the segment's committed position
            // (the caller syncs only what it wrote), so no one writes it now.
            let src = unsafe { std::slice::from_raw_parts(buf.ptr().add(from), to - from) };
            inode.durable[from..to].copy_from_slice(src);
        }
        Ok(())
    }

    pub(crate) fn reserve(&self, path: &Path, ino: u64, len: usize) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        let reserved = st.inodes.get(&ino).map_or(0, |i| i.reserved);
        if len <= reserved {
            return Ok(());
        }
        st.space_fault(path, len as u64)?;
        if let Some(i) = st.inodes.get_mut(&ino) {
            i.reserved = len;
        }
        Ok(())
    }

    /// A punched hole from `from` on: the blocks there are gone.
    pub(crate) fn unreserve_from(&self, path: &Path, ino: u64, from: usize) -> DiskResult<()> {
        let mut st = self.disk.state.lock();
        st.alive(self, path)?;
        if let Some(i) = st.inodes.get_mut(&ino) {
            i.reserved = i.reserved.min(from);
        }
        Ok(())
    }

    pub(crate) fn allocated(&self, ino: u64) -> u64 {
        let st = self.disk.state.lock();
        st.inodes.get(&ino).map_or(0, |i| i.reserved as u64)
    }
}

/// Gives inode `ino` `len` bytes (zeros past the old end), in the cache and
/// on the device (a file's length is treated as metadata that is durable
/// at once).
fn resize(inodes: &mut std::collections::HashMap<u64, super::Inode>, ino: u64, len: usize) {
    let Some(inode) = inodes.get_mut(&ino) else {
        return;
    };
    if inode.cache.len() == len {
        return;
    }
    // SAFETY: files are resized only before they are mapped for writing.
    let mut bytes = unsafe { inode.cache.bytes() }.to_vec();
    bytes.resize(len, 0);
    inode.cache = SimBuf::from_bytes(&bytes);
    inode.durable.resize(len, 0);
    inode.reserved = inode.reserved.min(len);
}
