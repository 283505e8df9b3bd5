//! Node's `path.join` / `path.resolve` / `path.dirname` of the host platform (SPEC G6), so the
//! paths the addon reports and touches are exactly the ones the JavaScript originals use:
//! [`posix`] on Linux and macOS, [`win32`] on Windows. Both are compiled everywhere so each can
//! be tested against Node's `path.posix` / `path.win32` on any host.

#[cfg(not(windows))]
pub use posix::{dirname, join, normalize, resolve};
#[cfg(windows)]
pub use win32::{dirname, join, normalize, resolve};

/// Node's `path.posix`.
pub mod posix {
    /// `path.normalize` core: resolve `.` and `..` segments and collapse separators.
    fn normalize_segments(path: &str, allow_above_root: bool) -> String {
        let mut out: Vec<&str> = Vec::new();
        for seg in path.split('/') {
            match seg {
                "" | "." => {}
                ".." => {
                    if matches!(out.last(), Some(&last) if last != "..") {
                        out.pop();
                    } else if allow_above_root {
                        out.push("..");
                    }
                }
                s => out.push(s),
            }
        }
        out.join("/")
    }

    /// `path.normalize(p)` (POSIX).
    pub fn normalize(p: &str) -> String {
        if p.is_empty() {
            return ".".into();
        }
        let absolute = p.starts_with('/');
        let trailing = p.ends_with('/');
        let mut body = normalize_segments(p, !absolute);
        if body.is_empty() {
            if absolute {
                return "/".into();
            }
            return if trailing { "./".into() } else { ".".into() };
        }
        if trailing {
            body.push('/');
        }
        if absolute {
            format!("/{body}")
        } else {
            body
        }
    }

    /// `path.join(...parts)` (POSIX): empty parts are skipped; nothing left → ".".
    pub fn join(parts: &[&str]) -> String {
        let joined: Vec<&str> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
        if joined.is_empty() {
            return ".".into();
        }
        normalize(&joined.join("/"))
    }

    /// `path.resolve(p)` (POSIX) against the process's current directory.
    pub fn resolve(p: &str) -> String {
        if p.starts_with('/') {
            let body = normalize_segments(p, false);
            return format!("/{body}");
        }
        let cwd = std::env::current_dir()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "/".into());
        let body = normalize_segments(&format!("{cwd}/{p}"), false);
        format!("/{body}")
    }

    /// `path.dirname(p)` (POSIX); a run of separators before the last name is dropped whole.
    pub fn dirname(p: &str) -> String {
        let trimmed = p.trim_end_matches('/');
        if trimmed.is_empty() {
            return if p.starts_with('/') {
                "/".into()
            } else {
                ".".into()
            };
        }
        match trimmed.rfind('/') {
            None => ".".into(),
            Some(i) => {
                let head = trimmed[..i].trim_end_matches('/');
                if head.is_empty() {
                    "/".into()
                } else {
                    head.to_string()
                }
            }
        }
    }
}

/// Node's `path.win32`: `\\` and `/` both separate, roots are `\\`, `X:`, `X:\\` or a UNC
/// `\\server\\share`, and output uses `\\`.
pub mod win32 {
    fn is_sep(b: u8) -> bool {
        b == b'\\' || b == b'/'
    }

    /// Node's `normalizeString` with `\\`: resolve `.`/`..`, collapse separators.
    fn normalize_string(path: &str, allow_above_root: bool) -> String {
        let mut out: Vec<&str> = Vec::new();
        for seg in path.split(['\\', '/']) {
            match seg {
                "" | "." => {}
                ".." => {
                    if matches!(out.last(), Some(&last) if last != "..") {
                        out.pop();
                    } else if allow_above_root {
                        out.push("..");
                    }
                }
                s => out.push(s),
            }
        }
        out.join("\\")
    }

    /// The root of a win32 path: its device (`X:` or the UNC `\\server\\share`), where
    /// the root ends, and whether it is absolute.
    struct Root {
        device: Option<String>,
        end: usize,
        absolute: bool,
        /// normalize only: `\\server\\share` with nothing after it.
        bare_unc: Option<String>,
    }

