//! Session tail-recovery (SPEC §1.A, §2.A): find the last complete assistant message a dead
//! worker left in its pi session JSONL files.
//!
//! Recovery reads each candidate from its END and stops at the first qualifying record when
//! that is provably the answer the original's whole-file parse would give: the file's first
//! parsed value is a session header with version ≥ 3, so migration cannot throw and nothing
//! before the answer matters (DESIGN W-A2). Every other file takes the exact full-file path
//! (A20–A21), streamed line by line.

use crate::platform::fs::FileReadAt;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::LazyLock;
use std::sync::Mutex;
use std::time::Instant;

use memchr::memmem::Finder;

use crate::json::{self, JStr, Json, Kind};
use crate::jsstr::{is_js_whitespace, js_trim};
use crate::nodepath;

mod marks;
use marks::{ASSISTANT, ESCAPE};
#[cfg(test)]
mod props;

/// Defaults of the original module.
pub const DEFAULT_DEADLINE_MS: u64 = 5000;
pub const DEFAULT_MAX_FILES: usize = 3;
pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Recovery (A13–A26)

/// Limits of one recovery call.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_file_bytes: u64,
    pub max_files: usize,
    pub deadline: Instant,
}

/// What a file yields; `session_id` is the file-derived id (A16), used when the caller gave none.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    pub session_id: String,
    pub session_file: String,
    pub text: Vec<u16>,
    pub timestamp: Vec<u16>,
    pub stop_reason: Vec<u16>,
}

/// Why work stopped early.
struct Stop;

struct Budget<'a> {
    deadline: Instant,
    cancel: &'a AtomicBool,
    /// In a shared scan ([`shared_scan`]): this chunk's index and the index of the nearest
    /// chunk known to decide the file; past it, this chunk's work is moot.
    moot: Option<(usize, &'a AtomicUsize)>,
}

impl Budget<'_> {
    fn check(&self) -> Result<(), Stop> {
        if self.cancel.load(Ordering::Relaxed)
            || self
                .moot
                .is_some_and(|(i, nearest)| nearest.load(Ordering::Relaxed) < i)
            || Instant::now() >= self.deadline
        {
            Err(Stop)
        } else {
            Ok(())
        }
    }
}

/// A13–A16: recover from `dir`. `session_id` is used for candidate grouping only when it is a
/// non-empty string. Stops (None) at the deadline or when `cancel` is set.
pub fn recover(
    dir: &str,
    session_id: Option<&str>,
    limits: &Limits,
    cancel: &AtomicBool,
) -> Option<Recovered> {
    let budget = Budget {
        deadline: limits.deadline,
        cancel,
        moot: None,
    };
    budget.check().ok()?;
    let session_id = session_id.filter(|s| !s.is_empty());
    let candidates = candidates(dir, session_id, limits.max_files, &budget).ok()??;
    for name in candidates {
        budget.check().ok()?;
        let file_path = nodepath::join(&[dir, &name]);
        match recover_file(&file_path, limits.max_file_bytes, &budget) {
            Ok(Some(found)) => {
                return Some(Recovered {
                    session_id: name.strip_suffix(".jsonl").unwrap_or(&name).to_string(),
                    session_file: file_path,
                    text: found.text,
                    timestamp: found.timestamp,
                    stop_reason: found.stop_reason,
                })
            }
            Ok(None) => {}
            Err(Stop) => return None,
        }
    }
    None
}

/// Node's `Stats#mtimeMs`: seconds × 1e3 + nanoseconds / 1e6, in double arithmetic.
fn mtime_ms(meta: &std::fs::Metadata) -> f64 {
    crate::platform::fs::mtime_ms(meta)
}

/// A13–A14: names to try, id-matched first, newest first, at most `max_files`; Ok(None) when
/// the directory cannot be listed. Listing and stat'ing a large directory is the bulk of a
/// call's work, so both loops watch the budget.
fn candidates(
    dir: &str,
    session_id: Option<&str>,
    max_files: usize,
    budget: &Budget,
) -> Result<Option<Vec<String>>, Stop> {
    if dir.contains('\0') {
        return Ok(None);
    }
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut raw: Vec<std::ffi::OsString> = Vec::new();
    for (i, e) in listing.enumerate() {
        if i % 256 == 255 {
            budget.check()?;
        }
        if let Ok(e) = e {
            raw.push(e.file_name());
        }
    }
    // Node's order of the raw names (K1), before Node decodes them.
    crate::platform::fs::node_readdir_order(&mut raw);
    // Node decodes a name that is not UTF-8 with U+FFFD replacement (K2) and stats that
    // decoded name: the file itself is never seen, and a file that carries the decoded name is
    // seen once more.
    let names: Vec<String> = raw
        .iter()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    let suffix = session_id.map(|id| format!("_{id}.jsonl"));
    let mut matched: Vec<(f64, String)> = Vec::new();
    let mut rest: Vec<(f64, String)> = Vec::new();
    for (i, name) in names.into_iter().enumerate() {
        if i % 64 == 63 {
            budget.check()?;
        }
        let Ok(meta) = std::fs::metadata(nodepath::join(&[dir, &name])) else {
            continue;
        };
        let group = match &suffix {
            Some(s) if name.ends_with(s.as_str()) => &mut matched,
            _ => &mut rest,
        };
        group.push((mtime_ms(&meta), name));
    }
    // Stable sorts: equal mtimes keep listing order.
    let newest_first = |a: &(f64, String), b: &(f64, String)| b.0.total_cmp(&a.0);
    matched.sort_by(newest_first);
    rest.sort_by(newest_first);
    Ok(Some(
        matched
            .into_iter()
            .chain(rest)
            .take(max_files)
            .map(|(_, n)| n)
            .collect(),
    ))
}

