//! A JSON reader with V8 `JSON.parse` semantics (SPEC G3), for the values session recovery
//! inspects: RFC 8259 grammar only, JSON white space only (space, TAB, LF, CR), any top-level
//! value, numbers as correctly rounded doubles (`1e400` → ∞, `-0` kept), strings as UTF-16
//! code units so `"\ud800"` survives, duplicate keys kept in order (lookups take the last, as
//! "last value wins"), and no nesting limit: parsing and dropping are both iterative, so a
//! pathologically deep line cannot overflow the stack.

/// A parsed JSON value. Strings are UTF-16 code units (JS strings), not Rust `String`s.
#[derive(Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(Vec<u16>),
    Arr(Vec<Json>),
    /// Members in source order, duplicates included.
    Obj(Vec<(Vec<u16>, Json)>),
}

/// Drop a tree without recursion: the derived drop recurses once per nesting level, and a
/// 10⁶-deep value would overflow the stack. `take_children` moves a node's children out.
pub fn drop_tree<T>(root: &mut T, take_children: fn(&mut T, &mut Vec<T>)) {
    let mut stack: Vec<T> = Vec::new();
    take_children(root, &mut stack);
    while let Some(mut v) = stack.pop() {
        take_children(&mut v, &mut stack);
    }
}

impl Drop for Json {
    fn drop(&mut self) {
        drop_tree(self, take_children);
    }
}

fn take_children(v: &mut Json, out: &mut Vec<Json>) {
    match v {
        Json::Arr(items) if !items.is_empty() => out.append(items),
        Json::Obj(members) if !members.is_empty() => {
            out.extend(members.drain(..).map(|(_, m)| m));
        }
        _ => {}
    }
}

impl Json {
    /// `value[key]` for an object (last duplicate wins); None for absent keys and non-objects.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(members) => members
                .iter()
                .rev()
                .find(|(k, _)| utf16_eq(k, key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// True when this is a string equal to `s`.
    pub fn is_str(&self, s: &str) -> bool {
        matches!(self, Json::Str(v) if utf16_eq(v, s))
    }

    /// JS `typeof v === "object" && v !== null` (arrays included).
    pub fn is_object_like(&self) -> bool {
        matches!(self, Json::Arr(_) | Json::Obj(_))
    }

    /// JS `ToNumber(v)` as a relational comparison applies it (arrays go through their string
    /// form: `[]` → 0, `[x]` → ToNumber(String(x)), longer arrays contain "," → NaN).
    pub fn to_number(&self) -> f64 {
        match self {
            Json::Null => 0.0,
            Json::Bool(b) => f64::from(u8::from(*b)),
            Json::Num(n) => *n,
            Json::Str(s) => crate::jsstr::js_string_to_number(&String::from_utf16_lossy(s)),
            Json::Obj(_) => f64::NAN,
            Json::Arr(items) => match items.as_slice() {
                [] => 0.0,
                // String(x) of a finite number parses back to the same number; null → "" → 0.
                [Json::Null] => 0.0,
                [only @ (Json::Num(_) | Json::Str(_) | Json::Arr(_))] => only.to_number(),
                _ => f64::NAN,
            },
        }
    }
}

/// Compare UTF-16 code units with a Rust string.
pub fn utf16_eq(units: &[u16], s: &str) -> bool {
    let mut it = s.encode_utf16();
    for &u in units {
        if it.next() != Some(u) {
            return false;
        }
    }
    it.next().is_none()
}

/// Parse `text` exactly as `JSON.parse(text)` would; None where it would throw.
pub fn parse(text: &str) -> Option<Json> {
    Parser {
        b: text.as_bytes(),
        s: text,
        i: 0,
    }
    .parse_document()
}

enum Frame {
    Arr(Vec<Json>),
    Obj(Vec<(Vec<u16>, Json)>, Vec<u16>),
}

struct Parser<'a> {
    b: &'a [u8],
    s: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    fn literal(&mut self, word: &[u8], v: Json) -> Option<Json> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Some(v)
        } else {
            None
        }
    }

    /// `"key"` then `:`; positions after the colon and following white space.
    fn key(&mut self) -> Option<Vec<u16>> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let k = self.string()?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(k)
    }

    fn parse_document(mut self) -> Option<Json> {
        let mut stack: Vec<Frame> = Vec::new();
        self.ws();
        loop {
            // A value starts here.
            let mut value = match self.peek()? {
                b'{' => {
                    self.i += 1;
                    self.ws();
                    if self.eat(b'}').is_some() {
                        Json::Obj(Vec::new())
                    } else {
                        let k = self.key()?;
                        stack.push(Frame::Obj(Vec::new(), k));
                        continue;
                    }
                }
                b'[' => {
                    self.i += 1;
                    self.ws();
                    if self.eat(b']').is_some() {
                        Json::Arr(Vec::new())
                    } else {
                        stack.push(Frame::Arr(Vec::new()));
                        continue;
                    }
                }
                b'"' => Json::Str(self.string()?),
                b't' => self.literal(b"true", Json::Bool(true))?,
                b'f' => self.literal(b"false", Json::Bool(false))?,
                b'n' => self.literal(b"null", Json::Null)?,
                b'-' | b'0'..=b'9' => Json::Num(self.number()?),
                _ => return None,
            };
            // Attach the finished value to its parents, closing every container that ends here.
            loop {
                self.ws();
                match stack.last_mut() {
                    None => return (self.i == self.b.len()).then_some(value),
                    Some(Frame::Arr(items)) => {
                        items.push(value);
                        match self.peek()? {
                            b',' => {
                                self.i += 1;
                                self.ws();
                                break;
                            }
                            b']' => {
                                self.i += 1;
                                let Some(Frame::Arr(items)) = stack.pop() else {
                                    unreachable!("top frame is an array")
                                };
                                value = Json::Arr(items);
                            }
                            _ => return None,
                        }
                    }
                    Some(Frame::Obj(members, key)) => {
                        members.push((std::mem::take(key), value));
                        match self.peek()? {
                            b',' => {
                                self.i += 1;
                                self.ws();
                                *key = self.key()?;
                                break;
                            }
                            b'}' => {
                                self.i += 1;
                                let Some(Frame::Obj(members, _)) = stack.pop() else {
                                    unreachable!("top frame is an object")
                                };
                                value = Json::Obj(members);
                            }
                            _ => return None,
                        }
                    }
                }
            }
        }
    }

    fn number(&mut self) -> Option<f64> {
        let start = self.i;
        self.eat(b'-');
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
        }
        // The grammar is checked; Rust's parser is correctly rounded and overflows to ±∞.
        self.s[start..self.i].parse::<f64>().ok()
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    /// A string literal starting at `"`; returns its UTF-16 code units.
    fn string(&mut self) -> Option<Vec<u16>> {
        self.i += 1; // opening quote
        let mut out: Vec<u16> = Vec::new();
        loop {
            // Copy the run up to the next quote, backslash or control character.
            let run_start = self.i;
            while let Some(&c) = self.b.get(self.i) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            if self.i > run_start {
                let run = &self.s[run_start..self.i];
                if run.is_ascii() {
                    out.extend(run.bytes().map(u16::from));
                } else {
                    out.extend(run.encode_utf16());
                }
            }
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(out);
                }
                b'\\' => {
                    self.i += 1;
                    let unit = match self.peek()? {
                        b'"' => 0x22,
                        b'\\' => 0x5c,
                        b'/' => 0x2f,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => 0x0a,
                        b'r' => 0x0d,
                        b't' => 0x09,
                        b'u' => {
                            let hex = self.b.get(self.i + 1..self.i + 5)?;
                            let mut v: u16 = 0;
                            for &h in hex {
                                v = v * 16 + (h as char).to_digit(16)? as u16;
                            }
                            self.i += 4;
                            v
                        }
                        _ => return None,
                    };
                    self.i += 1;
                    out.push(unit);
                }
                _ => return None, // raw control character
            }
        }
    }
}

