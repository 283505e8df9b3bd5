use super::*;
use std::ffi::CString;
use std::time::Instant;

fn tmp(name: &str) -> String {
    let d = std::env::temp_dir().join(format!("pi-native-lock-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join("target.json").to_string_lossy().into_owned()
}

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[cfg(unix)]
fn set_mtime_secs_ago(path: &str, secs: i64) {
    let c = CString::new(path).unwrap();
    let t = libc::timespec {
        tv_sec: now_s() - secs,
        tv_nsec: 0,
    };
    // SAFETY: valid path and a two-element timespec array.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), 0) };
    assert_eq!(rc, 0);
}

fn lock_of(file: &str) -> String {
    format!("{file}.lock")
}

fn atime_of(path: &str) -> i128 {
    crate::platform::fs::dir_attrs(path, false).unwrap().atime
}

/// The lock a native makes carries a token as its atime (never one a clock gives): the
/// holder's identity (L2b).
#[test]
fn a_native_lock_carries_a_token() {
    let file = tmp("token");
    let g = acquire(&file, LockOptions::store_async()).unwrap();
    let atime = atime_of(&lock_of(&file));
    assert!(atime > (1i128 << 31) * 1_000_000_000, "atime {atime}");
    g.release().unwrap();
    assert!(!std::path::Path::new(&lock_of(&file)).exists());
}

#[test]
fn contention_stale_takeover_and_ownership() {
    let file = tmp("a");
    let lock = lock_of(&file);
    let g = acquire(&file, LockOptions::store_async()).unwrap();
    assert!(std::path::Path::new(&lock).is_dir());
    // Held in-process by a native holder: the sync policy waits for its release (W-B6).
    let handle = std::thread::spawn({
        let file = file.clone();
        move || acquire(&file, LockOptions::store_sync()).map(|g| g.release())
    });
    std::thread::sleep(Duration::from_millis(50));
    g.release().unwrap();
    assert!(handle.join().unwrap().is_ok());
    assert!(!std::path::Path::new(&lock).exists());

    // A foreign fresh lock: ELOCKED.
    std::fs::create_dir(&lock).unwrap();
    let err = acquire(&file, LockOptions::store_sync()).unwrap_err();
    assert_eq!(err, FsError::Locked { file: file.clone() });
    // A foreign stale lock (mtime 3 s ago): taken over.
    #[cfg(unix)]
    {
        set_mtime_secs_ago(&lock, 3);
        let g = acquire(&file, LockOptions::store_sync()).unwrap();
        // Someone steals it (replaces the directory): our release must leave theirs alone.
        std::fs::remove_dir(&lock).unwrap();
        std::fs::create_dir(&lock).unwrap();
        assert_eq!(
            g.release(),
            Err(FsError::Compromised { file: file.clone() })
        );
        assert!(std::path::Path::new(&lock).is_dir());
    }
    std::fs::remove_dir(&lock).unwrap();
}

#[test]
fn publish_runs_only_while_the_lock_is_ours() {
    let file = tmp("fence");
    let lock = lock_of(&file);
    let target = format!("{file}.target");
    let temp = format!("{file}.temp");
    let g = acquire(&file, LockOptions::store_async()).unwrap();
    std::fs::write(&temp, "1").unwrap();
    g.publish_rename(&temp, &target).unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "1");
    // Taken over (rmdir + mkdir by another writer): nothing is published.
    std::fs::remove_dir(&lock).unwrap();
    std::fs::create_dir(&lock).unwrap();
    std::fs::write(&temp, "2").unwrap();
    assert_eq!(
        g.publish_rename(&temp, &target),
        Err(FsError::Compromised { file: file.clone() })
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "1");
    assert!(g.release().is_err());
    assert!(
        std::path::Path::new(&lock).is_dir(),
        "the taker's lock stays"
    );
    std::fs::remove_dir(&lock).unwrap();

    // Removed under us (e.g. released by a robbed third party): also compromised.
    let g = acquire(&file, LockOptions::store_async()).unwrap();
    std::fs::remove_dir(&lock).unwrap();
    assert!(g.publish_unlink(&target).is_err());
    assert!(std::path::Path::new(&target).exists());
}

/// A taker whose directory carries the very mtime the holder set (a whole-second server, or a
/// clock read in the same tick): the token still tells them apart (issue 41, defect 2).
#[cfg(unix)]
#[test]
fn a_successor_with_our_mtime_is_not_ours() {
    let file = tmp("same-mtime");
    let lock = lock_of(&file);
    let g = acquire(&file, LockOptions::store_async()).unwrap();
    let ours = crate::platform::fs::dir_attrs(&lock, false).unwrap();
    std::fs::remove_dir(&lock).unwrap();
    std::fs::create_dir(&lock).unwrap();
    crate::platform::fs::set_times_ns(&lock, ours.mtime, ours.mtime).unwrap();
    assert_eq!(
        g.release(),
        Err(FsError::Compromised { file: file.clone() })
    );
    assert!(
        std::path::Path::new(&lock).is_dir(),
        "the successor's lock stays"
    );
    std::fs::remove_dir(&lock).unwrap();
}

/// After an environment's `exit` event, an async hold that would wait for its JS thread (a
/// judged CAS, a `withFileLock` callback) is not taken at all, so no lock directory can be
/// made after the last exit listener; sync ones and async ones that need no JS still are.
#[test]
fn no_async_hold_waiting_for_js_after_exit() {
    let file = tmp("after-exit");
    let lock = lock_of(&file);
    let owner = 2_000_000 + u64::from(std::process::id());
    release_callback_locks(owner); // the `exit` event
    let judged = LockOptions {
        owner,
        js_verdict: true,
        ..LockOptions::store_async()
    };
    assert_eq!(acquire(&file, judged).err(), Some(FsError::Cancelled));
    let callback = LockOptions {
        owner,
        kind: HolderKind::Callback,
        ..LockOptions::store_async()
    };
    assert_eq!(acquire(&file, callback).err(), Some(FsError::Cancelled));
    assert!(
        !std::path::Path::new(&lock).exists(),
        "nothing made on disk"
    );
    for opts in [
        LockOptions {
            owner,
            ..LockOptions::store_async()
        },
        LockOptions {
            owner,
            js_verdict: true,
            ..LockOptions::store_sync()
        },
    ] {
        let g = acquire(&file, opts).unwrap();
        assert!(std::path::Path::new(&lock).is_dir());
        g.release().unwrap();
    }
    assert!(!std::path::Path::new(&lock).exists());
}

#[test]
fn teardown_cancels_waits_and_commits_of_its_environment() {
    let file = tmp("teardown");
    let owner = 1_000_000 + u64::from(std::process::id());
    let opts = LockOptions {
        owner,
        ..LockOptions::store_async()
    };
    let g = acquire(&file, opts).unwrap();
    // A second operation of the same environment waits in the in-process queue.
    let waiter = std::thread::spawn({
        let file = file.clone();
        move || acquire(&file, opts).map(|_| ())
    });
    std::thread::sleep(Duration::from_millis(50));
    let started = Instant::now();
    release_all(owner);
    assert_eq!(waiter.join().unwrap(), Err(FsError::Cancelled));
    assert!(started.elapsed() < Duration::from_secs(1));
    // The held lock was removed by the teardown; its late commit is refused.
    assert!(!std::path::Path::new(&lock_of(&file)).exists());
    assert_eq!(g.publish_unlink(&file), Err(FsError::Cancelled));
    assert_eq!(g.release(), Ok(()));
    assert_eq!(acquire(&file, opts).unwrap_err(), FsError::Cancelled);
}

/// The sets of environments torn down or exited forget the oldest beyond their bound
/// (issue 41, defect 7: they grew without bound).
#[test]
fn environments_remembered_are_bounded() {
    let mut e = table::Envs::default();
    for owner in 0..10_000 {
        e.insert(owner);
    }
    assert_eq!(e.len(), 4096);
    assert!(e.contains(&9_999) && !e.contains(&0));
}

fn network(cache_ms: u64) -> LockOptions {
    LockOptions {
        retry: Retry::Sync { retries: 0 },
        fs: FsRule::Network,
        attribute_cache_ms: cache_ms,
        ..LockOptions::store_sync()
    }
}

/// The network rule: a foreign lock is stale only once seen unchanged for the threshold plus
/// the cache bound, whatever its mtime says (even one far in the past); the local rule is
/// unchanged.
#[cfg(unix)]
#[test]
fn network_rule_judges_by_what_it_saw() {
    let file = tmp("netrule");
    let lock = lock_of(&file);
    std::fs::create_dir(&lock).unwrap();
    // 3 s old: stale by the local rule at once, not by the network rule.
    set_mtime_secs_ago(&lock, 3);
    let locked = FsError::Locked { file: file.clone() };
    assert_eq!(acquire(&file, network(60_000)).unwrap_err(), locked);
    // Fresh again (as a live holder keeps it), then seen unchanged: taken once 2 s + 300 ms
    // have passed since this first look (looks at most 2 s apart: one acquisition's two
    // attempts, then the next at once).
    crate::platform::fs::set_times_ns(
        &lock,
        (now_s() as i128) * 1_000_000_000,
        (now_s() as i128) * 1_000_000_000,
    )
    .unwrap();
    let first = Instant::now();
    let taken = loop {
        match acquire(&file, network(300)) {
            Ok(g) => break g,
            Err(e) => assert_eq!(e, locked),
        }
        assert!(first.elapsed() < Duration::from_secs(10));
    };
    assert!(
        first.elapsed() >= Duration::from_millis(2000),
        "{:?}",
        first.elapsed()
    );
    taken.release().unwrap();
    // A directory made afresh is not stale, however long ago the path was first seen.
    std::fs::create_dir(&lock).unwrap();
    assert_eq!(acquire(&file, network(300)).unwrap_err(), locked);
    // An mtime far in the past is not trusted either: seen for the first time, not stale.
    set_mtime_secs_ago(&lock, 3600);
    assert_eq!(acquire(&file, network(60_000)).unwrap_err(), locked);
    // The local rule: 3 s old is stale at once.
    set_mtime_secs_ago(&lock, 3);
    acquire(
        &file,
        LockOptions {
            fs: FsRule::Local,
            ..network(60_000)
        },
    )
    .unwrap()
    .release()
    .unwrap();
}

/// Make `g`'s last successful refresh `ms` milliseconds old, as a pause would.
fn last_refreshed_ago(g: &LockGuard, ms: u64) {
    let mut h = g.cell.hold();
    let h = h.as_mut().unwrap();
    h.held.refreshed = h.held.refreshed.saturating_sub(Duration::from_millis(ms));
}

/// A holder that went longer than the stale threshold without a successful refresh (paused,
/// its refreshes failing or stuck) counts its lock as lost; nobody took it, so its release
/// removes it (L2c); taken over meanwhile, it is left alone.
#[test]
fn a_holder_without_a_recent_refresh_is_compromised() {
    for opts in [LockOptions::store_sync(), network(60_000)] {
        let file = tmp("stale-holder");
        let lock = lock_of(&file);
        let g = acquire(&file, opts).unwrap();
        last_refreshed_ago(&g, 2500);
        assert_eq!(
            g.publish_unlink(&file),
            Err(FsError::Compromised { file: file.clone() })
        );
        assert_eq!(
            g.release(),
            Err(FsError::Compromised { file: file.clone() })
        );
        assert!(!std::path::Path::new(&lock).exists(), "{opts:?}");

        let g = acquire(&file, opts).unwrap();
        last_refreshed_ago(&g, 2500);
        std::fs::remove_dir(&lock).unwrap();
        std::fs::create_dir(&lock).unwrap();
        assert_eq!(
            g.release(),
            Err(FsError::Compromised { file: file.clone() })
        );
        assert!(std::path::Path::new(&lock).is_dir(), "the taker's stays");
        std::fs::remove_dir(&lock).unwrap();
    }
}

/// Locks are refreshed while held, through a handle of their directory; the token stays.
#[test]
fn held_locks_are_refreshed() {
    let file = tmp("refresh");
    let lock = lock_of(&file);
    let g = acquire(&file, LockOptions::store_async()).unwrap();
    let before = crate::platform::fs::dir_attrs(&lock, false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let a = crate::platform::fs::dir_attrs(&lock, false).unwrap();
        if a.mtime > before.mtime {
            break a;
        }
        assert!(Instant::now() < deadline, "never refreshed");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(after.atime, before.atime, "the token stays");
    g.release().unwrap();
}

/// A refresh that stalls between its check and its touch (SPEC L10e): the directory was
/// replaced in between by a taker's, and the touch must land on ours, never on theirs.
#[cfg(unix)]
#[test]
fn a_stalled_refresh_never_touches_the_takers_directory() {
    let file = tmp("stall");
    let lock = lock_of(&file);
    std::fs::create_dir(&lock).unwrap();
    let ours = crate::platform::fs::dir_attrs(&lock, false).unwrap();
    let mut theirs = None;
    let touched = crate::platform::fs::touch_dir(
        &lock,
        |a| {
            // The stall: a taker removes our directory and makes its own, a while ago.
            std::fs::remove_dir(&lock).unwrap();
            std::fs::create_dir(&lock).unwrap();
            set_mtime_secs_ago(&lock, 5);
            theirs = Some(crate::platform::fs::dir_attrs(&lock, false).unwrap());
            *a == ours
        },
        1,
        2,
    );
    assert!(
        matches!(touched, crate::platform::TouchedDir::NotOurs),
        "{touched:?}"
    );
    assert_eq!(
        crate::platform::fs::dir_attrs(&lock, false).unwrap(),
        theirs.unwrap(),
        "theirs untouched"
    );
    std::fs::remove_dir(&lock).unwrap();
}

/// A lock busy publishing does not hold up the refresh of the others.
#[test]
fn a_busy_lock_does_not_delay_the_refresh_of_others() {
    let (a, b) = (tmp("busy-a"), tmp("busy-b"));
    let ga = acquire(&a, LockOptions::store_async()).unwrap();
    let gb = acquire(&b, LockOptions::store_async()).unwrap();
    let before = crate::platform::fs::dir_attrs(&lock_of(&b), false).unwrap();
    let busy = ga.cell.hold();
    std::thread::sleep(Duration::from_millis(2200));
    let after = crate::platform::fs::dir_attrs(&lock_of(&b), false).unwrap();
    drop(busy);
    assert!(after.mtime > before.mtime, "b refreshed while a was busy");
    gb.release().unwrap();
    // a went the whole threshold without a refresh (its holder busy): lost, and since nobody
    // took it, removed by its release (L2c).
    assert_eq!(ga.release(), Err(FsError::Compromised { file: a.clone() }));
    assert!(!std::path::Path::new(&lock_of(&a)).exists());
}