/// The answer inside one file.
struct Found {
    text: Vec<u16>,
    timestamp: Vec<u16>,
    stop_reason: Vec<u16>,
}

/// A22–A24: the recovery answer carried by one parsed value, if it qualifies.
fn qualify(entry: Json) -> Option<Found> {
    if !entry.get("type")?.is_str("message") {
        return None;
    }
    let message = entry.get("message")?;
    if !message.get("role")?.is_str("assistant") {
        return None;
    }
    let stop_reason = match message.get("stopReason")?.str() {
        Some(s) if !s.eq_str("pending") => s.to_vec(),
        _ => return None,
    };
    let text: Vec<u16> = match message.get("content").map(Json::kind) {
        Some(Kind::Str(s)) => s.to_vec(),
        Some(Kind::Arr(parts)) => {
            let mut out: Vec<u16> = Vec::new();
            let mut first = true;
            for part in parts {
                if !part.get("type").is_some_and(|t| t.is_str("text")) {
                    continue;
                }
                if let Some(t) = part.get("text").and_then(Json::str) {
                    if t.is_empty() {
                        continue;
                    }
                    if !first {
                        out.push(u16::from(b'\n'));
                    }
                    first = false;
                    out.extend(t.units());
                }
            }
            out
        }
        _ => Vec::new(),
    };
    if text.is_empty() {
        return None;
    }
    let timestamp = entry
        .get("timestamp")
        .and_then(Json::str)
        .map(JStr::to_vec)
        .unwrap_or_default();
    Some(Found {
        text,
        timestamp,
        stop_reason,
    })
}

/// For a session header (`type === "session"`), the version migration compares: absent or
/// null → 1, else the value as JS relational comparison converts it (NaN fails them all).
fn header_version(v: Json) -> Option<f64> {
    if !v.get("type")?.is_str("session") {
        return None;
    }
    Some(match v.get("version") {
        None => 1.0,
        Some(ver) if ver.is_null() => 1.0,
        Some(ver) => ver.to_number(),
    })
}

/// A cheap exact pre-filter: a value can only carry the string "assistant" if the raw line
/// spells it out or uses a `\u` escape somewhere.
fn may_qualify(line: &[u8]) -> bool {
    static STOP_REASON: LazyLock<Finder<'static>> =
        LazyLock::new(|| Finder::new(b"\"stopReason\""));
    static TEXT: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"text\""));
    let has = |f: &Finder| f.find(line).is_some();
    if !has(&ESCAPE) {
        // Without `\u` escapes every key and every ASCII value appears literally in the raw
        // text, so a qualifying record must spell out "assistant" and the key "stopReason", and
        // its text comes from a `"text"` part or from a string `"content"`.
        return has(&ASSISTANT) && has(&STOP_REASON) && (has(&TEXT) || string_content(line));
    }
    true
}

/// Whether a line is blank after JS trim (A20). Any ASCII byte other than JS white space
/// decides "no" at once; only a line without one (white space, or non-ASCII text that may be
/// NBSP, BOM, U+2028…) is decoded.
fn is_blank(raw: &[u8]) -> bool {
    is_blank_ascii(raw) && js_trim(&String::from_utf8_lossy(raw)).is_empty()
}

/// Whether every ASCII byte of `raw` is JS white space (non-ASCII bytes are not looked at).
fn is_blank_ascii(raw: &[u8]) -> bool {
    !raw.iter()
        .any(|b| b.is_ascii() && !matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' '))
}

/// The marks without which no line passes [`may_qualify`] (`assistant`, and a `\u` escape)
/// in one block: found with forward SIMD search ([`marks::find`]) over the block's complete
/// lines the first time they are needed, then handed out from the end, so a block costs one
/// search however many lines it holds. (A backward search has no SIMD prefilter: several times
/// slower.)
#[derive(Default)]
struct Marks {
    /// Mark starts in ascending order; None before the search.
    at: Option<Vec<usize>>,
}

impl Marks {
    /// The start of the last mark in `block[..upto]`. `upto` never grows, and a mark never
    /// spans an LF, so a mark at or past `upto` lay in a line already looked at or skipped.
    fn last_before(&mut self, block: &[u8], upto: usize) -> Option<usize> {
        let at = self.at.get_or_insert_with(|| marks::find(&block[..upto]));
        while at.last().is_some_and(|&h| h >= upto) {
            at.pop();
        }
        at.last().copied()
    }

    /// Whether `block[..upto]` holds a mark, if the block was searched already (None if not).
    fn before(&mut self, block: &[u8], upto: usize) -> Option<bool> {
        self.at
            .is_some()
            .then(|| self.last_before(block, upto).is_some())
    }
}

/// Whether some `"content"` in the raw line is followed (after JSON white space and a colon)
/// by a string; a key elsewhere with that name only makes the answer "maybe".
fn string_content(line: &[u8]) -> bool {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    static CONTENT: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"content\""));
    CONTENT.find_iter(line).any(|at| {
        let mut rest = line[at + 9..].iter().skip_while(|b| ws(b));
        rest.next() == Some(&b':') && rest.find(|b| !ws(b)) == Some(&b'"')
    })
}

const CHUNK: usize = 64 * 1024;
/// How far into a file the header line is looked for before giving up on the fast path.
const HEADER_PROBE_LIMIT: usize = 1024 * 1024;

