//! Process-matrix entries: validation (SPEC V1–V20) of a parsed file, and the CAS equality of
//! `util.isDeepStrictEqual` (B20) between a parsed value and the caller's `expected`.
//!
//! Timestamps are valid iff V8's `Date.parse` is finite (G7). The common ISO form is decided
//! here; any other string is reported back as pending so the caller can ask V8 itself.

use std::collections::HashMap;

use crate::json::{JStr, Json, Kind, Members};
use crate::jsstr::is_safe_integer;

/// The caller's `expected` value, as far as deep-strict equality with parsed JSON can tell.
#[derive(Debug, PartialEq)]
pub enum Exp {
    Undefined,
    Null,
    Bool(bool),
    Num(f64),
    Str(Vec<u16>),
    Arr(Vec<Exp>),
    /// Own enumerable string keys (unique) and their values.
    Obj(Vec<(Vec<u16>, Exp)>),
    /// Can never equal a parsed JSON value: functions, symbols, bigints, Date/Map/class
    /// instances, null-prototype objects, holey arrays or arrays with extra properties, objects
    /// with own enumerable symbol keys, cycles.
    Never,
}

impl Drop for Exp {
    // An expected value can be arbitrarily deep too.
    fn drop(&mut self) {
        drop_tree(self, take_exp_children);
    }
}

/// Drop a tree without recursion: the derived drop recurses once per nesting level, and a
/// 10⁶-deep value would overflow the stack. `take_children` moves a node's children out.
fn drop_tree<T>(root: &mut T, take_children: fn(&mut T, &mut Vec<T>)) {
    let mut stack: Vec<T> = Vec::new();
    take_children(root, &mut stack);
    while let Some(mut v) = stack.pop() {
        take_children(&mut v, &mut stack);
    }
}

fn take_exp_children(v: &mut Exp, out: &mut Vec<Exp>) {
    match v {
        Exp::Arr(items) if !items.is_empty() => out.append(items),
        Exp::Obj(members) if !members.is_empty() => out.extend(members.drain(..).map(|(_, m)| m)),
        _ => {}
    }
}

/// Object members with duplicate keys resolved as JSON.parse does (the last value wins).
fn effective<'a>(members: Members<'a>) -> Vec<(JStr<'a>, Json<'a>)> {
    let all: Vec<(JStr<'a>, Json<'a>)> = members.collect();
    if all.len() <= 32 {
        return all
            .iter()
            .enumerate()
            .filter(|(i, (k, _))| !all[i + 1..].iter().any(|(k2, _)| k2 == k))
            .map(|(_, m)| *m)
            .collect();
    }
    let keys: Vec<Vec<u16>> = all.iter().map(|(k, _)| k.to_vec()).collect();
    let mut last: HashMap<&[u16], usize> = HashMap::new();
    for (i, k) in keys.iter().enumerate() {
        last.insert(k.as_slice(), i);
    }
    all.iter()
        .enumerate()
        .filter(|(i, _)| last.get(keys[*i].as_slice()) == Some(i))
        .map(|(_, m)| *m)
        .collect()
}

/// SameValue on numbers: -0 ≠ 0, NaN = NaN.
fn same_value(a: f64, b: f64) -> bool {
    if a.is_nan() && b.is_nan() {
        return true;
    }
    a == b && a.is_sign_negative() == b.is_sign_negative()
}

