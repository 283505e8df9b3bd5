//! The program: flags, the mount, signals, the control socket (see main.rs).

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use fuser::{Config, MountOption, Session, SessionACL, SessionUnmounter};

use crate::{control, fs, rules, sys};

/// A FUSE pass-through that behaves like a network mount and injects faults.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The folder to pass through (the "server's" copy).
    backing: PathBuf,
    /// Where to mount it (an existing empty directory).
    mountpoint: PathBuf,
    /// Unix socket for the control channel (created; removed at exit).
    #[arg(long)]
    control: PathBuf,
    /// How long the kernel may cache a file's attributes, ms.
    #[arg(long, default_value_t = 1000)]
    attr_ttl_ms: u64,
    /// How long the kernel may cache a name's lookup, ms.
    #[arg(long, default_value_t = 1000)]
    entry_ttl_ms: u64,
    /// How long the kernel may cache "no such name", ms (0: not cached).
    #[arg(long, default_value_t = 0)]
    negative_ttl_ms: u64,
    /// Report and store timestamps in whole seconds (as SFTP and SMB servers do).
    #[arg(long)]
    whole_seconds: bool,
    /// Give files inode numbers of this mount's own, new after each forget (libfuse high-level
    /// clients), instead of the backing folder's.
    #[arg(long)]
    renumber_inodes: bool,
    /// Refuse a rename with flags (RENAME_NOREPLACE, RENAME_EXCHANGE, …) with EINVAL, as sshfs,
    /// SMB and GlusterFS clients do; without it, flags are passed to the backing folder.
    #[arg(long)]
    no_rename_flags: bool,
    /// The mount's name (its "machine"; the mount source in /proc/mounts).
    #[arg(long, default_value = "faultfs")]
    name: String,
    /// Unmount and exit when this process ends (the test process that started us).
    #[arg(long)]
    watch_pid: Option<i32>,
    /// Log every request, not only those a rule acted on.
    #[arg(long)]
    log_all: bool,
    /// Threads reading requests from the kernel (held requests get threads of their own).
    #[arg(long, default_value_t = 4)]
    threads: usize,
}

/// Unmounts once: the first caller wins; later calls return at once.
struct Unmount {
    mountpoint: PathBuf,
    unmounter: Mutex<Option<SessionUnmounter>>,
    fs: Arc<fs::Inner>,
    started: AtomicBool,
}

impl Unmount {
    fn run(&self) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        // Nothing may stay hung: a process blocked in a FUSE request keeps the mount busy.
        self.fs.rules.clear();
        let taken = self
            .unmounter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let done = taken.is_some_and(|mut u| u.unmount().is_ok()) || !is_mounted(&self.mountpoint);
        if !done {
            // Busy (a process has a file or its working directory inside): detach now; the
            // kernel ends the session when the last user goes.
            let _ = sys::lazy_unmount(&self.mountpoint);
        }
        // A detached mount that someone still uses keeps the session alive; nobody can reach
        // it by its path any more, so end it (its users get ENOTCONN) after a grace period.
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_secs(5));
            std::process::exit(0);
        });
    }
}

fn is_mounted(mountpoint: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let want = mountpoint.to_string_lossy();
    info.lines()
        .any(|l| l.split(' ').nth(4).is_some_and(|m| m == want))
}

/// Parse the flags, mount, serve until unmounted.
pub fn main() {
    let args = Args::parse();
    if let Err(e) = run(args) {
        eprintln!("faultfs: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> std::io::Result<()> {
    sys::clear_umask();
    sys::raise_nofile();
    let opts = fs::Options {
        attr_ttl: Duration::from_millis(args.attr_ttl_ms),
        entry_ttl: Duration::from_millis(args.entry_ttl_ms),
        negative_ttl: Duration::from_millis(args.negative_ttl_ms),
        whole_seconds: args.whole_seconds,
        renumber: args.renumber_inodes,
        rename_flags: !args.no_rename_flags,
    };
    let inner = Arc::new(fs::Inner::new(
        &args.backing,
        opts,
        rules::Rules::new(args.log_all),
    )?);
    let mountpoint = args.mountpoint.canonicalize()?;

    let _ = std::fs::remove_file(&args.control);
    let listener = UnixListener::bind(&args.control)?;

    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(args.name.clone()),
        MountOption::Subtype("faultfs".into()),
        MountOption::NoAtime,
    ];
    // Processes of any user may use it (tests run children under other uids).
    config.acl = SessionACL::All;
    config.n_threads = Some(args.threads.max(1));
    config.clone_fd = true;
    let mut session = Session::new(fs::FaultFs::new(inner.clone()), &mountpoint, &config)?;

    let unmount = Arc::new(Unmount {
        mountpoint: mountpoint.clone(),
        unmounter: Mutex::new(Some(session.unmount_callable())),
        fs: inner.clone(),
        started: AtomicBool::new(false),
    });
    {
        let u = unmount.clone();
        let mut signals = signal_hook::iterator::Signals::new([
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGHUP,
        ])?;
        std::thread::spawn(move || {
            if signals.forever().next().is_some() {
                u.run();
            }
        });
    }
    if let Some(pid) = args.watch_pid {
        let u = unmount.clone();
        std::thread::spawn(move || {
            if sys::wait_exit(pid).is_err() {
                // No pidfd: look every 200 ms.
                // SAFETY: kill with signal 0 only checks that the process exists.
                while unsafe { libc::kill(pid, 0) } == 0
                    || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
                {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            u.run();
        });
    }
    {
        let u = unmount.clone();
        let (fs, name) = (inner.clone(), args.name.clone());
        std::thread::spawn(move || control::serve(listener, fs, name, Arc::new(move || u.run())));
    }

    let ready = serde_json::json!({
        "ready": true,
        "pid": std::process::id(),
        "mountpoint": mountpoint,
        "name": args.name,
    });
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{ready}");
    let _ = out.flush();

    let result = session.run();
    let _ = std::fs::remove_file(&args.control);
    result
}