/// A17–A24 for one file: Ok(None) = nothing recoverable, Err(Stop) = out of time.
fn recover_file(path: &str, max_bytes: u64, budget: &Budget) -> Result<Option<Found>, Stop> {
    // Opened non-blocking and judged by its descriptor (A17, A18): a name that became a FIFO or
    // a device after the candidates' stat can neither hold this thread in `open` nor be read.
    let Ok(file) = crate::platform::fs::open_read_nonblocking(path) else {
        return Ok(None);
    };
    let Ok(meta) = file.metadata() else {
        return Ok(None);
    };
    let size = meta.len();
    if !meta.file_type().is_file() || size == 0 || size > max_bytes {
        return Ok(None);
    }
    // A19: only the text up to and including the last LF counts.
    let Some(tail) = last_lf_end(&file, size, budget)? else {
        return Ok(None);
    };
    match header_line_end(&file, tail.end) {
        Some(body_start) => tail_scan(&file, body_start, tail, budget),
        None => full_scan(&file, tail.end, budget),
    }
}

/// The end of the text that counts (A19) and the bytes just before it, as read to find it.
struct Tail {
    /// Offset just past the last LF.
    end: u64,
    /// Offset of `bytes` in the file: they are `[lo, end)`.
    lo: u64,
    bytes: Vec<u8>,
}

/// The offset just past the last LF of the first `size` bytes, with the chunk that holds it
/// (the backward scan starts from those bytes instead of reading them again); None without any
/// LF (or on a read error, which the original reports as "nothing recovered" too).
fn last_lf_end(file: &File, size: u64, budget: &Budget) -> Result<Option<Tail>, Stop> {
    let mut hi = size;
    let mut buf = vec![0u8; CHUNK];
    while hi > 0 {
        budget.check()?;
        let lo = hi.saturating_sub(CHUNK as u64);
        let n = (hi - lo) as usize;
        if file.read_exact_at(&mut buf[..n], lo).is_err() {
            return Ok(None);
        }
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            buf.truncate(i + 1);
            return Ok(Some(Tail {
                end: lo + i as u64 + 1,
                lo,
                bytes: buf,
            }));
        }
        hi = lo;
    }
    Ok(None)
}

/// When the first parsed value is a session header with version ≥ 3, the offset just past
/// that header's line; otherwise None (the file needs the full path).
fn header_line_end(file: &File, end: u64) -> Option<u64> {
    // Read a small prefix first and grow it until it holds the first non-blank line.
    let mut want = (end as usize).min(4096);
    let buf = loop {
        let mut buf = vec![0u8; want];
        file.read_exact_at(&mut buf, 0).ok()?;
        // Is there a complete (LF-terminated) line that is not blank?
        let complete = memchr::memrchr(b'\n', &buf).map_or(0, |i| i + 1);
        let has_line = buf[..complete]
            .split(|&b| b == b'\n')
            .any(|l| !js_trim(&String::from_utf8_lossy(l)).is_empty());
        if has_line || want as u64 >= end || want >= HEADER_PROBE_LIMIT {
            break buf;
        }
        want = (want * 4).min(HEADER_PROBE_LIMIT).min(end as usize);
    };
    // Only complete lines of the probe are decoded (LF never splits a UTF-8 sequence).
    let complete = memchr::memrchr(b'\n', &buf)? + 1;
    let text = String::from_utf8_lossy(&buf[..complete]);
    let start = text.len() - text.trim_start_matches(is_js_whitespace).len();
    let line_len = text[start..].find('\n')?;
    // `>= 3` is false for NaN, as in JS.
    let version = header_version(json::parse(&text[start..start + line_len])?.root())?;
    if version.partial_cmp(&3.0).is_none_or(|o| o.is_lt()) {
        return None;
    }
    // Byte offset of the header's LF in the file: the decoded prefix may differ in length from
    // the raw bytes (U+FFFD replacements), so find it by counting LFs instead.
    let lf_index = text[..start + line_len].matches('\n').count();
    let mut seen = 0;
    for (i, &b) in buf[..complete].iter().enumerate() {
        if b == b'\n' {
            if seen == lf_index {
                return Some(i as u64 + 1);
            }
            seen += 1;
        }
    }
    None
}

/// The per-line rules of the backward scan, in the order lines are met (last first).
struct TailLines<'a> {
    budget: &'a Budget<'a>,
    /// The whole text was JS-trimmed: the last non-blank line loses trailing JS white space.
    seen_non_blank: bool,
    count: u32,
    /// A line could not be read again: the file yields nothing, as on any read error.
    unreadable: bool,
}

