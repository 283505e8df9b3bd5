//! Property tests of the JSON reader (`json::parse`, SPEC G3) on untrusted text: every valid
//! layout of a value reads back to exactly that value; on texts mutated byte by byte it accepts
//! and rejects exactly what an independent parser (serde_json, correctly rounded) does, wherever
//! the two grammars coincide; it never panics, and what it accepts it reads again the same.
//! Budget: `PROPTEST_CASES` (crate::proptest_support).

use proptest::prelude::*;

use super::parse;
use crate::proptest_support::{config, same, to_t, tree, write, Layout, T};

/// Grammar-relevant bytes and a few others, for mutations.
const ALPHABET: &[u8] = b"{}[],:\"\\ \t\n\r0123456789eE+-.tfnrulsaxu/\x00\x1f\xc3\xa9\xff";

#[derive(Debug, Clone)]
enum Edit {
    Insert(usize, u8),
    Delete(usize),
    Replace(usize, u8),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    // Digits twice as likely: they make the number edge cases (leading zeros, exponents).
    let byte = prop_oneof![2 => prop::sample::select(ALPHABET.to_vec()), 1 => b'0'..=b'9'];
    prop::collection::vec(
        prop_oneof![
            (any::<usize>(), byte.clone()).prop_map(|(i, b)| Edit::Insert(i, b)),
            any::<usize>().prop_map(Edit::Delete),
            (any::<usize>(), byte).prop_map(|(i, b)| Edit::Replace(i, b)),
        ],
        1..4,
    )
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut b = text.as_bytes().to_vec();
    for e in edits {
        match *e {
            Edit::Insert(i, c) => b.insert(i % (b.len() + 1), c),
            Edit::Delete(i) if !b.is_empty() => {
                let at = i % b.len();
                b.remove(at);
            }
            Edit::Replace(i, c) if !b.is_empty() => {
                let at = i % b.len();
                b[at] = c;
            }
            _ => {}
        }
    }
    // Callers decode files as Node does (U+FFFD replacement) before parsing.
    String::from_utf8_lossy(&b).into_owned()
}

/// Our value equals serde_json's (numbers by value, -0 and 0 alike: serde reads "-0" as the
/// integer 0; objects by their last-wins members).
fn agrees(ours: &T, theirs: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (ours, theirs) {
        (T::Null, V::Null) => true,
        (T::Bool(a), V::Bool(b)) => a == b,
        (T::Num(a), V::Number(b)) => b.as_f64() == Some(*a),
        (T::Str(a), V::String(b)) => *a == b.encode_utf16().collect::<Vec<u16>>(),
        (T::Arr(a), V::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| agrees(x, y))
        }
        (T::Obj(a), V::Object(b)) => {
            let mut last: Vec<(&Vec<u16>, &T)> = Vec::new();
            for (k, v) in a {
                last.retain(|(k2, _)| *k2 != k);
                last.push((k, v));
            }
            last.len() == b.len()
                && last.iter().all(|(k, v)| {
                    String::from_utf16(k)
                        .ok()
                        .and_then(|k| b.get(&k))
                        .is_some_and(|w| agrees(v, w))
                })
        }
        _ => false,
    }
}

/// Where serde_json's grammar is not V8's: escapes of lone surrogates (V8 keeps them), numbers
/// beyond f64 (V8 gives ±Infinity), its nesting limit of 128.
fn outside_common_grammar(
    text: &str,
    serde: &Result<serde_json::Value, serde_json::Error>,
) -> bool {
    let lower = text.to_ascii_lowercase();
    let surrogate_escape = lower.match_indices("\\ud").any(|(i, _)| {
        lower
            .as_bytes()
            .get(i + 3)
            .is_some_and(|c| b"89abcdef".contains(c))
    });
    surrogate_escape
        || serde.as_ref().err().is_some_and(|e| {
            let m = e.to_string();
            m.contains("out of range") || m.contains("recursion limit")
        })
}

proptest! {
    #![proptest_config(config(256))]

    /// Any valid layout of a value (white space, `\u` escapes, exponent forms) reads back as
    /// that very value, -0 and lone surrogates included.
    #[test]
    fn every_layout_reads_back(t in tree(), seed in any::<u64>()) {
        let text = write(&t, &mut Layout::new(seed), false);
        let v = parse(&text);
        prop_assert!(v.as_ref().is_some_and(|v| same(v.root(), &t)), "{text:?} read as {v:?}");
    }

    /// Mutated texts: accepted iff serde_json accepts them (where the grammars coincide), with
    /// the same value; never a panic.
    #[test]
    fn mutations_agree_with_serde_json(t in tree(), seed in any::<u64>(), compact in any::<bool>(), e in edits()) {
        let text = apply(&write(&t, &mut Layout::new(seed), compact), &e);
        let ours = parse(&text);
        let theirs = serde_json::from_str::<serde_json::Value>(&text);
        if !outside_common_grammar(&text, &theirs) {
            match (&ours, &theirs) {
                (Some(a), Ok(b)) => prop_assert!(agrees(&to_t(a.root()), b), "{text:?}: {a:?} vs {b:?}"),
                (None, Err(_)) => {}
                _ => prop_assert!(false, "{text:?}: ours {:?}, serde_json {:?}", ours.is_some(), theirs.map(|_| ()).map_err(|e| e.to_string())),
            }
        }
    }

    /// Arbitrary bytes: no panic, and an accepted text's value, written compactly, reads back
    /// the same.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Some(v) = parse(&text) {
            let t = to_t(v.root());
            let again = write(&t, &mut Layout::new(1), true);
            prop_assert!(parse(&again).is_some_and(|w| same(w.root(), &t)), "{text:?}");
        }
    }
}
