//! Node's POSIX `path.join` / `path.resolve` / `path.basename` (SPEC G6), so the paths the
//! addon reports and touches are byte-for-byte the ones the JavaScript originals use.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
