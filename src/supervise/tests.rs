use super::*;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The registry is process-wide: these tests take turns.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn channel_sink() -> (Sink, mpsc::Receiver<(u64, Notice)>) {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let sink: Sink = Arc::new(move |id, n| {
        let _ = tx.lock().unwrap().send((id, n));
    });
    (sink, rx)
}

fn sleeper() -> std::process::Child {
    std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep")
}

#[cfg(unix)]
#[test]
fn exit_is_told_at_once_and_the_waiter_goes_with_the_last_watch() {
    let _g = serial();
    let mut child = sleeper();
    let pid = child.id() as i32;
    let (sink, rx) = channel_sink();
    let ExitWatch::Watching(id) = watch_exit(pid, None, 7, sink) else {
        panic!("a live child is watched")
    };
    assert!(waiter_running());
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    let t = Instant::now();
    child.kill().unwrap();
    // Not reaped yet: the zombie counts as ended.
    let (got, notice) = rx.recv_timeout(Duration::from_secs(5)).expect("exit told");
    assert_eq!((got, notice), (id, Notice::Exited));
    assert!(
        t.elapsed() < Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(watch_count(), 0);
    // The waiter's thread let go of itself when the last watch fired.
    assert!(!waiter_running());
    child.wait().unwrap();
    assert!(!cancel(id), "a fired watch is gone");
}

#[cfg(unix)]
#[test]
fn ended_processes_answer_at_once() {
    let _g = serial();
    let (sink, rx) = channel_sink();
    let mut child = sleeper();
    let pid = child.id() as i32;
    // A start time that is not this process's: the pid names someone else.
    assert_eq!(
        watch_exit(pid, Some(1.0), 1, sink.clone()),
        ExitWatch::Ended
    );
    let own = crate::liveness::process_identity(pid)
        .unwrap()
        .start_time_ms;
    let w = watch_exit(pid, Some(own), 1, sink.clone());
    assert!(matches!(w, ExitWatch::Watching(_)), "{w:?}");
    child.kill().unwrap();
    rx.recv_timeout(Duration::from_secs(5)).expect("exit told");
    // A zombie, then a reaped pid.
    let (zsink, _zrx) = channel_sink();
    let mut z = sleeper();
    z.kill().unwrap();
    let zpid = z.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(5);
    while probe_pid(zpid) != ProcState::Zombie && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(watch_exit(zpid, None, 1, zsink.clone()), ExitWatch::Ended);
    z.wait().unwrap();
    child.wait().unwrap();
    assert_eq!(watch_exit(zpid, None, 1, zsink), ExitWatch::Ended);
    assert_eq!(watch_exit(0, None, 1, sink.clone()), ExitWatch::Unwatchable);
    assert_eq!(watch_count(), 0);
    assert!(!waiter_running());
}

#[cfg(unix)]
#[test]
fn cancelled_watches_stay_silent_and_an_owner_takes_its_watches_along() {
    let _g = serial();
    let mut a = sleeper();
    let mut b = sleeper();
    let (sink, rx) = channel_sink();
    let ExitWatch::Watching(ia) = watch_exit(a.id() as i32, None, 1, sink.clone()) else {
        panic!()
    };
    let ExitWatch::Watching(_) = watch_exit(b.id() as i32, None, 2, sink.clone()) else {
        panic!()
    };
    assert!(cancel(ia));
    a.kill().unwrap();
    a.wait().unwrap();
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    cancel_owner(2);
    assert_eq!(watch_count(), 0);
    assert!(!waiter_running(), "the waiter stopped with its last watch");
    b.kill().unwrap();
    b.wait().unwrap();
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
}

#[cfg(unix)]
#[test]
fn one_waiter_serves_many_processes() {
    let _g = serial();
    let mut kids: Vec<_> = (0..20).map(|_| sleeper()).collect();
    let (sink, rx) = channel_sink();
    let ids: Vec<u64> = kids
        .iter()
        .map(|k| match watch_exit(k.id() as i32, None, 3, sink.clone()) {
            ExitWatch::Watching(id) => id,
            other => panic!("{other:?}"),
        })
        .collect();
    #[cfg(target_os = "linux")]
    // A new thread takes its name once it runs.
    let until = Instant::now() + Duration::from_secs(2);
    while threads_named("pi-native-supe") == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(threads_named("pi-native-supe"), 1);
    for k in &mut kids {
        k.kill().unwrap();
    }
    let mut seen: Vec<u64> = (0..ids.len())
        .map(|_| {
            rx.recv_timeout(Duration::from_secs(5))
                .expect("each exit")
                .0
        })
        .collect();
    seen.sort();
    assert_eq!(seen, ids);
    for k in &mut kids {
        k.wait().unwrap();
    }
    assert_eq!(watch_count(), 0);
}

#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with(prefix))
        .count()
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("pi-native-sup-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Notices within `ms`, in order.
fn drain(rx: &mpsc::Receiver<(u64, Notice)>, ms: u64) -> Vec<Notice> {
    let until = Instant::now() + Duration::from_millis(ms);
    let mut out = Vec::new();
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok((_, n)) => out.push(n),
            Err(_) => break,
        }
    }
    out
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
#[test]
fn folder_watch_reports_entry_names_only() {
    let _g = serial();
    let dir = temp_dir("entries");
    std::fs::write(dir.join("old.json"), "{}").unwrap();
    let (sink, rx) = channel_sink();
    let id = watch_dir(&dir, Filter::Entries, 4, sink).unwrap();
    // A store write: lock directory, temp file, rename over the entry, lock removed.
    std::fs::create_dir(dir.join("w.json.lock")).unwrap();
    std::fs::write(dir.join("w.json.1.0000.tmp"), "{}").unwrap();
    std::fs::rename(dir.join("w.json.1.0000.tmp"), dir.join("w.json")).unwrap();
    std::fs::remove_dir(dir.join("w.json.lock")).unwrap();
    std::fs::write(dir.join("stray.txt"), "x").unwrap();
    std::fs::remove_file(dir.join("old.json")).unwrap();
    let got = drain(&rx, 300);
    let mut names: Vec<_> = got
        .iter()
        .map(|n| match n {
            Notice::Changed(s) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names, ["old.json", "w.json"]);
    // The folder removed: look again, and nothing more from it.
    std::fs::remove_dir_all(&dir).unwrap();
    let after = drain(&rx, 300);
    assert!(after.contains(&Notice::Reevaluate), "{after:?}");
    assert!(cancel(id));
    assert!(!waiter_running());
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
#[test]
fn a_folder_on_the_way_reports_its_child_appearing() {
    let _g = serial();
    let dir = temp_dir("child");
    let (sink, rx) = channel_sink();
    let id = watch_dir(&dir, Filter::Child("state".into()), 5, sink).unwrap();
    std::fs::write(dir.join("other"), "x").unwrap();
    std::fs::create_dir(dir.join("state")).unwrap();
    assert_eq!(drain(&rx, 300), [Notice::Changed("state".into())]);
    assert!(watch_dir(&dir.join("missing"), Filter::Entries, 5, channel_sink().0).is_err());
    cancel_owner(5);
    assert!(!cancel(id));
    assert!(!waiter_running());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
#[test]
fn a_folder_on_the_way_reports_its_child_renamed_or_removed_not_written() {
    let _g = serial();
    let dir = temp_dir("child-moves");
    std::fs::create_dir(dir.join("state")).unwrap();
    let (sink, rx) = channel_sink();
    // The same folder watched for its entries too: one inode, both masks (IN_MASK_ADD).
    let (esink, _erx) = channel_sink();
    let entries = watch_dir(&dir, Filter::Entries, 6, esink).unwrap();
    let id = watch_dir(&dir, Filter::Child("state".into()), 6, sink).unwrap();
    // A file named like the child written in a sibling folder, files written beside it:
    // nothing.
    std::fs::write(dir.join("state").join("inner.json"), "{}").unwrap();
    std::fs::write(dir.join("x.json"), "{}").unwrap();
    assert_eq!(drain(&rx, 300), []);
    // Renamed away, a folder made under its name, removed: each told.
    std::fs::rename(dir.join("state"), dir.join("state.old")).unwrap();
    assert_eq!(drain(&rx, 300), [Notice::Changed("state".into())]);
    std::fs::create_dir(dir.join("state")).unwrap();
    assert_eq!(drain(&rx, 300), [Notice::Changed("state".into())]);
    std::fs::remove_dir(dir.join("state")).unwrap();
    assert_eq!(drain(&rx, 300), [Notice::Changed("state".into())]);
    assert!(cancel(id));
    assert!(cancel(entries));
    assert!(!waiter_running());
    std::fs::remove_dir_all(&dir).unwrap();
}
