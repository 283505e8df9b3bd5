//! Property tests of the session scan on untrusted files: whatever path a file takes (the
//! backward tail scan with its blocks, carried lines and mark pre-filter, or the whole-file
//! scan), its answer is the one a plain reading of A19–A24 gives — cut at the last LF, decode
//! with replacement, JS-trim, split on LF, parse each non-blank piece, apply the migration
//! rules, take the last qualifying value. Lines are written in varied layouts (escapes, white
//! space, CRLF, BOM, NBSP, invalid UTF-8, torn tails, lines across the 64/128 KiB blocks).
//! Budget: `PROPTEST_CASES` (crate::proptest_support).

use proptest::prelude::*;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::*;
use crate::proptest_support::{config, units, write, Layout, T};

fn s(x: &str) -> T {
    T::Str(x.encode_utf16().collect())
}

fn obj(ms: Vec<(&str, T)>) -> T {
    T::Obj(
        ms.into_iter()
            .map(|(k, v)| (k.encode_utf16().collect(), v))
            .collect(),
    )
}

/// A record of a session file: assistants that may or may not qualify, headers of every
/// version form, other messages, primitives.
fn record() -> impl Strategy<Value = T> {
    let stop = prop_oneof![
        4 => Just(s("stop")),
        1 => prop::sample::select(vec!["toolUse", "length", "error", "pending", "Pending", ""]).prop_map(s),
        1 => Just(T::Null),
        1 => Just(T::Num(3.0)),
    ];
    let part = prop_oneof![
        4 => units().prop_map(|t| obj(vec![("type", s("text")), ("text", T::Str(t))])),
        1 => Just(obj(vec![("type", s("thinking")), ("thinking", s("hm"))])),
        1 => Just(obj(vec![("type", s("text")), ("text", T::Num(5.0))])),
        1 => Just(T::Null),
    ];
    let content = prop_oneof![
        4 => prop::collection::vec(part, 0..4).prop_map(T::Arr),
        1 => units().prop_map(T::Str),
        1 => Just(T::Null),
    ];
    let role = prop::sample::select(vec![
        "assistant",
        "assistant",
        "assistant",
        "user",
        "toolResult",
    ]);
    let assistant = (content, stop, role, prop::option::of(units())).prop_map(|(c, st, r, ts)| {
        obj(vec![
            ("type", s("message")),
            ("timestamp", ts.map_or(T::Num(1.0), T::Str)),
            (
                "message",
                obj(vec![("role", s(r)), ("content", c), ("stopReason", st)]),
            ),
        ])
    });
    let header = prop::sample::select(vec![
        Some(T::Num(3.0)),
        Some(T::Num(2.0)),
        Some(T::Num(1.0)),
        Some(T::Num(4.0)),
        Some(s("3")),
        Some(s("x")),
        Some(T::Arr(vec![T::Num(3.0)])),
        Some(T::Null),
        None,
    ])
    .prop_map(|v| {
        let mut ms = vec![("type", s("session")), ("id", s("s"))];
        if let Some(v) = v {
            ms.push(("version", v));
        }
        obj(ms)
    });
    prop_oneof![
        6 => assistant,
        1 => header,
        1 => Just(obj(vec![("type", s("message")), ("message", T::Null)])),
        1 => prop::sample::select(vec![T::Null, T::Num(0.0), s("str"), T::Bool(true), T::Arr(vec![])]),
    ]
}

/// One line's bytes (without its LF).
fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        10 => (record(), any::<u64>(), any::<bool>(), prop::sample::select(vec!["", "", "", "\u{a0}", " \u{feff}", "\u{2028}", "\u{3000}\t"])).prop_map(|(r, seed, compact, js_ws)| {
            // No LF inside a line: the layout's white space may hold one, so it becomes a space.
            // JS white space after a record: only the whole-text trim removes it (A20), and only
            // from the last line.
            (write(&r, &mut Layout::new(seed), compact).replace('\n', " ") + js_ws).into_bytes()
        }),
        2 => prop::sample::select(vec!["", " ", "\t", "\r", "\u{a0}", "\u{feff}", "\u{2028}", "{", "nul", "[1,]", " \u{a0}{\"type\":\"session\",\"version\":3}"])
            .prop_map(|x| x.as_bytes().to_vec()),
        1 => (1usize..200, any::<bool>()).prop_map(|(kib, spoken)| {
            let role = if spoken { "assistant" } else { "toolResult" };
            format!(r#"{{"type":"message","message":{{"role":"{role}","content":[{{"type":"text","text":"{}"}}],"stopReason":"stop"}}}}"#, "x".repeat(kib << 10)).into_bytes()
        }),
    ]
}

