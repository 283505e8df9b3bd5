//! JavaScript string and number semantics that the replaced helpers depend on (SPEC G5):
//! the `trim()` / `\s` whitespace set, `Number(string)` and `ToInt32`.
//!
//! Rust's own notions differ (`char::is_whitespace` includes U+0085 and excludes U+FEFF;
//! `f64::from_str` accepts `inf`/`nan`), so the rules are spelled out here.

/// True for the code points JS `String.prototype.trim` and regex `\s` treat as white space.
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{0009}'..='\u{000D}'
            | '\u{0020}'
            | '\u{00A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}

/// JS `s.trim()`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// JS `s.trim().split(/\s+/)` as an iterator — an all-blank input yields one `""`, as in JS.
pub fn js_split_whitespace(s: &str) -> impl Iterator<Item = &str> {
    let t = js_trim(s);
    let blank = t.is_empty();
    t.split(is_js_whitespace)
        .filter(move |p| blank || !p.is_empty())
        .take(if blank { 1 } else { usize::MAX })
}

/// JS `Number(s)` for a string (StringToNumber): trims JS white space, empty → 0,
/// `Infinity` with optional sign, `0x`/`0o`/`0b` integer literals without sign, and decimal
/// literals; anything else → NaN.
pub fn js_string_to_number(s: &str) -> f64 {
    let t = js_trim(s);
    if t.is_empty() {
        return 0.0;
    }
    match t {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    let b = t.as_bytes();
    if b.len() > 2 && b[0] == b'0' {
        let radix = match b[1] {
            b'x' | b'X' => 16,
            b'o' | b'O' => 8,
            b'b' | b'B' => 2,
            _ => 0,
        };
        if radix != 0 {
            return parse_radix_integer(&t[2..], radix);
        }
    }
    if is_decimal_literal(b) {
        // Rust's parser is correctly rounded, like V8's, once the grammar is known to match.
        t.parse::<f64>().unwrap_or(f64::NAN)
    } else {
        f64::NAN
    }
}

fn parse_radix_integer(digits: &str, radix: u32) -> f64 {
    if digits.is_empty() {
        return f64::NAN;
    }
    let mut acc: f64 = 0.0;
    let mut exact: u128 = 0;
    let mut exact_ok = true;
    for c in digits.chars() {
        let Some(d) = c.to_digit(radix) else {
            return f64::NAN;
        };
        if exact_ok {
            match exact
                .checked_mul(radix as u128)
                .and_then(|v| v.checked_add(d as u128))
            {
                Some(v) => exact = v,
                None => exact_ok = false,
            }
        }
        acc = acc * radix as f64 + d as f64;
    }
    if exact_ok {
        exact as f64
    } else {
        acc
    }
}

/// StrDecimalLiteral: `[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?`
fn is_decimal_literal(b: &[u8]) -> bool {
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int_digits = i - int_start;
    let mut frac_digits = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac_digits = i - f;
    }
    if int_digits == 0 && frac_digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let e = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == e {
            return false;
        }
    }
    i == b.len()
}

/// ECMAScript ToInt32 of a number.
pub fn to_int32(x: f64) -> i32 {
    if !x.is_finite() {
        return 0;
    }
    let t = x.trunc();
    let m = t.rem_euclid(4_294_967_296.0);
    (m as u32) as i32
}

/// JS `Number.isInteger(x)`.
pub fn is_integer(x: f64) -> bool {
    x.is_finite() && x.trunc() == x
}

/// JS `Number.isSafeInteger(x)`.
pub fn is_safe_integer(x: f64) -> bool {
    is_integer(x) && x.abs() <= 9_007_199_254_740_991.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_set_is_the_js_one() {
        for c in [
            '\t', '\n', '\u{b}', '\u{c}', '\r', ' ', '\u{a0}', '\u{feff}', '\u{3000}',
        ] {
            assert!(is_js_whitespace(c), "{c:?}");
        }
        // U+0085 is Rust white space but not JS white space; U+200B is neither.
        assert!(!is_js_whitespace('\u{85}'));
        assert!(!is_js_whitespace('\u{200b}'));
        assert_eq!(js_trim("\u{feff} a \u{2028}"), "a");
    }

    #[test]
    fn split_like_js() {
        let v: Vec<&str> = js_split_whitespace("  a  b\tc ").collect();
        assert_eq!(v, vec!["a", "b", "c"]);
        let v: Vec<&str> = js_split_whitespace("   ").collect();
        assert_eq!(v, vec![""]);
    }

    #[test]
    fn string_to_number_follows_js() {
        assert_eq!(js_string_to_number("123"), 123.0);
        assert_eq!(js_string_to_number(" 12\n"), 12.0);
        assert_eq!(js_string_to_number(""), 0.0);
        assert_eq!(js_string_to_number("0x1A"), 26.0);
        assert_eq!(js_string_to_number("0b101"), 5.0);
        assert_eq!(js_string_to_number("1e3"), 1000.0);
        assert_eq!(js_string_to_number(".5"), 0.5);
        assert_eq!(js_string_to_number("5."), 5.0);
        assert_eq!(js_string_to_number("-Infinity"), f64::NEG_INFINITY);
        for bad in [
            "inf", "nan", "NaN", "1e", "-0x1", "0x", "1_000", "abc", "+", ".",
        ] {
            assert!(js_string_to_number(bad).is_nan(), "{bad}");
        }
    }

    #[test]
    fn int32_wraps_like_js() {
        assert_eq!(to_int32(2_147_483_648.0), i32::MIN);
        assert_eq!(to_int32(4_294_967_296.0 + 5.0), 5);
        assert_eq!(to_int32(-1.5), -1);
        assert_eq!(to_int32(f64::NAN), 0);
        assert_eq!(to_int32(-4_294_967_297.0), -1);
    }
}
