//! Test support for the property tests of the untrusted-byte parsers (`json`, `session`,
//! `store::entry`): a JSON tree with its own strategy, a writer of JSON text in varied but
//! valid layouts (white space, `\u` escapes, exponent forms), and the case budget.
//!
//! Budget: `PROPTEST_CASES` (proptest's own variable) sets the cases of every property; without
//! it each property runs its small default, so `cargo test` stays quick. A longer run:
//! `PROPTEST_CASES=20000 cargo test props`.

use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::json::{Json, Kind};

/// The config of a property: `PROPTEST_CASES` or `default_cases`; no regression files (a found
/// case becomes a named test instead).
pub fn config(default_cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// A JSON value as the properties build it (owned and cloneable, unlike a [`Json`] view).
#[derive(Debug, Clone)]
pub enum T {
    Null,
    Bool(bool),
    Num(f64),
    Str(Vec<u16>),
    Arr(Vec<T>),
    /// Members in order, duplicate keys allowed.
    Obj(Vec<(Vec<u16>, T)>),
}

/// A parsed value as a [`T`], to write it again or compare it.
pub fn to_t(v: Json) -> T {
    match v.kind() {
        Kind::Null => T::Null,
        Kind::Bool(b) => T::Bool(b),
        Kind::Num(n) => T::Num(n),
        Kind::Str(s) => T::Str(s.to_vec()),
        Kind::Arr(items) => T::Arr(items.map(to_t).collect()),
        Kind::Obj(ms) => T::Obj(ms.map(|(k, v)| (k.to_vec(), to_t(v))).collect()),
    }
}

/// `a` and `b` hold the same tree, numbers compared bit for bit (so -0 ≠ 0).
pub fn same(a: Json, b: &T) -> bool {
    same_t(&to_t(a), b)
}

/// Two [`T`]s are the same tree, numbers compared bit for bit (so -0 ≠ 0).
pub fn same_t(a: &T, b: &T) -> bool {
    match (a, b) {
        (T::Null, T::Null) => true,
        (T::Bool(x), T::Bool(y)) => x == y,
        (T::Num(x), T::Num(y)) => x.to_bits() == y.to_bits(),
        (T::Str(x), T::Str(y)) => x == y,
        (T::Arr(x), T::Arr(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_t(a, b)),
        (T::Obj(x), T::Obj(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, va), (kb, vb))| ka == kb && same_t(va, vb))
        }
        _ => false,
    }
}

/// UTF-16 strings: ASCII, non-ASCII, lone and paired surrogates, control characters.
pub fn units() -> impl Strategy<Value = Vec<u16>> {
    prop::collection::vec(
        prop_oneof![
            6 => 0x20u16..0x7f,
            1 => 0u16..0x20,
            1 => Just(u16::from(b'"')),
            1 => Just(u16::from(b'\\')),
            1 => 0x80u16..0xd800,
            1 => 0xd800u16..0xe000,
            1 => 0xe000u16..=0xffff,
        ],
        0..8,
    )
}

/// Keys: short, often repeated (duplicates), sometimes special.
pub fn key() -> impl Strategy<Value = Vec<u16>> {
    prop_oneof![
        4 => prop::sample::select(vec!["type", "message", "role", "a", "b", "__proto__", "", "é"])
            .prop_map(|k| k.encode_utf16().collect()),
        1 => units(),
    ]
}

/// Numbers: finite doubles of every magnitude, integers, -0, edge values.
pub fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => (-100_000i64..100_000).prop_map(|i| i as f64),
        2 => (-20i64..20).prop_map(|i| i as f64 / 8.0),
        2 => any::<f64>().prop_filter("finite", |x| x.is_finite()),
        1 => prop::sample::select(vec![
            -0.0,
            0.0,
            1e21,
            1e-7,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
            9_007_199_254_740_993.0,
            0.1
        ]),
    ]
}

