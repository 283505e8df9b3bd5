//! Property tests of the entry checks on untrusted file contents: the CAS equality
//! (`json_eq`, `matches_expected`, the text route of `Expected`) against a plain reference of
//! util.isDeepStrictEqual over parsed JSON (B20), and validation (V1–V20) under reordering,
//! duplicate keys and single violations; nothing panics on arbitrary values.
//! Budget: `PROPTEST_CASES` (crate::proptest_support).

use proptest::prelude::*;

use super::*;
use crate::json::parse;
use crate::proptest_support::{config, key, to_t, tree, write, Layout, T};

/// Deep-strict equality of two parsed values, written plainly over owned trees: objects
/// compared through their last-wins members as sorted maps, numbers by SameValue.
fn reference_eq(a: &T, b: &T) -> bool {
    fn members(ms: &[(Vec<u16>, T)]) -> std::collections::BTreeMap<&[u16], &T> {
        ms.iter().map(|(k, v)| (k.as_slice(), v)).collect() // later keys overwrite: last wins
    }
    match (a, b) {
        (T::Null, T::Null) => true,
        (T::Bool(x), T::Bool(y)) => x == y,
        (T::Num(x), T::Num(y)) => {
            (x.is_nan() && y.is_nan()) || (x == y && x.is_sign_negative() == y.is_sign_negative())
        }
        (T::Str(x), T::Str(y)) => x == y,
        (T::Arr(x), T::Arr(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| reference_eq(p, q))
        }
        (T::Obj(x), T::Obj(y)) => {
            let (mx, my) = (members(x), members(y));
            mx.len() == my.len()
                && mx
                    .iter()
                    .all(|(k, v)| my.get(k).is_some_and(|w| reference_eq(v, w)))
        }
        _ => false,
    }
}

/// A second value near `t`: the same, members reordered or duplicated with the last value
/// kept, a -0 for a 0, one leaf changed, or (for objects) widened past 32 members.
#[derive(Debug, Clone)]
enum Twist {
    Same,
    Reverse,
    DuplicateFirst,
    NegateZeros,
    ChangeLeaf(usize),
    Widen(Vec<Vec<u16>>),
}

fn twist() -> impl Strategy<Value = Twist> {
    prop_oneof![
        2 => Just(Twist::Same),
        2 => Just(Twist::Reverse),
        1 => Just(Twist::DuplicateFirst),
        1 => Just(Twist::NegateZeros),
        2 => any::<usize>().prop_map(Twist::ChangeLeaf),
        1 => prop::collection::vec(key(), 30..40).prop_map(Twist::Widen),
    ]
}

fn apply(t: &T, tw: &Twist, leaf: &mut usize) -> T {
    match (t, tw) {
        (T::Obj(ms), Twist::Reverse) => T::Obj(
            ms.iter()
                .rev()
                .map(|(k, v)| (k.clone(), apply(v, tw, leaf)))
                .collect(),
        ),
        (T::Obj(ms), Twist::DuplicateFirst) if !ms.is_empty() => {
            // `{"k": junk, …, "k": v}` reads as the same value: the last one wins.
            let mut out = vec![(ms[0].0.clone(), T::Str(vec![0x78]))];
            out.extend(ms.iter().cloned());
            T::Obj(out)
        }
        (T::Obj(ms), Twist::Widen(keys)) => {
            let mut out = ms.clone();
            out.extend(keys.iter().map(|k| (k.clone(), T::Null)));
            T::Obj(out)
        }
        (T::Obj(ms), _) => T::Obj(
            ms.iter()
                .map(|(k, v)| (k.clone(), apply(v, tw, leaf)))
                .collect(),
        ),
        (T::Arr(items), _) => T::Arr(items.iter().map(|v| apply(v, tw, leaf)).collect()),
        (T::Num(n), Twist::NegateZeros) if *n == 0.0 => T::Num(-*n),
        (leafv, Twist::ChangeLeaf(at)) => {
            let mine = *leaf;
            *leaf += 1;
            if mine == *at % 8 {
                match leafv {
                    T::Num(n) => T::Num(n + 1.0),
                    T::Str(s) => T::Str([s.as_slice(), &[0x21]].concat()),
                    T::Bool(b) => T::Bool(!b),
                    _ => T::Bool(true),
                }
            } else {
                leafv.clone()
            }
        }
        (other, _) => other.clone(),
    }
}

/// `t` with every object's duplicate keys resolved as JSON.parse does (last value, first place).
fn unique(t: &T) -> T {
    match t {
        T::Arr(items) => T::Arr(items.iter().map(unique).collect()),
        T::Obj(ms) => {
            let mut out: Vec<(Vec<u16>, T)> = Vec::new();
            for (k, v) in ms {
                match out.iter_mut().find(|(k2, _)| k2 == k) {
                    Some(slot) => slot.1 = unique(v),
                    None => out.push((k.clone(), unique(v))),
                }
            }
            T::Obj(out)
        }
        other => other.clone(),
    }
}

/// A valid entry's text with its fields in a given order.
fn entry_text(order: &[usize]) -> String {
    let v = parse(tests::ENTRY).expect("the fixture parses");
    let T::Obj(ms) = to_t(v.root()) else {
        unreachable!()
    };
    let mut ms: Vec<_> = ms
        .into_iter()
        .map(|(k, v)| (String::from_utf16_lossy(&k), v))
        .collect();
    for (i, &j) in order.iter().enumerate() {
        let n = ms.len();
        ms.swap(i % n, j % n);
    }
    write(
        &T::Obj(
            ms.into_iter()
                .map(|(k, v)| (k.encode_utf16().collect(), v))
                .collect(),
        ),
        &mut Layout::new(7),
        false,
    )
}

