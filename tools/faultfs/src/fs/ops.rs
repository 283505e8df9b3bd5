//! The FUSE operations: each asks the rules through [`FaultFs::handle`] with what it would do
//! on the backing folder (`act`) and how it answers (`answer`).

use super::*;

impl Filesystem for FaultFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // What libfuse asks for by default: READDIRPLUS (adaptive), lookups and listings of
        // one folder in parallel, page-cache invalidation when a file's mtime or size moves.
        for flag in [
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_READDIRPLUS_AUTO,
            InitFlags::FUSE_PARALLEL_DIROPS,
            InitFlags::FUSE_AUTO_INVAL_DATA,
        ] {
            let _ = config.add_capabilities(flag);
        }
        if self.inner.opts.whole_seconds {
            let _ = config.set_time_granularity(Duration::from_secs(1));
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.inner.rules.open_all();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (p, n) = (parent.0, name.to_os_string());
        self.handle(
            req,
            Op("lookup", &[]),
            Subject::Child(p, name),
            reply,
            move |fs| {
                let dir = fs.node(p)?;
                match fs.lookup_child(&dir, &n) {
                    Ok(e) => Ok(Some(e)),
                    Err(e) if e == Errno::ENOENT && !fs.opts.negative_ttl.is_zero() => Ok(None),
                    Err(e) => Err(e),
                }
            },
            |fs, e, reply| match e {
                Some(e) => reply_entry(fs, e, reply),
                None => reply.entry_with_ttls(
                    &Duration::ZERO,
                    &fs.opts.negative_ttl,
                    &no_attr(FileType::RegularFile),
                    Generation(0),
                ),
            },
        );
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.inner.forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let id = ino.0;
        self.handle(
            req,
            Op("getattr", &[]),
            Subject::Node(id),
            reply,
            move |fs| match fh.and_then(|fh| fs.file(fh).ok()) {
                Some(f) => Ok(fs.attr(id, &f.metadata().map_err(errno)?)),
                None => fs.stat_node(id),
            },
            |fs, a, reply| reply.attr(&fs.opts.attr_ttl, &a),
        );
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let aliases: &'static [&'static str] = match (
            atime.is_some() || mtime.is_some(),
            size.is_some(),
            mode.is_some(),
        ) {
            (true, _, _) => &["utimens"],
            (_, true, _) => &["truncate"],
            (_, _, true) => &["chmod"],
            _ if uid.is_some() || gid.is_some() => &["chown"],
            _ => &[],
        };
        let id = ino.0;
        self.handle(
            req,
            Op("setattr", aliases),
            Subject::Node(id),
            reply,
            move |fs| {
                let node = fs.live(id)?;
                let path = fd_path(&node.file);
                if let Some(mode) = mode {
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o7777))
                        .map_err(errno)?;
                }
                if uid.is_some() || gid.is_some() {
                    std::os::unix::fs::chown(&path, uid, gid).map_err(errno)?;
                }
                if let Some(size) = size {
                    match fh.and_then(|fh| fs.file(fh).ok()) {
                        Some(f) => f.set_len(size).map_err(errno)?,
                        None => sys::open(&path, libc::O_WRONLY, 0)
                            .and_then(|f| f.set_len(size))
                            .map_err(errno)?,
                    }
                }
                if atime.is_some() || mtime.is_some() {
                    sys::utimens(&path, fs.stamp(atime), fs.stamp(mtime)).map_err(errno)?;
                }
                fs.stat_node(id)
            },
            |fs, a, reply| reply.attr(&fs.opts.attr_ttl, &a),
        );
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let id = ino.0;
        self.handle(
            req,
            Op("readlink", &[]),
            Subject::Node(id),
            reply,
            move |fs| sys::readlink(&fs.node(id)?.file).map_err(errno),
            |_, data, reply| reply.data(&data),
        );
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let (p, n) = (parent.0, name.to_os_string());
        self.handle(
            req,
            Op("mknod", &[]),
            Subject::Child(p, name),
            reply,
            move |fs| {
                let dir = fs.node(p)?;
                sys::mknod(&dir.file, &n, mode & !umask, rdev).map_err(errno)?;
                fs.lookup_child(&dir, &n)
            },
            reply_entry,
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let (p, n) = (parent.0, name.to_os_string());
        self.handle(
            req,
            Op("mkdir", &[]),
            Subject::Child(p, name),
            reply,
            move |fs| {
                let dir = fs.node(p)?;
                let path = child_path(&dir.file, &n)?;
                std::os::unix::fs::DirBuilderExt::mode(
                    &mut std::fs::DirBuilder::new(),
                    mode & !umask & 0o7777,
                )
                .create(&path)
                .map_err(errno)?;
                fs.lookup_child(&dir, &n)
            },
            reply_entry,
        );
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (p, n) = (parent.0, name.to_os_string());
        self.handle(
            req,
            Op("unlink", &[]),
            Subject::Child(p, name),
            reply,
            move |fs| std::fs::remove_file(child_path(&fs.node(p)?.file, &n)?).map_err(errno),
            |_, (), reply| reply.ok(),
        );
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let (p, n) = (parent.0, name.to_os_string());
        self.handle(
            req,
            Op("rmdir", &[]),
            Subject::Child(p, name),
            reply,
            move |fs| std::fs::remove_dir(child_path(&fs.node(p)?.file, &n)?).map_err(errno),
            |_, (), reply| reply.ok(),
        );
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let (p, n, target) = (parent.0, link_name.to_os_string(), target.to_path_buf());
        self.handle(
            req,
            Op("symlink", &[]),
            Subject::Child(p, link_name),
            reply,
            move |fs| {
                let dir = fs.node(p)?;
                std::os::unix::fs::symlink(&target, child_path(&dir.file, &n)?).map_err(errno)?;
                fs.lookup_child(&dir, &n)
            },
            reply_entry,
        );
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let (p, n, np, nn) = (
            parent.0,
            name.to_os_string(),
            newparent.0,
            newname.to_os_string(),
        );
        let flags = flags.bits();
        self.handle(
            req,
            Op("rename", &[]),
            Subject::Rename(p, name, np, newname),
            reply,
            move |fs| {
                // As sshfs's server side: a flagged rename reaches it and is refused, each time
                // (the kernel remembers only ENOSYS).
                if flags != 0 && !fs.opts.rename_flags {
                    return Err(Errno::EINVAL);
                }
                let (from, to) = (fs.node(p)?, fs.node(np)?);
                sys::renameat2(&from.file, &n, &to.file, &nn, flags).map_err(errno)
            },
            |_, (), reply| reply.ok(),
        );
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let (id, np, nn) = (ino.0, newparent.0, newname.to_os_string());
        self.handle(
            req,
            Op("link", &[]),
            Subject::Child(np, newname),
            reply,
            move |fs| {
                let (node, dir) = (fs.node(id)?, fs.node(np)?);
                sys::link(&node.file, &dir.file, &nn).map_err(errno)?;
                fs.lookup_child(&dir, &nn)
            },
            reply_entry,
        );
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let id = ino.0;
        // The kernel gives each write its offset: an O_APPEND descriptor of ours would put
        // every write at the end whatever it says.
        let flags = flags.0 & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_APPEND);
        self.handle(
            req,
            Op("open", &[]),
            Subject::Node(id),
            reply,
            move |fs| {
                let f = sys::open(&fd_path(&fs.node(id)?.file), flags, 0).map_err(errno)?;
                let fh = fs.new_fh();
                lock(&fs.files).insert(fh, Arc::new(f));
                Ok(Opened(fh))
            },
            |_, o, reply| reply.opened(FileHandle(o.0), FopenFlags::empty()),
        );
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.handle(
            req,
            Op("read", &[]),
            Subject::Node(ino.0),
            reply,
            move |fs| {
                let f = fs.file(fh)?;
                let mut buf = vec![0u8; size as usize];
                let mut got = 0;
                while got < buf.len() {
                    match f.read_at(&mut buf[got..], offset + got as u64) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(errno(e)),
                    }
                }
                buf.truncate(got);
                Ok(buf)
            },
            |_, data, reply| reply.data(&data),
        );
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let data = data.to_vec();
        self.handle(
            req,
            Op("write", &[]),
            Subject::Node(ino.0),
            reply,
            move |fs| {
                let f = fs.file(fh)?;
                f.write_all_at(&data, offset).map_err(errno)?;
                Ok(data.len() as u32)
            },
            |_, n, reply| reply.written(n),
        );
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.handle(
            req,
            Op("flush", &[]),
            Subject::Node(ino.0),
            reply,
            move |fs| fs.file(fh).map(|_| ()),
            |_, (), reply| reply.ok(),
        );
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.handle(
            req,
            Op("release", &[]),
            Subject::Node(ino.0),
            reply,
            move |fs| {
                lock(&fs.files).remove(&fh.0);
                Ok(())
            },
            |_, (), reply| reply.ok(),
        );
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.handle(
            req,
            Op("fsync", &[]),
            Subject::Node(ino.0),
            reply,
            move |fs| {
                let f = fs.file(fh)?;
                (if datasync {
                    f.sync_data()
                } else {
                    f.sync_all()
                })
                .map_err(errno)
            },
            |_, (), reply| reply.ok(),
        );
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let id = ino.0;
        self.handle(
            req,
            Op("opendir", &[]),
            Subject::Node(id),
            reply,
            move |fs| {
                let node = fs.live(id)?;
                let mut entries = vec![
                    (OsString::from("."), node.key.1, FileType::Directory),
                    (OsString::from(".."), UNKNOWN_INO, FileType::Directory),
                ];
                for e in std::fs::read_dir(fd_path(&node.file)).map_err(errno)? {
                    let e = e.map_err(errno)?;
                    let kind = e
                        .file_type()
                        .ok()
                        .and_then(FileType::from_std)
                        .unwrap_or(FileType::RegularFile);
                    entries.push((e.file_name(), std::os::unix::fs::DirEntryExt::ino(&e), kind));
                }
                let fh = fs.new_fh();
                lock(&fs.dirs).insert(fh, Arc::new(Listing { entries }));
                Ok(Opened(fh))
            },
            |_, o, reply| reply.opened(FileHandle(o.0), FopenFlags::empty()),
        );
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.handle(
            req,
            Op("readdir", &[]),
            Subject::Node(ino.0),
            reply,
            move |fs| {
                let listing = lock(&fs.dirs).get(&fh.0).cloned().ok_or(Errno::EBADF)?;
                let renumber = fs.opts.renumber;
                Ok(Plain(
                    listing
                        .entries
                        .iter()
                        .enumerate()
                        .skip(offset as usize)
                        .map(|(i, (name, ino, kind))| {
                            let ino = if renumber { UNKNOWN_INO } else { *ino };
                            (i as u64 + 1, name.clone(), ino, *kind)
                        })
                        .collect(),
                ))
            },
            |_, Plain(list), mut reply| {
                for (off, name, ino, kind) in list {
                    if reply.add(INodeNo(ino), off, kind, &name) {
                        break;
                    }
                }
                reply.ok();
            },
        );
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let id = ino.0;
        self.handle(
            req,
            Op("readdir", &[]),
            Subject::Node(id),
            reply,
            move |fs| {
                let listing = lock(&fs.dirs).get(&fh.0).cloned().ok_or(Errno::EBADF)?;
                let dir = fs.node(id)?;
                let mut out = Vec::new();
                for (i, (name, _, _)) in listing
                    .entries
                    .iter()
                    .enumerate()
                    .skip(offset as usize)
                    .take(PLUS_BATCH)
                {
                    let next = i as u64 + 1;
                    if name == "." || name == ".." {
                        out.push((next, name.clone(), None));
                        continue;
                    }
                    // A name gone since the listing is left out, as a fresh listing would.
                    if let Ok(e) = fs.lookup_child(&dir, name) {
                        out.push((next, name.clone(), Some(e)));
                    }
                }
                Ok(Plus(out))
            },
            |fs, Plus(list), mut reply| {
                let mut rest = list.into_iter();
                for (off, name, e) in rest.by_ref() {
                    let full = match &e {
                        Some(e) => reply.add(
                            INodeNo(e.id),
                            off,
                            &name,
                            &fs.opts.entry_ttl,
                            &e.attr,
                            Generation(0),
                        ),
                        None => reply.add(
                            INodeNo(0),
                            off,
                            &name,
                            &Duration::ZERO,
                            &no_attr(FileType::Directory),
                            Generation(0),
                        ),
                    };
                    if full {
                        // Not sent: the kernel never counts this lookup.
                        e.undo(fs);
                        break;
                    }
                }
                for (_, _, e) in rest {
                    e.undo(fs);
                }
                reply.ok();
            },
        );
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.handle(
            req,
            Op("releasedir", &[]),
            Subject::Node(ino.0),
            reply,
            move |fs| {
                lock(&fs.dirs).remove(&fh.0);
                Ok(())
            },
            |_, (), reply| reply.ok(),
        );
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        self.handle(
            req,
            Op("statfs", &[]),
            Subject::Node(ino.0),
            reply,
            move |fs| sys::statvfs(&fs.node(1)?.file).map_err(errno),
            |_, s, reply| {
                reply.statfs(
                    s.f_blocks,
                    s.f_bfree,
                    s.f_bavail,
                    s.f_files,
                    s.f_ffree,
                    s.f_bsize as u32,
                    s.f_namemax as u32,
                    s.f_frsize as u32,
                )
            },
        );
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let id = ino.0;
        self.handle(
            req,
            Op("access", &[]),
            Subject::Node(id),
            reply,
            move |fs| sys::access(&fd_path(&fs.live(id)?.file), mask.bits()).map_err(errno),
            |_, (), reply| reply.ok(),
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let (p, n) = (parent.0, name.to_os_string());
        let flags = (flags & !(libc::O_NOCTTY | libc::O_APPEND)) | libc::O_CREAT;
        self.handle(
            req,
            Op("create", &[]),
            Subject::Child(p, name),
            reply,
            move |fs| {
                let dir = fs.node(p)?;
                let f = sys::open(&child_path(&dir.file, &n)?, flags, mode & !umask & 0o7777)
                    .map_err(errno)?;
                // The node is the file just opened, whatever its name leads to by now.
                let path = sys::open(&fd_path(&f), libc::O_PATH, 0).map_err(errno)?;
                let e = fs.register(path)?;
                let fh = fs.new_fh();
                lock(&fs.files).insert(fh, Arc::new(f));
                Ok((e, Opened(fh)))
            },
            |fs, (e, o), reply| {
                reply.created(
                    &fs.opts.entry_ttl,
                    &e.attr,
                    Generation(0),
                    FileHandle(o.0),
                    FopenFlags::empty(),
                )
            },
        );
    }
}