impl TailLines<'_> {
    /// One line (without its LF): Ok(Some) when it carries the answer.
    fn line(&mut self, raw: &[u8]) -> Result<Option<Found>, Stop> {
        self.count = self.count.wrapping_add(1);
        if self.count.is_multiple_of(64) {
            self.budget.check()?;
        }
        if !self.seen_non_blank {
            if is_blank(raw) {
                return Ok(None);
            }
            self.seen_non_blank = true;
            // The whole-text trim may shorten this line, never lengthen it: what the trimmed
            // text spells, the raw line spells too, so the pre-filter holds for it as well.
            if !may_qualify(raw) {
                return Ok(None);
            }
            let text = String::from_utf8_lossy(raw);
            let trimmed = text.trim_end_matches(is_js_whitespace);
            return Ok(json::parse(trimmed).and_then(|d| qualify(d.root())));
        }
        if !may_qualify(raw) {
            return Ok(None);
        }
        Ok(json::parse(&String::from_utf8_lossy(raw)).and_then(|d| qualify(d.root())))
    }

    /// A line that spans blocks, complete now: decided from what [`Carry`] noted where that
    /// is enough, else read again whole and looked at as any other line.
    fn carried(&mut self, file: &File, c: &Carry) -> Result<Option<Found>, Stop> {
        if !c.marked && (self.seen_non_blank || c.ascii_mark) {
            // No mark: not a candidate (may_qualify). A non-blank one ends the blank run.
            self.seen_non_blank = true;
            return Ok(None);
        }
        let mut whole = vec![0u8; (c.hi - c.lo) as usize];
        if file.read_exact_at(&mut whole, c.lo).is_err() {
            self.unreadable = true;
            return Ok(None);
        }
        self.line(&whole)
    }

    /// The lines ending in `block` (the bytes `[lo, lo + block.len())`), last first. `carry`
    /// stands for the line that continues past the block: it is completed here, and on return
    /// stands for the part of `block` before its first LF, unless `first` says the block
    /// starts the range (then that part is the range's first line).
    fn block(
        &mut self,
        file: &File,
        lo: u64,
        block: &[u8],
        carry: &mut Carry,
        first: bool,
    ) -> Result<Option<Found>, Stop> {
        self.budget.check()?;
        let Some(last_lf) = memchr::memrchr(b'\n', block) else {
            carry.prepend(lo, block, None);
            if first {
                return self.carried(file, carry);
            }
            return Ok(None);
        };
        let head = &block[last_lf + 1..];
        let found = if carry.lo == carry.hi {
            self.line(head)?
        } else {
            carry.prepend(lo + last_lf as u64 + 1, head, None);
            self.carried(file, carry)?
        };
        if found.is_some() || self.unreadable {
            return Ok(found);
        }
        let mut upto = last_lf;
        let mut marks = Marks::default();
        loop {
            // The next line to look at, from the end: every line until the last non-blank one
            // was met (it is parsed whole); past it, only a line holding a mark of may_qualify,
            // so the lines between are skipped without a look ([`Marks`]).
            let (start, end) = if self.seen_non_blank {
                let Some(h) = marks.last_before(block, upto) else {
                    break;
                };
                let Some(start) = memchr::memrchr(b'\n', &block[..h]) else {
                    break; // the mark is in the block's leading piece
                };
                let end = memchr::memchr(b'\n', &block[h..upto]).map_or(upto, |i| h + i);
                (start, end)
            } else {
                let Some(start) = memchr::memrchr(b'\n', &block[..upto]) else {
                    break;
                };
                (start, upto)
            };
            if let Some(found) = self.line(&block[start + 1..end])? {
                return Ok(Some(found));
            }
            upto = start;
        }
        // The piece before the block's first LF: the range's first line, or the front of a line
        // the previous block completes.
        let lead = &block[..memchr::memchr(b'\n', &block[..upto]).unwrap_or(upto)];
        if first {
            return self.line(lead);
        }
        *carry = Carry::empty(lo + lead.len() as u64);
        // The block's mark search covered the lead too: its answer saves searching it again.
        carry.prepend(lo, lead, marks.before(block, lead.len()));
        Ok(None)
    }
}

/// A line that spans blocks, known by its place in the file and by what the pre-filter needs
/// of its bytes, not by the bytes: a long line crossing a block boundary is not copied (two
/// copies of every such line took ~12% of a scan), and is read again only when it may matter.
struct Carry {
    /// The bytes `[lo, hi)` of the file.
    lo: u64,
    hi: u64,
    /// Holds a mark of [`may_qualify`] (`assistant` or a `\u` escape).
    marked: bool,
    /// Holds an ASCII byte that is not JS white space (so it is not blank, [`is_blank`]).
    ascii_mark: bool,
    /// Its first bytes (up to [`Carry::HEAD`]), for a mark split by a block boundary.
    head: Vec<u8>,
}

impl Carry {
    /// Enough for the longest mark (`assistant`, 9 bytes) to fit on either side of a boundary.
    const HEAD: usize = 16;

    fn empty(at: u64) -> Carry {
        Carry {
            lo: at,
            hi: at,
            marked: false,
            ascii_mark: false,
            head: Vec::new(),
        }
    }

    /// Extend the line backwards by `piece`, the bytes `[lo, self.lo)`; `marked` says whether
    /// the piece holds a mark when that is known already.
    fn prepend(&mut self, lo: u64, piece: &[u8], marked: Option<bool>) {
        debug_assert_eq!(lo + piece.len() as u64, self.lo);
        // A mark across the boundary starts in the piece's last 8 bytes and ends in the first
        // 8 bytes after it (the head).
        let mut seam = piece[piece.len().saturating_sub(Self::HEAD / 2)..].to_vec();
        seam.extend_from_slice(&self.head);
        self.marked =
            self.marked || marked.unwrap_or_else(|| marks::any(piece)) || marks::any(&seam);
        self.ascii_mark = self.ascii_mark || !is_blank_ascii(piece);
        let mut head = piece[..piece.len().min(Self::HEAD)].to_vec();
        let more = (Self::HEAD - head.len()).min(self.head.len());
        head.extend_from_slice(&self.head[..more]);
        self.head = head;
        self.lo = lo;
    }
}

