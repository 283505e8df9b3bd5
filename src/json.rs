//! A JSON reader with V8 `JSON.parse` semantics (SPEC G3), for the values the store validates
//! and compares and session recovery inspects: RFC 8259 grammar only, JSON white space only
//! (space, TAB, LF, CR), any top-level value, numbers as correctly rounded doubles (`1e400` →
//! ∞, `-0` kept), strings as UTF-16 code units so `"\ud800"` survives, duplicate keys kept in
//! order (lookups take the last, as "last value wins"), and no nesting limit.
//!
//! A parsed text is a flat array of 12-byte nodes in pre-order that point into the text
//! (strings and numbers are decoded when asked for), so a value costs the same however deep it
//! nests: the parse is iterative, nothing recurses, and a 10,000,000-deep array costs ~120 MB
//! in two allocations, returned to the system as a whole, where a tree of boxed values costs
//! ~1.5 GB in small ones that the allocator keeps (issue 42: never more than the original's
//! parse). Hand-written rather than a crate: V8's exact semantics (lone surrogates, duplicate
//! keys in order, no depth limit) are not what JSON crates give (serde_json decodes to UTF-8
//! strings and stops at 128 levels).

/// One value of a parsed text, in pre-order. Numbers and strings: `a` = byte offset of the
/// literal (a string's content, after its opening quote), `b` = its byte length. Arrays and
/// objects: `a` = number of elements (members), `b` = nodes in the subtree, itself included.
/// An object's children alternate key (a string node) and value.
#[derive(Clone, Copy, Debug)]
struct Node {
    a: u32,
    b: u32,
    k: K,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum K {
    Null,
    True,
    False,
    Num,
    /// A string without escapes: its raw text is its content.
    Str,
    /// A string with escapes, decoded when asked for.
    StrEsc,
    Arr,
    Obj,
}

impl Node {
    /// Nodes this value spans.
    fn size(self) -> usize {
        match self.k {
            K::Arr | K::Obj => self.b as usize,
            _ => 1,
        }
    }
}

/// A parsed text (borrowed) and its nodes.
pub struct Doc<'t> {
    text: &'t str,
    nodes: Vec<Node>,
}

impl<'t> Doc<'t> {
    /// The top-level value.
    pub fn root(&self) -> Json<'_> {
        Json {
            text: self.text,
            sub: &self.nodes,
        }
    }

    /// The nodes alone, to keep beside an owned copy of the text.
    pub fn into_tree(self) -> Tree {
        Tree {
            nodes: self.nodes,
            text_len: self.text.len(),
        }
    }
}

impl std::fmt::Debug for Doc<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.root().fmt(f)
    }
}

/// The nodes of a parsed text, kept apart from it ([`Tree::root`] takes the text again).
#[derive(Debug)]
pub struct Tree {
    nodes: Vec<Node>,
    text_len: usize,
}

impl Tree {
    /// The top-level value of `text`, which must be the text this tree was parsed from.
    pub fn root<'a>(&'a self, text: &'a str) -> Json<'a> {
        assert_eq!(text.len(), self.text_len, "a tree read with another text");
        Json {
            text,
            sub: &self.nodes,
        }
    }
}

/// One parsed value (a view into its [`Doc`] or [`Tree`]).
#[derive(Clone, Copy)]
pub struct Json<'a> {
    text: &'a str,
    /// This value's subtree: `sub[0]` is the value itself.
    sub: &'a [Node],
}