    fn root(path: &str) -> Root {
        let b = path.as_bytes();
        let len = b.len();
        let mut r = Root {
            device: None,
            end: 0,
            absolute: false,
            bare_unc: None,
        };
        if len == 0 {
            return r;
        }
        if is_sep(b[0]) {
            r.absolute = true;
            r.end = 1;
            if len > 1 && is_sep(b[1]) {
                r.end = 0;
                let mut j = 2;
                let mut last = j;
                while j < len && !is_sep(b[j]) {
                    j += 1;
                }
                if j < len && j != last {
                    let first = &path[last..j];
                    last = j;
                    while j < len && is_sep(b[j]) {
                        j += 1;
                    }
                    if j < len && j != last {
                        last = j;
                        while j < len && !is_sep(b[j]) {
                            j += 1;
                        }
                        if j == len {
                            r.bare_unc = Some(format!("\\\\{first}\\{}", &path[last..]));
                        }
                        r.device = Some(format!("\\\\{first}\\{}", &path[last..j]));
                        r.end = j;
                    }
                }
                if r.device.is_none() {
                    r.end = 1;
                }
            }
        } else if len > 1 && b[0].is_ascii_alphabetic() && b[1] == b':' {
            r.device = Some(path[..2].to_string());
            r.end = 2;
            if len > 2 && is_sep(b[2]) {
                r.absolute = true;
                r.end = 3;
            }
        }
        r
    }

    /// `path.win32.normalize(p)`.
    pub fn normalize(path: &str) -> String {
        let len = path.len();
        if len == 0 {
            return ".".into();
        }
        if len == 1 {
            return if path == "/" {
                "\\".into()
            } else {
                path.into()
            };
        }
        let r = root(path);
        if let Some(unc) = r.bare_unc {
            return format!("{unc}\\");
        }
        let mut tail = if r.end < len {
            normalize_string(&path[r.end..], !r.absolute)
        } else {
            String::new()
        };
        if tail.is_empty() && !r.absolute {
            tail = ".".into();
        }
        if !tail.is_empty() && is_sep(path.as_bytes()[len - 1]) {
            tail.push('\\');
        }
        match (r.device, r.absolute) {
            (None, true) => format!("\\{tail}"),
            (None, false) => tail,
            (Some(d), true) => format!("{d}\\{tail}"),
            (Some(d), false) => format!("{d}{tail}"),
        }
    }

    /// `path.win32.join(...parts)`: empty parts skipped; a leading run of separators that
    /// the first part does not make a UNC root is collapsed to one.
    pub fn join(parts: &[&str]) -> String {
        let kept: Vec<&str> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
        let Some(first) = kept.first() else {
            return ".".into();
        };
        let mut joined = kept.join("\\");
        let fb = first.as_bytes();
        let mut needs_replace = true;
        let mut slashes = 0;
        if is_sep(fb[0]) {
            slashes += 1;
            if fb.len() > 1 && is_sep(fb[1]) {
                slashes += 1;
                if fb.len() > 2 {
                    if is_sep(fb[2]) {
                        slashes += 1;
                    } else {
                        needs_replace = false;
                    }
                }
            }
        }
        if needs_replace {
            let jb = joined.as_bytes();
            while slashes < jb.len() && is_sep(jb[slashes]) {
                slashes += 1;
            }
            if slashes >= 2 {
                joined = format!("\\{}", &joined[slashes..]);
            }
        }
        normalize(&joined)
    }

    /// `path.win32.resolve(p)` in this process (cwd, and the per-drive `=X:` variables).
    pub fn resolve(p: &str) -> String {
        let cwd = std::env::current_dir()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        resolve_with(p, &cwd, |drive| std::env::var(format!("={drive}")).ok())
    }

    /// `path.win32.resolve(p)` given the current directory and the `=X:` lookup.
    pub fn resolve_with(p: &str, cwd: &str, drive_cwd: impl Fn(&str) -> Option<String>) -> String {
        let mut resolved_device = String::new();
        let mut resolved_tail = String::new();
        let mut resolved_absolute = false;
        let mut step = 0;
        loop {
            let path: String = match step {
                0 if !p.is_empty() => p.to_string(),
                0 => {
                    step += 1;
                    continue;
                }
                _ if resolved_device.is_empty() => cwd.to_string(),
                _ => {
                    let d = drive_cwd(&resolved_device).unwrap_or_else(|| cwd.to_string());
                    let b = d.as_bytes();
                    if b.len() < 2
                        || (!b[..2].eq_ignore_ascii_case(resolved_device.as_bytes())
                            && b.get(2) == Some(&b'\\'))
                    {
                        format!("{resolved_device}\\")
                    } else {
                        d
                    }
                }
            };
            let r = root(&path);
            let device = r.device.unwrap_or_default();
            let mut skip = false;
            if !device.is_empty() {
                if !resolved_device.is_empty() {
                    skip = !device.eq_ignore_ascii_case(&resolved_device);
                } else {
                    resolved_device = device;
                }
            }
            if !skip {
                if resolved_absolute {
                    if !resolved_device.is_empty() {
                        break;
                    }
                } else {
                    resolved_tail = format!("{}\\{resolved_tail}", &path[r.end..]);
                    resolved_absolute = r.absolute;
                    if r.absolute && !resolved_device.is_empty() {
                        break;
                    }
                }
            }
            if step >= 1 {
                break;
            }
            step += 1;
        }
        let tail = normalize_string(&resolved_tail, !resolved_absolute);
        if resolved_absolute {
            format!("{resolved_device}\\{tail}")
        } else {
            let s = format!("{resolved_device}{tail}");
            if s.is_empty() {
                ".".into()
            } else {
                s
            }
        }
    }

