//! What one process has learned and keeps between acquisitions: the network rule's sightings
//! of other processes' locks, the lock directories of its own it could not remove, and what
//! each folder's file system can do. Plain data, bounded: production keeps one behind a mutex
//! ([`super::memory`]), the simulator one per simulated process.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use super::world::Attrs;

/// A map that starts over when it reaches its bound: forgetting only ever costs a longer wait
/// (a sighting starts again, an own orphan is waited out by the stale rule, a folder's facts
/// are learned again), never a wrong decision.
#[derive(Debug)]
pub struct Bounded<K, V> {
    map: HashMap<K, V>,
    max: usize,
}

impl<K: Eq + Hash, V> Bounded<K, V> {
    pub fn new(max: usize) -> Self {
        Bounded {
            map: HashMap::new(),
            max,
        }
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }

    pub fn insert(&mut self, k: K, v: V) {
        if self.map.len() >= self.max && !self.map.contains_key(&k) {
            self.map.clear();
        }
        self.map.insert(k, v);
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        self.map.remove(k)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What a folder's file system was found to do (learned by the first lock made in it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Folder {
    /// Keeps whole seconds only (SFTP, SMB, ext3…): mtimes are then set rounded up, as
    /// proper-lockfile does, so a fresh lock never looks older than it is (L2/L5).
    pub whole_seconds: Option<bool>,
    /// Can move a directory to a path only if nothing is there ([`super::world::Op::RenameNoReplace`]).
    pub noreplace: Option<bool>,
    /// Keeps the atime a holder sets (the lock's token, L2b).
    pub tokens: Option<bool>,
}

/// How another process's lock looked when first seen unchanged (network rule): device, inode
/// (0 unless the folder keeps no atime: libfuse clients that open by path renumber a
/// directory), mtime, atime.
pub type Sight = (u64, u64, i128, i128);

/// One process's memory of the lock protocol.
#[derive(Debug)]
pub struct Memory {
    /// Lock path → how it looked, since when (monotonic) it has looked so, and when it was
    /// last looked at.
    pub sightings: Bounded<String, (Sight, Duration, Duration)>,
    /// Lock path → directories of ours that could not be removed, or may have been made there
    /// unanswered (L2a); the last few.
    pub orphans: Bounded<String, Vec<Orphan>>,
    /// Folder path → what its file system does.
    pub folders: Bounded<String, Folder>,
}

/// Sightings, orphans and folders remembered at once.
pub const MAX_REMEMBERED: usize = 4096;
const MAX_FOLDERS: usize = 1024;

impl Default for Memory {
    fn default() -> Self {
        Memory {
            sightings: Bounded::new(MAX_REMEMBERED),
            orphans: Bounded::new(MAX_REMEMBERED),
            folders: Bounded::new(MAX_FOLDERS),
        }
    }
}

/// Possible orphans remembered per lock path.
const ORPHANS_PER_LOCK: usize = 8;

/// How a directory of ours left at a lock path is recognized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orphan {
    /// By the token it carries (or would carry, had the call that went unanswered been made).
    Token(i128),
    /// One whose times could not be set: by everything a `stat` showed of it right after it was
    /// made (device, inode, mtime and atime, exactly). A successor is made only after it was
    /// judged stale, at least the threshold later, and cannot show its mtime.
    Stamp(Attrs),
}

impl Orphan {
    fn is(&self, a: &Attrs) -> bool {
        match self {
            Orphan::Token(t) => super::model::token_matches(*t, a.atime),
            Orphan::Stamp(s) => s == a,
        }
    }
}

impl Memory {
    /// Remember a possible orphan of ours at `lock`.
    pub fn orphan(&mut self, lock: &str, o: Orphan) {
        let mut known = self.orphans.remove(&lock.to_string()).unwrap_or_default();
        if known.len() >= ORPHANS_PER_LOCK {
            known.remove(0);
        }
        known.push(o);
        self.orphans.insert(lock.to_string(), known);
    }

    /// The orphan of ours at `lock` that `a` is, if any.
    pub fn orphan_at(&self, lock: &str, a: &Attrs) -> Option<Orphan> {
        self.orphans
            .get(&lock.to_string())
            .and_then(|known| known.iter().find(|o| o.is(a)).copied())
    }

    /// Forget an orphan (removed).
    pub fn forget_orphan(&mut self, lock: &str, o: Orphan) {
        if let Some(mut known) = self.orphans.remove(&lock.to_string()) {
            known.retain(|k| *k != o);
            if !known.is_empty() {
                self.orphans.insert(lock.to_string(), known);
            }
        }
    }

    /// The facts known of `folder`.
    pub fn folder(&self, folder: &str) -> Folder {
        self.folders
            .get(&folder.to_string())
            .copied()
            .unwrap_or_default()
    }

    /// Change what is known of `folder`.
    pub fn learn(&mut self, folder: &str, f: impl FnOnce(&mut Folder)) {
        let mut facts = self.folder(folder);
        f(&mut facts);
        self.folders.insert(folder.to_string(), facts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_maps_start_over_at_their_bound() {
        let mut b = Bounded::new(2);
        b.insert(1, 'a');
        b.insert(2, 'b');
        b.insert(2, 'c'); // a known key never clears
        assert_eq!(b.len(), 2);
        b.insert(3, 'd');
        assert_eq!(b.len(), 1);
        assert_eq!(b.get(&3), Some(&'d'));
    }
}