/// What a [`Json`] value is.
pub enum Kind<'a> {
    Null,
    Bool(bool),
    Num(f64),
    Str(JStr<'a>),
    Arr(Items<'a>),
    Obj(Members<'a>),
}

impl<'a> Json<'a> {
    fn node(self) -> Node {
        self.sub[0]
    }

    fn span(self) -> &'a str {
        let n = self.node();
        &self.text[n.a as usize..(n.a + n.b) as usize]
    }

    /// What this value is, its scalars decoded.
    pub fn kind(self) -> Kind<'a> {
        let n = self.node();
        match n.k {
            K::Null => Kind::Null,
            K::True => Kind::Bool(true),
            K::False => Kind::Bool(false),
            // The grammar was checked; Rust's parser is correctly rounded and overflows to ±∞.
            K::Num => Kind::Num(self.span().parse::<f64>().unwrap_or(f64::NAN)),
            K::Str | K::StrEsc => Kind::Str(JStr::of(self.text, n)),
            K::Arr => Kind::Arr(Items {
                text: self.text,
                rest: &self.sub[1..],
                left: n.a,
            }),
            K::Obj => Kind::Obj(Members {
                text: self.text,
                rest: &self.sub[1..],
                left: n.a,
            }),
        }
    }

    /// `value[key]` for an object (last duplicate wins); None for absent keys and non-objects.
    /// (Validation asks ~40 of them per entry: a walk over the nodes, keys compared as bytes.)
    pub fn get(self, key: &str) -> Option<Json<'a>> {
        let n = self.node();
        if n.k != K::Obj {
            return None;
        }
        let mut found = None;
        let mut at = 1;
        for _ in 0..n.a {
            let k = self.sub[at];
            let size = self.sub[at + 1].size();
            if JStr::of(self.text, k).eq_str(key) {
                found = Some(at + 1..at + 1 + size);
            }
            at += 1 + size;
        }
        found.map(|r| Json {
            text: self.text,
            sub: &self.sub[r],
        })
    }

    /// The string, if this is one.
    pub fn str(self) -> Option<JStr<'a>> {
        match self.kind() {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The number, if this is one.
    pub fn num(self) -> Option<f64> {
        match self.kind() {
            Kind::Num(n) => Some(n),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn items(self) -> Option<Items<'a>> {
        match self.kind() {
            Kind::Arr(items) => Some(items),
            _ => None,
        }
    }

    /// The members in source order (duplicates included), if this is an object.
    pub fn members(self) -> Option<Members<'a>> {
        match self.kind() {
            Kind::Obj(members) => Some(members),
            _ => None,
        }
    }

    pub fn is_null(self) -> bool {
        self.node().k == K::Null
    }

    pub fn is_obj(self) -> bool {
        self.node().k == K::Obj
    }

    /// True when this is a string equal to `s`.
    pub fn is_str(self, s: &str) -> bool {
        self.str().is_some_and(|v| v.eq_str(s))
    }

    /// JS `typeof v === "object" && v !== null` (arrays included).
    pub fn is_object_like(self) -> bool {
        matches!(self.node().k, K::Arr | K::Obj)
    }

    /// A string, number or boolean.
    pub fn is_primitive(self) -> bool {
        matches!(
            self.node().k,
            K::True | K::False | K::Num | K::Str | K::StrEsc
        )
    }

    /// JS `ToNumber(v)` as a relational comparison applies it (arrays go through their string
    /// form: `[]` → 0, `[x]` → ToNumber(String(x)), longer arrays contain "," → NaN).
    pub fn to_number(self) -> f64 {
        match self.kind() {
            Kind::Null => 0.0,
            Kind::Bool(b) => f64::from(u8::from(b)),
            Kind::Num(n) => n,
            Kind::Str(s) => {
                crate::jsstr::js_string_to_number(&String::from_utf16_lossy(&s.to_vec()))
            }
            Kind::Obj(_) => f64::NAN,
            Kind::Arr(mut items) => match (items.next(), items.next()) {
                (None, _) => 0.0,
                (Some(only), None) => match only.node().k {
                    // String(x) of a finite number parses back to the same number; null → "" → 0.
                    K::Null => 0.0,
                    K::Num | K::Str | K::StrEsc | K::Arr => only.to_number(),
                    _ => f64::NAN,
                },
                _ => f64::NAN,
            },
        }
    }
}