/// Block sizes of the backward scan: small first (an answer near the end costs one small read;
/// the first block is the chunk [`last_lf_end`] read), doubling up to 128 KiB and no further:
/// the scan reads past an answer by at most one block, and a block this size is still in the
/// core's cache when its marks are searched. Measured in alternating runs against 256 KiB:
/// ~12% faster for an answer 1 MiB from the end and no slower for a whole 64 MiB file; 64 KiB
/// was slower again (more long lines cross an edge). A thread reads and scans its own range: a
/// reader thread copying ahead for it measured slower on this 2-core machine (a join per block,
/// or a channel two blocks deep). Long scans are shared by two threads instead ([`shared_scan`]).
const FIRST_BLOCK: u64 = 64 * 1024;
const MAX_BLOCK: u64 = 128 * 1024;

/// Read `[lo, hi)` into `buf`, reusing its memory: a long scan neither zeroes nor faults in a
/// fresh buffer per block.
fn read_block(file: &File, lo: u64, hi: u64, mut buf: Vec<u8>) -> Option<Vec<u8>> {
    buf.resize((hi - lo) as usize, 0);
    file.read_exact_at(&mut buf, lo).ok()?;
    Some(buf)
}

/// Where a backward scan stands: the block `[lo, lo + block.len())` is the next to look at;
/// `carry` stands for the line that continues past it, `size` is the last block size read.
struct Cursor {
    lo: u64,
    block: Vec<u8>,
    carry: Carry,
    size: u64,
}

impl Cursor {
    /// A fresh scan of the lines that end before `hi`, itself just past an LF (or the end of
    /// the text); None on a read error.
    fn at(file: &File, start: u64, hi: u64, buf: Vec<u8>) -> Option<Cursor> {
        let lo = hi.saturating_sub(MAX_BLOCK).max(start);
        Some(Cursor {
            lo,
            block: read_block(file, lo, hi, buf)?,
            carry: Carry::empty(hi),
            size: MAX_BLOCK,
        })
    }
}

/// How far [`scan_down`] got.
enum Scanned {
    /// The range is decided: its answer, or None.
    Done(Option<Found>),
    /// The cursor went below the pause point; the scan continues from it.
    Paused,
}

/// The backward scan of the lines from `start` (a line start) to the cursor, block by block;
/// pauses once the cursor is below `pause_below` with more to scan.
fn scan_down(
    file: &File,
    lines: &mut TailLines,
    start: u64,
    cur: &mut Cursor,
    pause_below: u64,
) -> Result<Scanned, Stop> {
    loop {
        let first = cur.lo <= start;
        if let Some(found) = lines.block(file, cur.lo, &cur.block, &mut cur.carry, first)? {
            return Ok(Scanned::Done(Some(found)));
        }
        if lines.unreadable || first {
            return Ok(Scanned::Done(None));
        }
        cur.size = (cur.size * 2).min(MAX_BLOCK);
        let hi = cur.lo;
        cur.lo = hi.saturating_sub(cur.size).max(start);
        // The lines of a block are done before the next read, so one buffer serves the whole
        // scan.
        cur.block = match read_block(file, cur.lo, hi, std::mem::take(&mut cur.block)) {
            Some(b) => b,
            None => {
                // As any read error: the scan ends here and the file yields nothing.
                lines.unreadable = true;
                return Ok(Scanned::Done(None));
            }
        };
        if cur.lo < pause_below {
            return Ok(Scanned::Paused);
        }
    }
}

/// A scan this far from the end without an answer is likely a long one: the rest is shared
/// with a second thread ([`shared_scan`]). Answers near the end never pay for a thread; those
/// just past this point pay for starting one (COMPATIBILITY.md, "Session recovery", measured
/// against 16 MiB: ~10% later 9 MiB from the end, 13–26% sooner from 12 MiB on and for a whole
/// file).
const SHARE_AFTER: u64 = 8 * 1024 * 1024;
/// Rests smaller than this stay on one thread: sharing them would save little at the price of
/// a second busy core.
const SHARE_MIN: u64 = 8 * 1024 * 1024;
/// The pieces a shared scan hands out, from the end: small enough that a thread working on a
/// piece past the answer wastes little, large enough that cutting it at a line start is cheap.
const SHARE_CHUNK: u64 = 1024 * 1024;

/// Fast path: scan `[body_start, end)` from the end; the first qualifying value is the answer.
fn tail_scan(
    file: &File,
    body_start: u64,
    tail: Tail,
    budget: &Budget,
) -> Result<Option<Found>, Stop> {
    let mut lines = TailLines {
        budget,
        seen_non_blank: false,
        count: 0,
        unreadable: false,
    };
    // The first block is the chunk last_lf_end read (less whatever precedes the body).
    let (lo, hi) = (tail.lo.max(body_start), tail.end);
    if lo >= hi {
        return Ok(None);
    }
    let mut block = tail.bytes;
    block.drain(..(lo - tail.lo) as usize);
    let mut cur = Cursor {
        lo,
        block,
        carry: Carry::empty(hi),
        size: FIRST_BLOCK,
    };
    let pause = hi.saturating_sub(SHARE_AFTER);
    if let Scanned::Done(found) = scan_down(file, &mut lines, body_start, &mut cur, pause)? {
        return Ok(found);
    }
    // Shared only once the text's last non-blank line is behind (the whole-text trim applies
    // to it alone, so every line left is read as is).
    if lines.seen_non_blank && cur.lo - body_start >= SHARE_MIN {
        if let Some(helper) = Helper::claim() {
            if let Some(first_end) = chunk_start(file, body_start, cur.lo) {
                return shared_scan(file, body_start, &mut lines, &mut cur, first_end, helper);
            }
        }
    }
    scan_down(file, &mut lines, body_start, &mut cur, 0).map(Scanned::into_found)
}