/// A JSON tree of bounded depth and size.
pub fn tree() -> impl Strategy<Value = T> {
    let leaf = prop_oneof![
        Just(T::Null),
        any::<bool>().prop_map(T::Bool),
        number().prop_map(T::Num),
        units().prop_map(T::Str),
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(T::Arr),
            prop::collection::vec((key(), inner), 0..6).prop_map(T::Obj),
        ]
    })
}

/// Choices of a text layout, drawn from one seed (xorshift), so a failing layout shrinks with
/// its seed.
pub struct Layout(u64);

impl Layout {
    pub fn new(seed: u64) -> Layout {
        Layout(seed | 1)
    }

    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    /// JSON white space (only space, TAB, LF, CR are allowed).
    fn ws(&mut self, out: &mut String) {
        if self.next(4) == 0 {
            for _ in 0..=self.next(3) {
                out.push([' ', '\t', '\n', '\r'][self.next(4) as usize]);
            }
        }
    }
}

/// Write `t` as JSON text: valid, with varied white space, escapes and number forms.
/// `compact` writes no white space and escapes only what must be escaped.
pub fn write(t: &T, layout: &mut Layout, compact: bool) -> String {
    let mut out = String::new();
    write_into(t, layout, compact, &mut out);
    out
}

fn write_into(t: &T, l: &mut Layout, compact: bool, out: &mut String) {
    if !compact {
        l.ws(out);
    }
    match t {
        T::Null => out.push_str("null"),
        T::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        T::Num(n) => out.push_str(&number_text(*n, l, compact)),
        T::Str(s) => string_text(s, l, compact, out),
        T::Arr(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_into(v, l, compact, out);
            }
            if items.is_empty() && !compact {
                l.ws(out);
            }
            out.push(']');
        }
        T::Obj(ms) => {
            out.push('{');
            for (i, (k, v)) in ms.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !compact {
                    l.ws(out);
                }
                string_text(k, l, compact, out);
                if !compact {
                    l.ws(out);
                }
                out.push(':');
                write_into(v, l, compact, out);
            }
            if ms.is_empty() && !compact {
                l.ws(out);
            }
            out.push('}');
        }
    }
    if !compact {
        l.ws(out);
    }
}

/// A number's text that parses back to exactly `n` (Rust prints shortest round-trip forms).
fn number_text(n: f64, l: &mut Layout, compact: bool) -> String {
    let text = if compact { 0 } else { l.next(3) };
    let s = match text {
        0 => format!("{n:?}"),
        1 => format!("{n:e}"),
        _ => format!("{n:E}").replace("E", if l.next(2) == 0 { "E+" } else { "e" }),
    };
    // `{:e}` of a negative exponent already has its sign: "E+-7" is not JSON.
    s.replace("+-", "-")
}

fn string_text(s: &[u16], l: &mut Layout, compact: bool, out: &mut String) {
    out.push('"');
    let mut i = 0;
    while i < s.len() {
        let u = s[i];
        let escape = !compact && l.next(5) == 0;
        match u {
            0x22 => out.push_str("\\\""),
            0x5c => out.push_str("\\\\"),
            0x0a if !escape => out.push_str("\\n"),
            0x09 if !escape => out.push_str("\\t"),
            _ if u < 0x20 || escape || (0xd800..0xe000).contains(&u) => {
                // A surrogate pair may still be written raw below; a lone one must be escaped.
                let pair = (0xd800..0xdc00).contains(&u)
                    && s.get(i + 1).is_some_and(|n| (0xdc00..0xe000).contains(n));
                if pair && !escape {
                    let c =
                        0x10000 + ((u32::from(u) - 0xd800) << 10) + (u32::from(s[i + 1]) - 0xdc00);
                    out.push(char::from_u32(c).expect("a valid pair"));
                    i += 1;
                } else {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
            _ => out.push(char::from_u32(u32::from(u)).expect("not a surrogate")),
        }
        i += 1;
    }
    out.push('"');
}