impl std::fmt::Debug for Json<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.node();
        match n.k {
            K::Arr => write!(f, "[{} items]", n.a),
            K::Obj => write!(f, "{{{} members}}", n.a),
            K::Str | K::StrEsc => write!(f, "{:?}", self.span()),
            K::Num => f.write_str(self.span()),
            K::Null => f.write_str("null"),
            K::True => f.write_str("true"),
            K::False => f.write_str("false"),
        }
    }
}

/// The elements of an array.
#[derive(Clone)]
pub struct Items<'a> {
    text: &'a str,
    rest: &'a [Node],
    left: u32,
}

impl<'a> Iterator for Items<'a> {
    type Item = Json<'a>;

    fn next(&mut self) -> Option<Json<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (sub, rest) = self.rest.split_at(self.rest[0].size());
        self.rest = rest;
        Some(Json {
            text: self.text,
            sub,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Items<'_> {}

/// The members of an object, in source order (duplicates included).
#[derive(Clone)]
pub struct Members<'a> {
    text: &'a str,
    rest: &'a [Node],
    left: u32,
}

impl<'a> Iterator for Members<'a> {
    type Item = (JStr<'a>, Json<'a>);

    fn next(&mut self) -> Option<(JStr<'a>, Json<'a>)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let key = JStr::of(self.text, self.rest[0]);
        let (sub, rest) = self.rest[1..].split_at(self.rest[1].size());
        self.rest = rest;
        Some((
            key,
            Json {
                text: self.text,
                sub,
            },
        ))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Members<'_> {}

/// A string value or key: its raw text between the quotes, decoded on demand to UTF-16 code
/// units (a JS string's).
#[derive(Clone, Copy, Debug)]
pub struct JStr<'a> {
    raw: &'a str,
    escaped: bool,
}

impl<'a> JStr<'a> {
    /// The string of a key or string node of `text`.
    fn of(text: &'a str, n: Node) -> JStr<'a> {
        debug_assert!(matches!(n.k, K::Str | K::StrEsc));
        JStr {
            raw: &text[n.a as usize..(n.a + n.b) as usize],
            escaped: n.k == K::StrEsc,
        }
    }

    /// The UTF-16 code units.
    pub fn units(self) -> Units<'a> {
        Units {
            rest: self.raw,
            low: None,
        }
    }

    pub fn to_vec(self) -> Vec<u16> {
        if self.escaped {
            self.units().collect()
        } else {
            self.raw.encode_utf16().collect()
        }
    }

    /// Equal to the Rust string `s` (compared as UTF-16).
    pub fn eq_str(self, s: &str) -> bool {
        if self.escaped {
            self.units().eq(s.encode_utf16())
        } else {
            self.raw == s
        }
    }

    /// Equal to these code units.
    pub fn eq_units(self, u: &[u16]) -> bool {
        self.units().eq(u.iter().copied())
    }

    /// JS `.length`: UTF-16 code units.
    pub fn len16(self) -> usize {
        if self.escaped {
            self.units().count()
        } else {
            self.raw.chars().map(char::len_utf16).sum()
        }
    }

    /// The empty string (an escape always stands for at least one unit).
    pub fn is_empty(self) -> bool {
        self.raw.is_empty()
    }

    /// Every unit is JS white space (G5), the empty string included.
    pub fn is_blank(self) -> bool {
        self.units()
            .all(|u| char::from_u32(u32::from(u)).is_some_and(crate::jsstr::is_js_whitespace))
    }
}

impl PartialEq for JStr<'_> {
    fn eq(&self, other: &Self) -> bool {
        if !self.escaped && !other.escaped {
            self.raw == other.raw
        } else {
            self.units().eq(other.units())
        }
    }
}

/// The UTF-16 code units of a string literal's content (checked by the parser).
pub struct Units<'a> {
    rest: &'a str,
    /// The low surrogate of a character above U+FFFF, due next.
    low: Option<u16>,
}

