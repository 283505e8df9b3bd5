//! What a folder holds, compared between two looks: the names whose file changed. Used where
//! notifications carry no names (kqueue's folder events on macOS) and by the polling of
//! folders on network and FUSE file systems, whose notifications do not cross machines.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

/// What identifies one version of a file without reading it: a store write renames a new
/// file over the old one (new inode); a write in place changes the size or the times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sig {
    pub ino: u64,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch (0 where unknown).
    pub mtime_ns: i128,
    /// Status-change time in nanoseconds (0 where the platform has none).
    pub ctime_ns: i128,
}

/// Name → signature of every entry of a folder.
pub type Snapshot = HashMap<OsString, Sig>;

/// List `dir` and stat each entry (without following symlinks). A name that vanishes between
/// the listing and its stat is left out, as if listed a moment later.
pub fn scan(dir: &Path) -> std::io::Result<Snapshot> {
    let mut out = Snapshot::new();
    for entry in std::fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let Ok(meta) = entry.metadata() else { continue };
        out.insert(entry.file_name(), sig(&meta));
    }
    Ok(out)
}

#[cfg(unix)]
fn sig(meta: &std::fs::Metadata) -> Sig {
    use std::os::unix::fs::MetadataExt;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Sig {
        ino: meta.ino(),
        size: meta.size(),
        mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
        ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
    }
}

#[cfg(not(unix))]
fn sig(meta: &std::fs::Metadata) -> Sig {
    let ns = |t: std::io::Result<std::time::SystemTime>| {
        t.ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128)
    };
    Sig {
        ino: 0,
        size: meta.len(),
        mtime_ns: ns(meta.modified()),
        ctime_ns: ns(meta.created()),
    }
}

/// Names added, removed, or whose signature changed from `old` to `new`, sorted, each with
/// whether the change was structural (added, removed, or another file now: a new inode) rather
/// than a write in place.
pub fn diff(old: &Snapshot, new: &Snapshot) -> Vec<(OsString, bool)> {
    let mut names: Vec<(OsString, bool)> = new
        .iter()
        .filter_map(|(name, sig)| match old.get(name) {
            Some(was) if was == sig => None,
            Some(was) => Some((name.clone(), was.ino != sig.ino)),
            None => Some((name.clone(), true)),
        })
        .chain(
            old.keys()
                .filter(|n| !new.contains_key(*n))
                .map(|n| (n.clone(), true)),
        )
        .collect();
    names.sort();
    names
}

/// The signature of one name of `dir` (not following a symlink), or None when it is absent.
pub fn stat_one(dir: &Path, name: &std::ffi::OsStr) -> Option<Sig> {
    std::fs::symlink_metadata(dir.join(name))
        .ok()
        .map(|m| sig(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_sees_creation_replacement_and_removal() {
        let dir = std::env::temp_dir().join(format!("pi-native-snap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.json"), "1").unwrap();
        std::fs::write(dir.join("b.json"), "1").unwrap();
        let s0 = scan(&dir).unwrap();
        assert!(diff(&s0, &scan(&dir).unwrap()).is_empty());
        // Replaced by rename (the store's way), created, removed.
        std::fs::write(dir.join("a.json.tmp"), "22").unwrap();
        std::fs::rename(dir.join("a.json.tmp"), dir.join("a.json")).unwrap();
        std::fs::write(dir.join("c.json"), "1").unwrap();
        std::fs::remove_file(dir.join("b.json")).unwrap();
        let s1 = scan(&dir).unwrap();
        let names: Vec<_> = diff(&s0, &s1)
            .into_iter()
            .map(|(n, structural)| (n.into_string().unwrap(), structural))
            .collect();
        // Each is structural: a.json is another file (renamed over), b gone, c new.
        assert_eq!(
            names,
            [
                ("a.json".to_string(), true),
                ("b.json".to_string(), true),
                ("c.json".to_string(), true)
            ]
        );
        // A write in place is a change, not a structural one.
        std::fs::write(dir.join("c.json"), "longer").unwrap();
        let s2 = scan(&dir).unwrap();
        assert_eq!(diff(&s1, &s2), [("c.json".into(), false)]);
        assert_eq!(
            stat_one(&dir, "c.json".as_ref()),
            s2.get(std::ffi::OsStr::new("c.json")).copied()
        );
        assert_eq!(stat_one(&dir, "b.json".as_ref()), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