/// A claim on one of the threads shared scans may add: at most one fewer than the cores, for
/// the whole process, so that they never put more scan threads than cores to work (and none on
/// one core). Released when dropped.
struct Helper;

static HELPERS: AtomicUsize = AtomicUsize::new(0);

/// Shared scans started (tests check that the shared path is taken).
#[cfg(test)]
static SHARED_SCANS: AtomicUsize = AtomicUsize::new(0);

impl Helper {
    fn claim() -> Option<Helper> {
        static MAX: LazyLock<usize> =
            LazyLock::new(|| std::thread::available_parallelism().map_or(1, |n| n.get()) - 1);
        HELPERS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < *MAX).then_some(n + 1)
            })
            .ok()
            .map(|_| Helper)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        HELPERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What one chunk of a shared scan came to.
enum Chunk {
    /// No qualifying line: the answer, if any, lies nearer the front.
    Nothing,
    /// The chunk decides the file: its last qualifying line, or None for a read error (the
    /// file yields nothing, as when a one-thread scan meets it).
    Decides(Option<Found>),
    /// Out of time, or cancelled.
    Stopped,
}

impl Chunk {
    /// What a chunk's scan (through `lines`) came to.
    fn of(scanned: Result<Scanned, Stop>, lines: &TailLines) -> Chunk {
        match scanned.map(Scanned::into_found) {
            Ok(None) if !lines.unreadable => Chunk::Nothing,
            Ok(found) => Chunk::Decides(found),
            Err(Stop) => Chunk::Stopped,
        }
    }
}

/// The chunks of a shared scan, handed out from the end: chunk 0 ends where the scan stood,
/// each next one ends where the previous one starts, always at a line start.
struct Chunks<'a> {
    file: &'a File,
    body_start: u64,
    claims: Mutex<Claims>,
    /// The index of the nearest chunk (to the end) known to decide the file, or to have
    /// stopped; chunks past it are moot (their threads stop, and no more are handed out).
    nearest: AtomicUsize,
}

struct Claims {
    /// Where the next chunk ends (`body_start`: none left).
    next_end: u64,
    /// The outcomes by chunk index (None while a chunk is scanned).
    outcomes: Vec<Option<Chunk>>,
}

impl Chunks<'_> {
    /// The next chunk to scan: its index and range. None when none is left or it would be moot.
    fn claim(&self) -> Option<(usize, u64, u64)> {
        let mut c = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        let i = c.outcomes.len();
        if c.next_end <= self.body_start || self.nearest.load(Ordering::Acquire) < i {
            return None;
        }
        let end = c.next_end;
        // A line longer than what is left of the search: the rest is one chunk.
        let start = chunk_start(self.file, self.body_start, end).unwrap_or(self.body_start);
        c.next_end = start;
        c.outcomes.push(None);
        Some((i, start, end))
    }

    fn record(&self, i: usize, outcome: Chunk) {
        if !matches!(outcome, Chunk::Nothing) {
            self.nearest.fetch_min(i, Ordering::AcqRel);
        }
        let mut c = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        c.outcomes[i] = Some(outcome);
    }

    /// Scan chunks until none is left (run by every thread of the shared scan), reading them
    /// into `buf` (one buffer for all the chunks a thread scans: a fresh 128 KiB per chunk cost
    /// its page faults every time).
    fn work(&self, budget: &Budget, mut buf: Vec<u8>) {
        while let Some((i, start, end)) = self.claim() {
            let budget = Budget {
                deadline: budget.deadline,
                cancel: budget.cancel,
                moot: Some((i, &self.nearest)),
            };
            let mut lines = TailLines {
                budget: &budget,
                seen_non_blank: true,
                count: 0,
                unreadable: false,
            };
            let outcome = match Cursor::at(self.file, start, end, std::mem::take(&mut buf)) {
                None => Chunk::Decides(None),
                Some(mut cur) => {
                    let scanned = scan_down(self.file, &mut lines, start, &mut cur, 0);
                    buf = cur.block;
                    Chunk::of(scanned, &lines)
                }
            };
            self.record(i, outcome);
        }
    }

    /// The file's outcome: that of the nearest chunk that did not come to nothing.
    fn outcome(self) -> Result<Option<Found>, Stop> {
        let claims = self.claims.into_inner().unwrap_or_else(|e| e.into_inner());
        for outcome in claims.outcomes {
            match outcome {
                Some(Chunk::Nothing) => {}
                Some(Chunk::Decides(found)) => return Ok(found),
                // A chunk left unfinished before a deciding one only by a stop.
                Some(Chunk::Stopped) | None => return Err(Stop),
            }
        }
        Ok(None)
    }
}