/// One violation of V1–V20 as a text edit of the fixture (each must read as invalid).
const VIOLATIONS: &[(&str, &str)] = &[
    (r#""role":"master""#, r#""role":"Master""#),
    (r#""pid":1000"#, r#""pid":-0.5"#),
    (r#""pid":1000"#, r#""pid":"1000""#),
    (r#""hostname":"h""#, r#""hostname":null"#),
    (r#""agentId":"a""#, r#""agentId":"\u3000\ufeff""#),
    (r#""provider":"pi""#, r#""provider":"Pi""#),
    (r#""cwd":"/w""#, r#""cwd":"""#),
    (
        r#""resourceProfileNames":[]"#,
        r#""resourceProfileNames":[" "]"#,
    ),
    (
        r#""contextPointers":[]"#,
        r#""contextPointers":[{"id":"p","kind":"file","uri":"u","readOnly":true}]"#,
    ),
    (r#""status":"running""#, r#""status":"resumable""#),
    (
        r#""status":"running""#,
        r#""status":"running","terminal":{"code":null,"signal":null,"observedAt":"2026-07-19T00:00:00Z"}"#,
    ),
    (
        r#""status":"running""#,
        r#""status":"running","parentPid":-1"#,
    ),
    (
        r#""status":"running""#,
        r#""status":"running","tmuxPanePid":1e400"#,
    ),
    (
        r#""entryId":"master-session-1""#,
        r#""entryId":"master-session-2""#,
    ),
    (
        r#""heartbeatAt":"2026-07-19T00:00:00.000Z""#,
        r#""heartbeatAt":5"#,
    ),
];

proptest! {
    #![proptest_config(config(256))]

    /// json_eq is util.isDeepStrictEqual over parsed values (key order, duplicates, -0, more
    /// than 32 members); matches_expected and the text route of `Expected` answer the same.
    #[test]
    fn equality_agrees_with_the_reference(t in tree(), tw in twist(), seed in any::<u64>()) {
        let u = apply(&t, &tw, &mut 0);
        let (ta, tb) = (write(&t, &mut Layout::new(seed), false), write(&u, &mut Layout::new(seed ^ 1), true));
        let (a, b) = (parse(&ta).expect("valid text"), parse(&tb).expect("valid text"));
        let (a, b) = (a.root(), b.root());
        let want = reference_eq(&to_t(a), &to_t(b));
        prop_assert_eq!(json_eq(a, b), want);
        prop_assert_eq!(json_eq(b, a), want);
        // An `expected` reaches the text route as JSON.stringify's text: no duplicate keys.
        let te = write(&unique(&u), &mut Layout::new(seed ^ 2), true);
        prop_assert_eq!(matches_expected(a, &exp_from_json_text(&te).expect("valid text")), want);
        prop_assert_eq!(Expected::Text(te.clone()).matches(Some((&ta, a))), want);
        prop_assert!(Expected::Text(ta.clone()).matches(Some((&ta, a))));
    }

    /// A valid entry stays valid whatever its key order and with a duplicate key whose last
    /// value is the valid one; each single violation makes it invalid; any value validates
    /// without a panic.
    #[test]
    fn validation_is_about_values_not_layout(order in prop::collection::vec(any::<usize>(), 0..12), v in 0..VIOLATIONS.len(), junk in tree()) {
        let none = |_: &[u16]| None;
        let text = entry_text(&order);
        prop_assert_eq!(validate(parse(&text).expect("valid text").root(), &none), Verdict::Valid, "{}", text);
        let dup = text.replacen('{', r#"{"status":"nonsense","#, 1);
        prop_assert_eq!(validate(parse(&dup).expect("valid text").root(), &none), Verdict::Valid);
        let (from, to) = VIOLATIONS[v];
        let bad = tests::ENTRY.replacen(from, to, 1);
        prop_assert!(bad != tests::ENTRY, "{from} is in the fixture");
        prop_assert_eq!(validate(parse(&bad).expect("valid text").root(), &none), Verdict::Invalid, "{}", to);
        let junk = write(&junk, &mut Layout::new(0), true);
        let _ = validate(parse(&junk).expect("valid text").root(), &none);
    }

    /// The strict ISO form with in-range fields is decided valid without V8; a field out of
    /// range or any other shape is never decided valid by the fast path.
    #[test]
    fn fast_timestamps_only_decide_what_is_certain(y in 0u32..10000, mo in 0u32..14, d in 0u32..33, h in 0u32..26, mi in 0u32..61, s in 0u32..61, frac in prop::option::of(1usize..11), zone in prop_oneof![Just("Z".to_string()), (0u32..26, 0u32..61).prop_map(|(a, b)| format!("+{a:02}:{b:02}"))]) {
        let text = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{}{zone}", frac.map_or(String::new(), |n| format!(".{}", "5".repeat(n))));
        let units: Vec<u16> = text.encode_utf16().collect();
        let zone_ok = zone == "Z" || (zone[1..3].parse::<u32>().unwrap() <= 23 && zone[4..6].parse::<u32>().unwrap() <= 59);
        let in_range = (1..=12).contains(&mo) && (1..=31).contains(&d) && h <= 23 && mi <= 59 && s <= 59 && frac.is_none_or(|n| n <= 9) && zone_ok;
        let got = timestamp_fast(&units);
        if in_range {
            prop_assert_eq!(got, Some(true), "{}", text);
        } else {
            prop_assert_ne!(got, Some(true), "{}", text);
        }
    }
}