impl Iterator for Units<'_> {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        if let Some(low) = self.low.take() {
            return Some(low);
        }
        let b = self.rest.as_bytes();
        if b.first() == Some(&b'\\') {
            let (unit, len) = match b[1] {
                b'"' => (0x22, 2),
                b'\\' => (0x5c, 2),
                b'/' => (0x2f, 2),
                b'b' => (0x08, 2),
                b'f' => (0x0c, 2),
                b'n' => (0x0a, 2),
                b'r' => (0x0d, 2),
                b't' => (0x09, 2),
                _ => (
                    u16::from_str_radix(&self.rest[2..6], 16).unwrap_or(0xfffd),
                    6,
                ),
            };
            self.rest = &self.rest[len..];
            return Some(unit);
        }
        let c = self.rest.chars().next()?;
        self.rest = &self.rest[c.len_utf8()..];
        let mut pair = [0u16; 2];
        let units = c.encode_utf16(&mut pair);
        if units.len() == 2 {
            self.low = Some(units[1]);
        }
        Some(units[0])
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

/// Parse `text` exactly as `JSON.parse(text)` would; None where it would throw. (Texts are
/// read with a bound far below 4 GiB; a longer one, which no caller makes, is refused.)
pub fn parse(text: &str) -> Option<Doc<'_>> {
    if text.len() > u32::MAX as usize {
        return None;
    }
    let nodes = Parser {
        b: text.as_bytes(),
        i: 0,
        nodes: Vec::new(),
        open: Vec::new(),
    }
    .parse_document()?;
    Some(Doc { text, nodes })
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    nodes: Vec<Node>,
    /// The containers not closed yet, by node index.
    open: Vec<u32>,
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

    fn leaf(&mut self, k: K, start: usize, len: usize) {
        self.nodes.push(Node {
            a: start as u32,
            b: len as u32,
            k,
        });
    }

    fn literal(&mut self, word: &[u8], k: K) -> Option<()> {
        if self.b[self.i..].starts_with(word) {
            self.leaf(k, self.i, word.len());
            self.i += word.len();
            Some(())
        } else {
            None
        }
    }

    /// `"key"` then `:`; positions after the colon and following white space.
    fn key(&mut self) -> Option<()> {
        if self.peek() != Some(b'"') {
            return None;
        }
        self.string()?;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(())
    }

    fn parse_document(mut self) -> Option<Vec<Node>> {
        self.ws();
        loop {
            // A value starts here.
            match self.peek()? {
                open @ (b'{' | b'[') => {
                    let (k, close) = if open == b'{' {
                        (K::Obj, b'}')
                    } else {
                        (K::Arr, b']')
                    };
                    self.i += 1;
                    self.ws();
                    let at = self.nodes.len();
                    self.nodes.push(Node { a: 0, b: 1, k });
                    if self.eat(close).is_none() {
                        self.nodes[at].a = 1;
                        self.open.push(at as u32);
                        if k == K::Obj {
                            self.key()?;
                        }
                        continue;
                    }
                }
                b'"' => self.string()?,
                b't' => self.literal(b"true", K::True)?,
                b'f' => self.literal(b"false", K::False)?,
                b'n' => self.literal(b"null", K::Null)?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => return None,
            }
            // A value ended: separators, and every container that closes here.
            loop {
                self.ws();
                let Some(&top) = self.open.last() else {
                    return (self.i == self.b.len()).then_some(self.nodes);
                };
                let top = top as usize;
                let obj = self.nodes[top].k == K::Obj;
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        self.ws();
                        self.nodes[top].a += 1;
                        if obj {
                            self.key()?;
                        }
                        break;
                    }
                    b']' if !obj => {}
                    b'}' if obj => {}
                    _ => return None,
                }
                self.i += 1;
                self.open.pop();
                self.nodes[top].b = (self.nodes.len() - top) as u32;
            }
        }
    }

    fn number(&mut self) -> Option<()> {
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
        self.leaf(K::Num, start, self.i - start);
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    /// A string literal starting at `"`: its grammar checked, its content recorded.
    fn string(&mut self) -> Option<()> {
        self.i += 1; // opening quote
        let start = self.i;
        let mut escaped = false;
        loop {
            match *self.b.get(self.i)? {
                b'"' => {
                    let k = if escaped { K::StrEsc } else { K::Str };
                    self.leaf(k, start, self.i - start);
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    escaped = true;
                    match *self.b.get(self.i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                        b'u' => {
                            let hex = self.b.get(self.i + 2..self.i + 6)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.i += 6;
                        }
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None, // raw control character
                _ => self.i += 1,
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

    fn units(v: Json) -> Vec<u16> {
        v.str().expect("a string").to_vec()
    }

    fn num(text: &str) -> f64 {
        parse(text).unwrap().root().num().expect("a number")
    }

    #[test]
    fn accepts_what_json_parse_accepts() {
        assert_eq!(num(" 1 "), 1.0);
        let d = parse("\"a\\u00e9\\n\"").unwrap();
        assert_eq!(units(d.root()), "aé\n".encode_utf16().collect::<Vec<_>>());
        assert!(parse("[1,[2,{}],[]]\r\n").unwrap().root().is_object_like());
        assert_eq!(num("1e400"), f64::INFINITY);
        let z = num("-0");
        assert!(z == 0.0 && z.is_sign_negative());
        assert_eq!(units(parse("\"\\ud800\"").unwrap().root()), vec![0xd800]);
        assert_eq!(
            units(parse("\"\\ud83d\\ude00😀\"").unwrap().root()),
            vec![0xd83d, 0xde00, 0xd83d, 0xde00]
        );
        assert!(parse("null").unwrap().root().is_null());
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
            "\"\\u12g4\"",
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
            "[1}",
            "{\"a\":1]",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn duplicate_keys_last_wins() {
        let d = parse(r#"{"type":"a","type":"b","__proto__":1,"t\u0079pe":"c"}"#).unwrap();
        let v = d.root();
        assert!(v.get("type").unwrap().is_str("c"));
        assert_eq!(v.get("__proto__").and_then(Json::num), Some(1.0));
        assert_eq!(v.members().unwrap().len(), 4);
    }

    #[test]
    fn strings_decode_on_demand() {
        let d = parse(r#"["plain","é\"\\\/\b\f\n\r\t","😀",""]"#).unwrap();
        let s: Vec<JStr> = d
            .root()
            .items()
            .unwrap()
            .map(|v| v.str().unwrap())
            .collect();
        assert!(s[0].eq_str("plain") && s[0].len16() == 5);
        assert!(s[1].eq_str("é\"\\/\u{8}\u{c}\n\r\t") && s[1].len16() == 9);
        assert_eq!(s[2].len16(), 2);
        assert!(s[3].is_empty() && s[3].is_blank());
        let esc = parse(r#""\u0070lain""#).unwrap();
        assert_eq!(
            esc.root().str().unwrap(),
            s[0],
            "escaped and plain compare by units"
        );
    }

    #[test]
    fn very_deep_nesting_neither_parses_recursively_nor_drops_recursively() {
        let depth = 1_000_000;
        let text = "[".repeat(depth) + &"]".repeat(depth);
        let d = parse(&text).expect("deep array parses");
        // Twelve bytes a level, whatever the depth.
        assert_eq!(d.nodes.len(), depth);
        assert_eq!(std::mem::size_of::<Node>(), 12);
        let mut v = d.root();
        let mut levels = 0;
        while let Some(mut items) = v.items() {
            levels += 1;
            match items.next() {
                Some(inner) => v = inner,
                None => break,
            }
        }
        assert_eq!(levels, depth);
        drop(d);
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
            assert_eq!(parse(text).unwrap().root().to_number(), want, "{text}");
        }
        for text in ["\"x\"", "{}", "[1,2]", "[true]", "[{}]"] {
            assert!(parse(text).unwrap().root().to_number().is_nan(), "{text}");
        }
    }
}