/// The rest of a long backward scan, shared by this thread and a helper thread, chunk by chunk
/// from the end ([`Chunks`]): this thread first finishes chunk 0, the lines from `first_end`
/// (a line start) to where it stood, with its own state; the helper meanwhile takes chunk 1,
/// and from then on each thread takes the next chunk nearest the end. The nearest chunk that
/// holds an answer (or meets a read error) decides, exactly as a one-thread scan would; chunks
/// past it stop at their next check. Every line left is followed by a non-blank one, so none
/// is subject to the whole-text trim (A19). The helper is started from a recovery thread, so
/// it inherits that thread's lowered priority (Linux threads inherit their creator's nice
/// value). Both threads read the one handle at explicit offsets only (`pread`; `seek_read` on
/// Windows), never through its cursor.
fn shared_scan(
    file: &File,
    body_start: u64,
    lines: &mut TailLines,
    cur: &mut Cursor,
    first_end: u64,
    helper: Helper,
) -> Result<Option<Found>, Stop> {
    #[cfg(test)]
    SHARED_SCANS.fetch_add(1, Ordering::Relaxed);
    let budget = lines.budget;
    let chunks = Chunks {
        file,
        body_start,
        claims: Mutex::new(Claims {
            next_end: first_end,
            outcomes: vec![None],
        }),
        nearest: AtomicUsize::new(usize::MAX),
    };
    std::thread::scope(|s| {
        let started = std::thread::Builder::new()
            .name("pi-recovery-share".into())
            .spawn_scoped(s, || {
                let _helper = helper;
                chunks.work(budget, Vec::new());
            });
        let first = scan_down(file, lines, first_end, cur, 0);
        chunks.record(0, Chunk::of(first, lines));
        chunks.work(budget, std::mem::take(&mut cur.block));
        // Without a helper this thread took every chunk itself.
        if let Ok(helper) = started {
            if let Err(panic) = helper.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    chunks.outcome()
}

impl Scanned {
    fn into_found(self) -> Option<Found> {
        match self {
            Scanned::Done(found) => found,
            Scanned::Paused => unreachable!("no pause below 0"),
        }
    }
}

/// Where a chunk that ends at `end` (a line start) starts: the first line start at least
/// [`SHARE_CHUNK`] before `end`, within 1 MiB after that point; `body_start` when that point
/// is at or before it. None when no line starts there (or on a read error).
fn chunk_start(file: &File, body_start: u64, end: u64) -> Option<u64> {
    let at = end.saturating_sub(SHARE_CHUNK);
    if at <= body_start {
        return Some(body_start);
    }
    // The line start must come before `end`, so the chunk is never empty.
    let limit = (end - 1).min(at + 1024 * 1024);
    let mut buf = vec![0u8; CHUNK];
    let mut lo = at;
    while lo < limit {
        let n = ((limit - lo) as usize).min(CHUNK);
        file.read_exact_at(&mut buf[..n], lo).ok()?;
        if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
            return Some(lo + i as u64 + 1);
        }
        lo += n as u64;
    }
    None
}

/// Facts of the whole-file path: the migration outcome (A21) and the last answer (A22).
#[derive(Default)]
struct Migration {
    header_version: Option<f64>,
    null_before_header: bool,
    any_null: bool,
    any_primitive: bool,
}

impl Migration {
    fn observe(&mut self, v: Json) {
        if v.is_null() {
            self.any_null = true;
            if self.header_version.is_none() {
                self.null_before_header = true;
            }
        } else if v.is_primitive() {
            self.any_primitive = true;
        } else if v.is_obj() && self.header_version.is_none() {
            self.header_version = header_version(v);
        }
    }

    /// Would the SDK's migration throw on this file?
    fn throws(&self) -> bool {
        if self.null_before_header {
            return true;
        }
        let v = self.header_version.unwrap_or(1.0);
        if v >= 3.0 {
            false
        } else if v < 2.0 {
            self.any_null || self.any_primitive
        } else if v < 3.0 {
            self.any_null
        } else {
            false // NaN fails every comparison
        }
    }
}

/// Exact path (A20–A24): every line of `[0, end)`, front to back.
fn full_scan(file: &File, end: u64, budget: &Budget) -> Result<Option<Found>, Stop> {
    let mut reader = BufReader::with_capacity(CHUNK, file.take(end));
    let mut migration = Migration::default();
    let mut answer: Option<Found> = None;
    let mut at_start = true;
    // The last non-blank line is held back: the whole-text trim strips its trailing white space.
    let mut held: Option<String> = None;
    let mut line: Vec<u8> = Vec::new();
    let mut count = 0u32;
    fn consider(text: &str, migration: &mut Migration, answer: &mut Option<Found>) {
        if let Some(d) = json::parse(text) {
            let v = d.root();
            migration.observe(v);
            if let Some(found) = qualify(v) {
                *answer = Some(found);
            }
        }
    }
    loop {
        count = count.wrapping_add(1);
        if count.is_multiple_of(64) {
            budget.check()?;
        }
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return Ok(None),
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let decoded = String::from_utf8_lossy(&line);
        let mut piece: &str = &decoded;
        if at_start {
            piece = piece.trim_start_matches(is_js_whitespace);
        }
        if js_trim(piece).is_empty() {
            continue;
        }
        at_start = false;
        if let Some(prev) = held.replace(piece.to_string()) {
            consider(&prev, &mut migration, &mut answer);
        }
    }
    if let Some(last) = held {
        consider(
            last.trim_end_matches(is_js_whitespace),
            &mut migration,
            &mut answer,
        );
    }
    Ok(if migration.throws() { None } else { answer })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    /// The defaults, with a deadline no test reaches: a debug build scanning megabytes on a
    /// loaded machine (other jobs, other test binaries) can take seconds.
    fn limits() -> Limits {
        Limits {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_files: DEFAULT_MAX_FILES,
            deadline: Instant::now() + Duration::from_secs(120),
        }
    }

    fn write(dir: &std::path::Path, name: &str, body: &str) {
        std::fs::File::create(dir.join(name))
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
    }

    const HEADER: &str = r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#;

    fn assistant(text: &str, stop: &str) -> String {
        format!(
            r#"{{"type":"message","id":"a","parentId":null,"timestamp":"T","message":{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"stopReason":"{stop}"}}}}"#
        )
    }

    #[test]
    fn tail_and_full_paths_agree_on_simple_sessions() {
        let tmp = std::env::temp_dir().join(format!("pi-native-sr-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let user = r#"{"type":"message","message":{"role":"user","content":"hi"}}"#;
        let body = format!(
            "{}\n{}\n{}\n{}\n",
            HEADER,
            assistant("one", "stop"),
            assistant("two", "pending"),
            user
        );
        write(&tmp, "2026_s.jsonl", &body);
        // Same records without a header: full path, and v1 migration has nothing to reject.
        let no_header = body.replacen(&format!("{HEADER}\n"), "", 1);
        write(&tmp, "other.jsonl", &no_header);
        let cancel = AtomicBool::new(false);
        let dir = tmp.to_str().unwrap();
        let r = recover(dir, Some("s"), &limits(), &cancel).unwrap();
        assert_eq!(String::from_utf16(&r.text).unwrap(), "one");
        assert_eq!(r.session_id, "2026_s");
        let f = File::open(tmp.join("other.jsonl")).unwrap();
        let budget = Budget {
            deadline: Instant::now() + Duration::from_secs(5),
            cancel: &cancel,
            moot: None,
        };
        let end = last_lf_end(&f, f.metadata().unwrap().len(), &budget)
            .ok()
            .flatten()
            .unwrap()
            .end;
        assert!(header_line_end(&f, end).is_none());
        let found = full_scan(&f, end, &budget).ok().flatten().unwrap();
        assert_eq!(String::from_utf16(&found.text).unwrap(), "one");
        // A primitive line in a v1 file makes migration throw: nothing recovered.
        write(&tmp, "other.jsonl", &format!("5\n{no_header}"));
        let f = File::open(tmp.join("other.jsonl")).unwrap();
        let end = last_lf_end(&f, f.metadata().unwrap().len(), &budget)
            .ok()
            .flatten()
            .unwrap()
            .end;
        assert!(full_scan(&f, end, &budget).ok().flatten().is_none());
        // Cancellation stops the whole call.
        cancel.store(true, Ordering::Relaxed);
        assert!(recover(dir, Some("s"), &limits(), &cancel).is_none());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn shared_scans_find_what_one_thread_finds() {
        // Files long enough for shared_scan, with the answer at the front, in the chunk the
        // scan's own thread finishes (chunk 0), in the helper's first chunk, on a 1.5 MiB line
        // that several chunk cuts fall into, and far from both ends; a file without an answer;
        // and one blank from before the sharing point (not shared: the trim must apply to the
        // answer).
        let tmp = std::env::temp_dir().join(format!("pi-native-shared-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let filler = format!(
            r#"{{"type":"message","message":{{"role":"toolResult","content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(60_000)
        );
        let fill = |kib: usize| {
            let mut s = String::new();
            while s.len() < kib << 10 {
                s.push_str(&filler);
                s.push('\n');
            }
            s
        };
        let decoy = assistant("decoy", "stop");
        let pending = assistant("pending", "pending");
        let file = |before: usize, answer: &str, after: usize| {
            format!(
                "{HEADER}\n{decoy}\n{}{answer}\n{pending}\n{}",
                fill(before),
                fill(after)
            )
        };
        let long = "a".repeat(1536 << 10);
        // Distances from the end in KiB, from the sharing point on.
        let share = (SHARE_AFTER >> 10) as usize;
        let cases = [
            (
                "front",
                file(512, &assistant("front", "stop"), share + (9 << 10)),
                true,
            ),
            (
                "chunk 0",
                file(9 << 10, &assistant("chunk 0", "stop"), share + 512),
                true,
            ),
            (
                "chunk 1",
                file(9 << 10, &assistant("chunk 1", "stop"), share + 1536),
                true,
            ),
            (
                "long",
                file(9 << 10, &assistant(&long, "stop"), share + (2 << 10)),
                true,
            ),
            (
                "middle",
                file(9 << 10, &assistant("middle", "stop"), share + (4 << 10)),
                true,
            ),
            (
                "none",
                format!(
                    "{HEADER}\n{}{pending}\n{}",
                    fill(1 << 10),
                    fill(share + (8 << 10))
                ),
                true,
            ),
            (
                "trimmed",
                format!(
                    "{HEADER}\n{decoy}\n{}{}\u{a0}\n{}",
                    fill(9 << 10),
                    assistant("trimmed", "stop"),
                    " \n".repeat((share + (1 << 10)) << 9)
                ),
                false,
            ),
        ];
        let cancel = AtomicBool::new(false);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for (name, body, shared) in &cases {
            let before = SHARED_SCANS.load(Ordering::Relaxed);
            write(&tmp, "2026_s.jsonl", body);
            let r = recover(tmp.to_str().unwrap(), Some("s"), &limits(), &cancel);
            let text = r.map(|r| String::from_utf16(&r.text).unwrap());
            let want = match *name {
                "long" => Some(long.clone()),
                "none" => None,
                other => Some(other.to_string()),
            };
            assert!(text == want, "{name}: found {:.40?}", text);
            // No other test scans files this long, so the helper is free (given a 2nd core).
            assert_eq!(
                SHARED_SCANS.load(Ordering::Relaxed) > before,
                *shared && cores > 1,
                "{name}: shared"
            );
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