/// A whole file: lines, line ends, a BOM, invalid UTF-8 somewhere, a torn tail.
fn file() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(
            (
                line(),
                any::<bool>(),
                prop::option::of((
                    any::<usize>(),
                    prop::sample::select(vec![vec![0xffu8], vec![0xc3], vec![0xe2, 0x82]]),
                )),
            ),
            0..10,
        ),
        any::<bool>(),
        prop::option::of(line()),
        prop::sample::select(vec!["", "", "\n", " \n", "\u{a0}\n"]),
        // Half the files start as the SDK writes them (a version 3 header): the tail path.
        prop::sample::select(vec![
            "",
            "{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n",
            " \r\n{\"type\":\"session\",\"version\":3}\r\n",
        ]),
    )
        .prop_map(|(lines, bom, torn, trail, head)| {
            let mut out = Vec::new();
            if bom {
                out.extend_from_slice("\u{feff}".as_bytes());
            }
            out.extend_from_slice(head.as_bytes());
            for (mut l, crlf, bad) in lines {
                if let Some((at, bytes)) = bad {
                    let at = at % (l.len() + 1);
                    l.splice(at..at, bytes);
                }
                out.extend_from_slice(&l);
                out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
            out.extend_from_slice(trail.as_bytes());
            if let Some(t) = torn {
                out.extend_from_slice(&t[..t.len().div_ceil(2)]);
            }
            out
        })
}

/// A19–A24 read plainly (the reference): the answer as (text, timestamp, stopReason).
fn reference(bytes: &[u8]) -> Option<(Vec<u16>, Vec<u16>, Vec<u16>)> {
    let end = bytes.iter().rposition(|&b| b == b'\n')? + 1;
    let text = String::from_utf8_lossy(&bytes[..end]);
    let lines: Vec<&str> = js_trim(&text)
        .split('\n')
        .filter(|p| !js_trim(p).is_empty())
        .collect();
    let docs: Vec<json::Doc> = lines.iter().filter_map(|l| json::parse(l)).collect();
    let values: Vec<Json> = docs.iter().map(json::Doc::root).collect();
    // A21: the header search reads `type` of every value it passes (null throws).
    let mut header = None;
    for &v in &values {
        if v.is_null() {
            return None;
        }
        if v.is_obj() && v.get("type").is_some_and(|t| t.is_str("session")) {
            header = Some(v);
            break;
        }
    }
    let version = match header.and_then(|h| h.get("version")) {
        None => 1.0,
        Some(v) if v.is_null() => 1.0,
        Some(v) => v.to_number(),
    };
    let any_null = values.iter().any(|v| v.is_null());
    let any_primitive = values.iter().any(|v| v.is_primitive());
    if version < 2.0 && (any_null || any_primitive) || (2.0..3.0).contains(&version) && any_null {
        return None;
    }
    values
        .iter()
        .rev()
        .find_map(|&v| qualify(v))
        .map(|f| (f.text, f.timestamp, f.stop_reason))
}

fn budget(cancel: &AtomicBool) -> Budget<'_> {
    Budget {
        deadline: Instant::now() + Duration::from_secs(120),
        cancel,
        moot: None,
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// recover_file (tail scan or whole-file scan, as the file's first line decides) and the
    /// whole-file scan alone both give the plain reading's answer.
    #[test]
    fn scans_answer_as_the_plain_reading(bytes in file()) {
        let path = std::env::temp_dir().join(format!("pi-native-props-{}-{:?}.jsonl", std::process::id(), std::thread::current().id()));
        std::fs::write(&path, &bytes).expect("temp file");
        let cancel = AtomicBool::new(false);
        let want = reference(&bytes);
        let got = recover_file(path.to_str().expect("UTF-8 temp path"), u64::MAX, &budget(&cancel)).ok().flatten();
        let f = File::open(&path).expect("temp file");
        let full = bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .and_then(|i| full_scan(&f, i as u64 + 1, &budget(&cancel)).ok().flatten());
        std::fs::remove_file(&path).ok();
        let as_tuple = |f: Option<Found>| f.map(|f| (f.text, f.timestamp, f.stop_reason));
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(2000)]).into_owned();
        prop_assert_eq!(as_tuple(got), want.clone(), "recover_file on {:?}", shown);
        prop_assert_eq!(as_tuple(full), want, "full_scan on {:?}", shown);
    }

    /// The pre-filter is exact: a line it rejects never carries an answer.
    #[test]
    fn the_prefilter_never_drops_an_answer(r in record(), seed in any::<u64>(), compact in any::<bool>()) {
        let text = write(&r, &mut Layout::new(seed), compact).replace('\n', " ");
        if !may_qualify(text.as_bytes()) {
            prop_assert!(json::parse(&text).and_then(|d| qualify(d.root())).is_none(), "{}", text);
        }
    }
}