/// `util.isDeepStrictEqual(a, b)` for two parsed JSON values (iterative).
pub fn json_eq(a: Json, b: Json) -> bool {
    let mut stack: Vec<(Json, Json)> = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        match (a.kind(), b.kind()) {
            (Kind::Null, Kind::Null) => {}
            (Kind::Bool(x), Kind::Bool(y)) if x == y => {}
            (Kind::Num(x), Kind::Num(y)) if same_value(x, y) => {}
            (Kind::Str(x), Kind::Str(y)) if x == y => {}
            (Kind::Arr(x), Kind::Arr(y)) if x.len() == y.len() => stack.extend(x.zip(y)),
            (Kind::Obj(x), Kind::Obj(y)) => {
                let (ex, ey) = (effective(x), effective(y));
                if ex.len() != ey.len() {
                    return false;
                }
                for (k, v) in ex {
                    match ey.iter().find(|(k2, _)| *k2 == k) {
                        Some((_, w)) => stack.push((v, *w)),
                        None => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

/// `util.isDeepStrictEqual(current, expected)` where `current` is a parsed value (iterative).
pub fn matches_expected(current: Json, expected: &Exp) -> bool {
    let mut stack: Vec<(Json, &Exp)> = vec![(current, expected)];
    while let Some((a, b)) = stack.pop() {
        match (a.kind(), b) {
            (Kind::Null, Exp::Null) => {}
            (Kind::Bool(x), Exp::Bool(y)) if x == *y => {}
            (Kind::Num(x), Exp::Num(y)) if same_value(x, *y) => {}
            (Kind::Str(x), Exp::Str(y)) if x.eq_units(y) => {}
            (Kind::Arr(x), Exp::Arr(y)) if x.len() == y.len() => stack.extend(x.zip(y)),
            (Kind::Obj(x), Exp::Obj(y)) => {
                let ex = effective(x);
                if ex.len() != y.len() {
                    return false;
                }
                for (k, w) in y {
                    match ex.iter().find(|(k2, _)| k2.eq_units(k)) {
                        Some((_, v)) => stack.push((*v, w)),
                        None => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

/// The CAS comparison (B8): `current` is the validated parsed file (None = absent/invalid).
pub fn cas_matches(current: Option<Json>, expected: &Exp) -> bool {
    match current {
        None => matches!(expected, Exp::Undefined),
        Some(v) => matches_expected(v, expected),
    }
}

// ---------------------------------------------------------------------------------------------
// Timestamps (G7)

/// Decide `Number.isFinite(Date.parse(s))` without V8 where that is certain: the strict ISO
/// form `YYYY-MM-DDTHH:mm:ss[.fraction](Z|±HH:mm)` with in-range fields is always finite,
/// the empty string never is; anything else → None (ask V8).
pub fn timestamp_fast(s: &[u16]) -> Option<bool> {
    if s.is_empty() {
        return Some(false);
    }
    let b: Vec<u8> = s
        .iter()
        .map(|&u| if u < 128 { u as u8 } else { 0 })
        .collect();
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = b.get(r)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        Some(part.iter().fold(0, |a, d| a * 10 + u32::from(d - b'0')))
    };
    let fixed = || -> Option<()> {
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        digits(0..4)?;
        let (mo, d) = (digits(5..7)?, digits(8..10)?);
        let (h, mi, sec) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
            return None;
        }
        let mut i = 19;
        if b[i] == b'.' {
            let start = i + 1;
            i = start;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i == start || i - start > 9 {
                return None;
            }
        }
        match &b[i..] {
            [b'Z'] => Some(()),
            [sign, _, _, b':', _, _] if *sign == b'+' || *sign == b'-' => {
                let (oh, om) = (digits(i + 1..i + 3)?, digits(i + 4..i + 6)?);
                (oh <= 23 && om <= 59).then_some(())
            }
            _ => None,
        }
    };
    fixed().map(|()| true)
}

// ---------------------------------------------------------------------------------------------
// Validation (V1–V20)

/// Outcome of validating a parsed entry.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    Valid,
    Invalid,
    /// Valid iff V8 finds every one of these timestamps finite.
    Pending(Vec<Vec<u16>>),
}

const PROCESS_STATUS: [&str; 5] = ["running", "winding_down", "resumable", "adopted", "closed"];
const POINTER_KINDS: [&str; 8] = [
    "repository",
    "worktree",
    "artifact",
    "evidence",
    "memory-query",
    "skill",
    "prompt",
    "service",
];

fn non_blank_str(v: Option<Json>) -> bool {
    v.and_then(Json::str).is_some_and(|s| !s.is_blank())
}

fn one_of(v: Option<Json>, set: &[&str]) -> bool {
    v.and_then(Json::str)
        .is_some_and(|s| set.iter().any(|x| s.eq_str(x)))
}

fn absent_or_str(v: Option<Json>, max_len: usize) -> bool {
    match v {
        None => true,
        Some(v) => v.str().is_some_and(|s| s.len16() <= max_len),
    }
}

fn safe_int(v: Option<Json>) -> bool {
    v.and_then(Json::num).is_some_and(is_safe_integer)
}

fn is_plain(v: Option<Json>) -> bool {
    v.is_some_and(Json::is_obj)
}

/// V2 `isAgentIdentity`.
fn is_agent_identity(agent: Option<Json>) -> bool {
    let Some(agent) = agent.filter(|a| a.is_obj()) else {
        return false;
    };
    let Some(rc) = agent.get("resumeContext").filter(|r| r.is_obj()) else {
        return false;
    };
    if !non_blank_str(agent.get("agentId"))
        || !non_blank_str(rc.get("sessionId"))
        || !non_blank_str(rc.get("cwd"))
        || !one_of(rc.get("provider"), &["pi", "external"])
    {
        return false;
    }
    for key in [
        "sessionDir",
        "sessionFile",
        "worktreeLaneKey",
        "orchestrationProfileId",
        "modelRef",
        "latestCheckpointId",
    ] {
        if !absent_or_str(rc.get(key), usize::MAX) {
            return false;
        }
    }
    let Some(mut names) = rc.get("resourceProfileNames").and_then(Json::items) else {
        return false;
    };
    if !names.all(|n| non_blank_str(Some(n))) {
        return false;
    }
    let Some(mut pointers) = rc.get("contextPointers").and_then(Json::items) else {
        return false;
    };
    pointers.all(|p| {
        p.is_obj()
            && non_blank_str(p.get("id"))
            && one_of(p.get("kind"), &POINTER_KINDS)
            && non_blank_str(p.get("uri"))
            && p.get("readOnly")
                .is_some_and(|r| matches!(r.kind(), Kind::Bool(_)))
            && absent_or_str(p.get("digest"), usize::MAX)
            && (p.get("metadata").is_none() || is_plain(p.get("metadata")))
    })
}

/// Validate a parsed file as a process-matrix entry. `known` decides timestamps the fast path
/// cannot (e.g. values precomputed by V8 for the caller's `expected`).
pub fn validate(v: Json, known: &dyn Fn(&[u16]) -> Option<bool>) -> Verdict {
    let mut pending: Vec<Vec<u16>> = Vec::new();
    let timestamp = |t: Option<Json>, pending: &mut Vec<Vec<u16>>| -> bool {
        let Some(s) = t.and_then(Json::str) else {
            return false;
        };
        let s = s.to_vec();
        match timestamp_fast(&s).or_else(|| known(&s)) {
            Some(ok) => ok,
            None => {
                pending.push(s);
                true
            }
        }
    };
    let ok = (|| {
        if !is_plain(Some(v)) || !is_agent_identity(v.get("agent")) {
            return false;
        }
        if !one_of(v.get("role"), &["master", "worker"]) {
            return false;
        }
        if let Some(r) = v.get("resumable") {
            if !r.is_obj()
                || !is_agent_identity(r.get("agent"))
                || !json_eq(
                    r.get("agent").expect("checked"),
                    v.get("agent").expect("checked"),
                )
                || !one_of(r.get("lastCode"), &PROCESS_STATUS)
                || !absent_or_str(r.get("taskRef"), 512)
                || !absent_or_str(r.get("taskSummary"), 2000)
            {
                return false;
            }
        }
        if let Some(t) = v.get("terminal") {
            // code: null or a safe integer; signal: null or a string of at most 100 units.
            let code_ok = t.get("code").is_some_and(Json::is_null) || safe_int(t.get("code"));
            let signal_ok = t
                .get("signal")
                .is_some_and(|s| s.is_null() || s.str().is_some_and(|s| s.len16() <= 100));
            if !t.is_obj()
                || !code_ok
                || !signal_ok
                || !timestamp(t.get("observedAt"), &mut pending)
                || t.get("notificationDeliveredAt").is_some()
                    && !timestamp(t.get("notificationDeliveredAt"), &mut pending)
            {
                return false;
            }
            if !v.get("status").is_some_and(|s| s.is_str("closed")) {
                return false;
            }
        }
        if v.get("status").is_some_and(|s| s.is_str("resumable")) && v.get("resumable").is_none() {
            return false;
        }
        // V8: entryId === role + "-" + agent.resumeContext.sessionId
        let (Some(id), Some(role), Some(sid)) = (
            v.get("entryId").and_then(Json::str),
            v.get("role").and_then(Json::str),
            v.get("agent")
                .and_then(|a| a.get("resumeContext"))
                .and_then(|r| r.get("sessionId"))
                .and_then(Json::str),
        ) else {
            return false;
        };
        let want = role.units().chain([u16::from(b'-')]).chain(sid.units());
        if !id.units().eq(want) {
            return false;
        }
        safe_int(v.get("pid"))
            && v.get("hostname")
                .and_then(Json::str)
                .is_some_and(|h| h.len16() <= 255)
            && timestamp(v.get("startedAt"), &mut pending)
            && timestamp(v.get("heartbeatAt"), &mut pending)
            && one_of(v.get("status"), &PROCESS_STATUS)
            && (v.get("parentPid").is_none()
                || v.get("parentPid")
                    .and_then(Json::num)
                    .is_some_and(|x| is_safe_integer(x) && x > 0.0))
            && absent_or_str(v.get("parentSessionId"), 512)
            && absent_or_str(v.get("tmuxSession"), 512)
            && (v.get("tmuxPanePid").is_none() || safe_int(v.get("tmuxPanePid")))
            && absent_or_str(v.get("taskRef"), 512)
            && absent_or_str(v.get("taskSummary"), 2000)
    })();
    match (ok, pending.is_empty()) {
        (false, _) => Verdict::Invalid,
        (true, true) => Verdict::Valid,
        (true, false) => Verdict::Pending(pending),
    }
}

/// A CAS `expected` as it reached the core: the JSON text the JS side made of a value it proved
/// plain JSON data (see [`exp_from_json_text`]), or a value read with every isDeepStrictEqual
/// distinction.
#[derive(Debug)]
pub enum Expected {
    /// `JSON.stringify(expected, null, "\t") + "\n"`: the writers' own layout, so a file
    /// written from an equal value holds exactly this text.
    Text(String),
    Value(Exp),
}

impl Expected {
    /// Whether `expected` is `undefined` (it then matches a timestamp-pending file iff V8
    /// rejects one of its timestamps).
    pub fn is_undefined(&self) -> bool {
        matches!(self, Expected::Value(Exp::Undefined))
    }

    /// B8's comparison with the current file's accepted text and value (None: absent or not
    /// accepted). A file whose text is byte for byte the expected text is equal without a look
    /// at the value: both parse to the same value, and the text route carries every distinction
    /// isDeepStrictEqual makes. Anything else is compared value by value.
    pub fn matches(&self, current: Option<(&str, Json)>) -> bool {
        match self {
            Expected::Text(t) => {
                if current.is_some_and(|(text, _)| text == t) {
                    return true;
                }
                match exp_from_json_text(t) {
                    Some(e) => cas_matches(current.map(|(_, v)| v), &e),
                    None => false,
                }
            }
            Expected::Value(e) => cas_matches(current.map(|(_, v)| v), e),
        }
    }
}

/// An `expected` value that the JS side proved to be plain JSON data (plain objects and arrays
/// of finite numbers other than -0, strings, booleans and null, no accessors, symbols or
/// cycles) and sent as `JSON.stringify` text: parsed here off the JS thread. None if the text
/// is not JSON (the caller then treats it as never equal).
pub fn exp_from_json_text(text: &str) -> Option<Exp> {
    let root = crate::json::parse(text)?;
    Some(exp_from_json(root.root()))
}

/// Json → Exp without recursion (the tree may be deep).
fn exp_from_json(root: Json) -> Exp {
    // Work items: a value to convert, or a container to close with its child count.
    enum Work<'a> {
        Value(Json<'a>),
        CloseArr(usize),
        CloseObj(Vec<Vec<u16>>),
    }
    let mut work = vec![Work::Value(root)];
    let mut done: Vec<Exp> = Vec::new();
    while let Some(w) = work.pop() {
        match w {
            Work::Value(v) => match v.kind() {
                Kind::Null => done.push(Exp::Null),
                Kind::Bool(b) => done.push(Exp::Bool(b)),
                Kind::Num(n) => done.push(Exp::Num(n)),
                Kind::Str(s) => done.push(Exp::Str(s.to_vec())),
                Kind::Arr(items) => {
                    work.push(Work::CloseArr(items.len()));
                    let items: Vec<Json> = items.collect();
                    work.extend(items.into_iter().rev().map(Work::Value));
                }
                Kind::Obj(members) => {
                    let members: Vec<(JStr, Json)> = members.collect();
                    let keys = members.iter().map(|(k, _)| k.to_vec()).collect();
                    work.push(Work::CloseObj(keys));
                    work.extend(members.into_iter().rev().map(|(_, m)| Work::Value(m)));
                }
            },
            Work::CloseArr(n) => {
                let items = done.split_off(done.len() - n);
                done.push(Exp::Arr(items));
            }
            Work::CloseObj(keys) => {
                let values = done.split_off(done.len() - keys.len());
                done.push(Exp::Obj(keys.into_iter().zip(values).collect()));
            }
        }
    }
    done.pop().unwrap_or(Exp::Never)
}

#[cfg(test)]
#[path = "entry_props.rs"]
mod props;

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::json::parse;

    fn u(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    pub const ENTRY: &str = r#"{"entryId":"master-session-1","role":"master","agent":{"agentId":"a","resumeContext":{"provider":"pi","sessionId":"session-1","cwd":"/w","resourceProfileNames":[],"contextPointers":[]}},"pid":1000,"hostname":"h","startedAt":"2026-07-19T00:00:00.000Z","heartbeatAt":"2026-07-19T00:00:00.000Z","status":"running"}"#;

    #[test]
    fn fast_timestamps() {
        assert_eq!(timestamp_fast(&u("2026-07-19T00:00:00.000Z")), Some(true));
        assert_eq!(timestamp_fast(&u("2026-07-19T23:59:59+05:30")), Some(true));
        assert_eq!(timestamp_fast(&u("")), Some(false));
        for other in [
            "2026-07-19",
            "2026-13-01T00:00:00Z",
            "garbage",
            "2026-07-19T24:00:00Z",
            " 2026-07-19T00:00:00Z",
        ] {
            assert_eq!(timestamp_fast(&u(other)), None, "{other}");
        }
    }

    #[test]
    fn valid_entry_and_single_violations() {
        let none = |_: &[u16]| None;
        let v = parse(ENTRY).unwrap();
        assert_eq!(validate(v.root(), &none), Verdict::Valid);
        for (from, to) in [
            (r#""role":"master""#, r#""role":"boss""#),
            (r#""pid":1000"#, r#""pid":1.5"#),
            (r#""pid":1000"#, r#""pid":9007199254740993"#),
            (r#""agentId":"a""#, r#""agentId":" \u00a0""#),
            (r#""status":"running""#, r#""status":"resumable""#),
            (
                r#""entryId":"master-session-1""#,
                r#""entryId":"worker-session-1""#,
            ),
            (
                r#""startedAt":"2026-07-19T00:00:00.000Z""#,
                r#""startedAt":"""#,
            ),
            (
                r#""status":"running""#,
                r#""status":"running","parentPid":0"#,
            ),
            (
                r#""status":"running""#,
                r#""status":"running","terminal":{"code":null,"signal":null,"observedAt":"2026-07-19T00:00:00Z"}"#,
            ),
        ] {
            let text = ENTRY.replacen(from, to, 1);
            assert_eq!(
                validate(parse(&text).unwrap().root(), &none),
                Verdict::Invalid,
                "{to}"
            );
        }
        let odd = ENTRY.replacen(
            "\"startedAt\":\"2026-07-19T00:00:00.000Z\"",
            "\"startedAt\":\"2026/07/19\"",
            1,
        );
        assert_eq!(
            validate(parse(&odd).unwrap().root(), &none),
            Verdict::Pending(vec![u("2026/07/19")])
        );
        assert_eq!(
            validate(parse(&odd).unwrap().root(), &|_| Some(true)),
            Verdict::Valid
        );
    }

    #[test]
    fn deep_equality_semantics() {
        let a = parse(r#"{"x":[1,{"y":-0}],"z":"s","z":"t"}"#).unwrap();
        let b = parse(r#"{"z":"t","x":[1,{"y":-0}]}"#).unwrap();
        let c = parse(r#"{"z":"t","x":[1,{"y":0}]}"#).unwrap();
        let (a, b, c) = (a.root(), b.root(), c.root());
        assert!(json_eq(a, b));
        assert!(!json_eq(a, c));
        let exp = Exp::Obj(vec![
            (u("z"), Exp::Str(u("t"))),
            (
                u("x"),
                Exp::Arr(vec![
                    Exp::Num(1.0),
                    Exp::Obj(vec![(u("y"), Exp::Num(-0.0))]),
                ]),
            ),
        ]);
        assert!(matches_expected(a, &exp));
        assert!(!matches_expected(c, &exp));
        let with_undefined = Exp::Obj(vec![(u("z"), Exp::Str(u("t"))), (u("w"), Exp::Undefined)]);
        assert!(!matches_expected(
            parse(r#"{"z":"t"}"#).unwrap().root(),
            &with_undefined
        ));
        assert!(cas_matches(None, &Exp::Undefined));
        assert!(!cas_matches(None, &Exp::Null));
    }
}