    /// `path.win32.dirname(p)`.
    pub fn dirname(path: &str) -> String {
        let b = path.as_bytes();
        let len = b.len();
        if len == 0 {
            return ".".into();
        }
        if len == 1 {
            return if is_sep(b[0]) {
                path.into()
            } else {
                ".".into()
            };
        }
        let mut root_end: Option<usize> = None;
        let mut offset = 0;
        if is_sep(b[0]) {
            root_end = Some(1);
            offset = 1;
            if is_sep(b[1]) {
                let mut j = 2;
                let mut last = j;
                while j < len && !is_sep(b[j]) {
                    j += 1;
                }
                if j < len && j != last {
                    last = j;
                    while j < len && is_sep(b[j]) {
                        j += 1;
                    }
                    if j < len && j != last {
                        last = j;
                        while j < len && !is_sep(b[j]) {
                            j += 1;
                        }
                        if j == len {
                            return path.into();
                        }
                        if j != last {
                            root_end = Some(j + 1);
                            offset = j + 1;
                        }
                    }
                }
            }
        } else if b[0].is_ascii_alphabetic() && b[1] == b':' {
            let e = if len > 2 && is_sep(b[2]) { 3 } else { 2 };
            root_end = Some(e);
            offset = e;
        }
        let mut end = None;
        let mut matched_slash = true;
        for i in (offset..len).rev() {
            if is_sep(b[i]) {
                if !matched_slash {
                    end = Some(i);
                    break;
                }
            } else {
                matched_slash = false;
            }
        }
        match end.or(root_end) {
            None => ".".into(),
            Some(e) => path[..e].to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::posix::*;
    use super::win32;

    #[test]
    fn join_matches_node() {
        assert_eq!(join(&["a", "b", "c"]), "a/b/c");
        assert_eq!(join(&["/a/", "./b", "../c"]), "/a/c");
        assert_eq!(join(&["", ""]), ".");
        assert_eq!(join(&["a", "..", ".."]), "..");
        assert_eq!(join(&["/", "..", "x"]), "/x");
        assert_eq!(join(&["a//b", "c/"]), "a/b/c/");
        assert_eq!(join(&["./"]), "./");
        assert_eq!(join(&["R", "sessions", "x"]), "R/sessions/x");
        assert_eq!(join(&["a", "b/../../.."]), "..");
    }

    #[test]
    fn resolve_is_absolute_and_normalized() {
        assert_eq!(resolve("/a/./b/../c/"), "/a/c");
        assert_eq!(resolve("/"), "/");
        assert!(resolve("x").starts_with('/'));
    }

    /// Expected values generated with Node's own `path.win32` (the oracle), on any host.
    #[test]
    fn win32_matches_node_path_win32() {
        assert_eq!(win32::normalize("C:\\a\\..\\b"), "C:\\b");
        assert_eq!(win32::normalize("C:/a//b/"), "C:\\a\\b\\");
        assert_eq!(win32::normalize("c:"), "c:.");
        assert_eq!(win32::normalize("C:"), "C:.");
        assert_eq!(win32::normalize("C:."), "C:.");
        assert_eq!(win32::normalize("C:x/../.."), "C:..");
        assert_eq!(win32::normalize("\\\\server\\share"), "\\\\server\\share\\");
        assert_eq!(
            win32::normalize("\\\\server\\share\\"),
            "\\\\server\\share\\"
        );
        assert_eq!(
            win32::normalize("//server/share/a/../.."),
            "\\\\server\\share\\"
        );
        assert_eq!(win32::normalize("\\\\server"), "\\server");
        assert_eq!(win32::normalize("\\\\\\x"), "\\x");
        assert_eq!(win32::normalize("/a/b"), "\\a\\b");
        assert_eq!(win32::normalize("a\\b\\..\\..\\.."), "..");
        assert_eq!(win32::normalize(""), ".");
        assert_eq!(win32::normalize("."), ".");
        assert_eq!(win32::normalize("./"), ".\\");
        assert_eq!(win32::normalize("\\"), "\\");
        assert_eq!(win32::normalize("/"), "\\");
        assert_eq!(win32::normalize("a:b"), "a:b");
        assert_eq!(win32::normalize("C:\\"), "C:\\");
        assert_eq!(win32::normalize("C:\\.."), "C:\\");
        assert_eq!(win32::normalize("\\\\?\\C:\\x\\..\\y"), "\\\\?\\C:\\y");
        assert_eq!(
            win32::join(&["C:\\agent", "state", "process-matrix"]),
            "C:\\agent\\state\\process-matrix"
        );
        assert_eq!(
            win32::join(&["//server/share", "a"]),
            "\\\\server\\share\\a"
        );
        assert_eq!(win32::join(&["\\\\", "x"]), "\\x");
        assert_eq!(win32::join(&["//", "x", "y"]), "\\x\\y");
        assert_eq!(win32::join(&["///a", "b"]), "\\a\\b");
        assert_eq!(win32::join(&["C:", "x"]), "C:\\x");
        assert_eq!(win32::join(&["", ""]), ".");
        assert_eq!(win32::join(&["a", "..", ".."]), "..");
        assert_eq!(win32::join(&["C:\\a\\", "..\\b", "c/"]), "C:\\b\\c\\");
        assert_eq!(
            win32::join(&["\\\\server\\share\\", "x.json"]),
            "\\\\server\\share\\x.json"
        );
        assert_eq!(
            win32::resolve_with("C:\\x\\..\\y", "C:\\cwd\\sub", |_| None),
            "C:\\y"
        );
        assert_eq!(
            win32::resolve_with("\\x", "C:\\cwd\\sub", |_| None),
            "C:\\x"
        );
        assert_eq!(
            win32::resolve_with("y\\z", "C:\\cwd\\sub", |_| None),
            "C:\\cwd\\sub\\y\\z"
        );
        assert_eq!(
            win32::resolve_with("C:rel", "C:\\cwd\\sub", |_| None),
            "C:\\cwd\\sub\\rel"
        );
        assert_eq!(
            win32::resolve_with("D:\\a\\.\\b\\..\\c", "C:\\cwd\\sub", |_| None),
            "D:\\a\\c"
        );
        assert_eq!(
            win32::resolve_with("\\\\srv\\sh\\a\\..", "C:\\cwd\\sub", |_| None),
            "\\\\srv\\sh\\"
        );
        assert_eq!(
            win32::resolve_with("..\\..\\..\\x", "C:\\cwd\\sub", |_| None),
            "C:\\x"
        );
        assert_eq!(
            win32::resolve_with("c:\\A", "C:\\cwd\\sub", |_| None),
            "c:\\A"
        );
        assert_eq!(win32::dirname("C:\\a\\b"), "C:\\a");
        assert_eq!(win32::dirname("C:\\a"), "C:\\");
        assert_eq!(win32::dirname("C:\\"), "C:\\");
        assert_eq!(win32::dirname("C:"), "C:");
        assert_eq!(win32::dirname("C:a"), "C:");
        assert_eq!(win32::dirname("a"), ".");
        assert_eq!(win32::dirname("\\a"), "\\");
        assert_eq!(win32::dirname("\\\\srv\\sh"), "\\\\srv\\sh");
        assert_eq!(win32::dirname("\\\\srv\\sh\\"), "\\\\srv\\sh\\");
        assert_eq!(win32::dirname("\\\\srv\\sh\\a"), "\\\\srv\\sh\\");
        assert_eq!(win32::dirname("a//b"), "a/");
        assert_eq!(win32::dirname("a\\b\\"), "a");
        assert_eq!(win32::dirname("/"), "/");
        assert_eq!(win32::dirname(""), ".");
        assert_eq!(win32::dirname("."), ".");
        assert_eq!(win32::dirname("C:\\a\\b\\\\"), "C:\\a");
    }
}