#[cfg(test)]
#[path = "json_props.rs"]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Json {
        Json::Str(x.encode_utf16().collect())
    }

    #[test]
    fn accepts_what_json_parse_accepts() {
        assert_eq!(parse(" 1 "), Some(Json::Num(1.0)));
        assert_eq!(parse("\"a\\u00e9\\n\""), Some(s("aé\n")));
        assert_eq!(
            parse("[1,[2,{}],[]]\r\n").map(|v| v.is_object_like()),
            Some(true)
        );
        assert_eq!(parse("1e400"), Some(Json::Num(f64::INFINITY)));
        match parse("-0") {
            Some(Json::Num(z)) => assert!(z == 0.0 && z.is_sign_negative()),
            other => panic!("{other:?}"),
        }
        assert_eq!(parse("\"\\ud800\""), Some(Json::Str(vec![0xd800])));
        assert_eq!(parse("null"), Some(Json::Null));
    }

    #[test]
    fn rejects_what_json_parse_rejects() {
        for bad in [
            "",
            " ",
            "01",
            "+1",
            "1.",
            ".5",
            "1e",
            "NaN",
            "[1,]",
            "{\"a\":1,}",
            "{a:1}",
            "'a'",
            "\"\t\"",
            "\"\\x\"",
            "\"\\u12\"",
            "[1] x",
            "\u{feff}1",
            "\u{a0}1",
            "tru",
            "nul",
            "[",
            "{\"a\"",
            "{\"a\":}",
            "//c\n1",
            "-",
            "1 2",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn duplicate_keys_last_wins() {
        let v = parse(r#"{"type":"a","type":"b","__proto__":1}"#).unwrap();
        assert!(v.get("type").unwrap().is_str("b"));
        assert_eq!(v.get("__proto__"), Some(&Json::Num(1.0)));
    }

    #[test]
    fn very_deep_nesting_neither_parses_recursively_nor_drops_recursively() {
        let depth = 1_000_000;
        let text = "[".repeat(depth) + &"]".repeat(depth);
        let v = parse(&text).expect("deep array parses");
        drop(v);
        let obj = "{\"a\":".repeat(depth) + "1" + &"}".repeat(depth);
        assert!(parse(&obj).is_some());
        assert!(parse(&"[".repeat(depth)).is_none());
    }

    #[test]
    fn to_number_follows_js_relational_conversion() {
        for (text, want) in [
            ("3", 3.0),
            ("\"3\"", 3.0),
            ("true", 1.0),
            ("[]", 0.0),
            ("[3]", 3.0),
            ("[[\"2\"]]", 2.0),
            ("[null]", 0.0),
        ] {
            assert_eq!(parse(text).unwrap().to_number(), want, "{text}");
        }
        for text in ["\"x\"", "{}", "[1,2]", "[true]", "[{}]"] {
            assert!(parse(text).unwrap().to_number().is_nan(), "{text}");
        }
    }
}
