//! A small zero-copy JSON reader for the flat objects of YSB events and SenML messages.
//!
//! It validates the JSON grammar while walking an object's members and hands out borrowed
//! slices: strings without escapes (the normal case) are compared and emitted without copying;
//! escaped strings are decoded on demand into a caller's buffer. Nesting is bounded so hostile
//! input cannot exhaust the stack.

use crate::text::Buf;

/// Why a text is not the JSON we expect.
pub type Error = &'static str;

const MAX_DEPTH: usize = 32;

/// A JSON string as it appears between its quotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Str<'a> {
    raw: &'a [u8],
    escaped: bool,
}

impl<'a> Str<'a> {
    /// A string whose content is `raw` as is.
    pub fn from_plain(raw: &'a [u8]) -> Self {
        Self { raw, escaped: false }
    }

    /// The string's bytes when it has no escapes (the bytes are then exactly its content).
    #[inline]
    pub fn plain(&self) -> Option<&'a [u8]> {
        (!self.escaped).then_some(self.raw)
    }

    /// Whether the string's content equals `s`.
    pub fn is(&self, s: &str) -> bool {
        if !self.escaped {
            return self.raw == s.as_bytes();
        }
        let mut b = Buf::new();
        self.decode_into(&mut b).is_ok() && b.get() == Some(s.as_bytes())
    }

    /// The content: borrowed when plain, else decoded into `buf` (cleared first).
    pub fn content<'b>(&self, buf: &'b mut Buf) -> Result<&'b [u8], Error>
    where
        'a: 'b,
    {
        if !self.escaped {
            return Ok(self.raw);
        }
        self.decode_into(buf)?;
        buf.get().ok_or("string too long")
    }

    /// Appends the content to `out`, decoding escapes.
    pub fn write_to(&self, out: &mut Buf) -> Result<(), Error> {
        if self.escaped {
            let mut b = Buf::new();
            out.put(self.content(&mut b)?);
        } else {
            out.put(self.raw);
        }
        Ok(())
    }

    fn decode_into(&self, buf: &mut Buf) -> Result<(), Error> {
        buf.clear();
        let s = self.raw;
        let mut i = 0;
        while i < s.len() {
            if s[i] != b'\\' {
                buf.byte(s[i]);
                i += 1;
                continue;
            }
            let c = *s.get(i + 1).ok_or("bad escape")?;
            i += 2;
            let simple = match c {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'b' => 8,
                b'f' => 12,
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                b'u' => {
                    let cp = hex4(s.get(i..i + 4).ok_or("bad \\u escape")?)?;
                    i += 4;
                    // Surrogates are replaced rather than paired: keys and ids never need them.
                    let ch = char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER);
                    let mut utf8 = [0u8; 4];
                    buf.put(ch.encode_utf8(&mut utf8).as_bytes());
                    continue;
                }
                _ => return Err("bad escape"),
            };
            buf.byte(simple);
        }
        Ok(())
    }
}

fn hex4(h: &[u8]) -> Result<u32, Error> {
    let mut v = 0;
    for &c in h {
        let d = (c as char).to_digit(16).ok_or("bad \\u escape")?;
        v = v * 16 + d;
    }
    Ok(v)
}

/// A JSON value; objects and arrays are given as their raw text, to be walked with
/// [`members`] and [`items`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'a> {
    /// A string.
    Str(Str<'a>),
    /// A number, as written.
    Num(&'a [u8]),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// An object, braces included.
    Object(&'a [u8]),
    /// An array, brackets included.
    Array(&'a [u8]),
}

impl<'a> Value<'a> {
    /// The bytes of a number, or of a string holding one (SenML files write `"v":"21.5"`).
    pub fn numeric_text(&self) -> Option<&'a [u8]> {
        match self {
            Value::Num(n) => Some(n),
            Value::Str(s) => s.plain(),
            _ => None,
        }
    }
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn expect(&mut self, c: u8, err: Error) -> Result<(), Error> {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(err)
        }
    }

    fn string(&mut self) -> Result<Str<'a>, Error> {
        self.expect(b'"', "expected a string")?;
        let start = self.i;
        let mut escaped = false;
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    let raw = &self.s[start..self.i];
                    self.i += 1;
                    return Ok(Str { raw, escaped });
                }
                b'\\' => {
                    escaped = true;
                    self.i += 2;
                }
                0..=0x1f => return Err("control character in string"),
                _ => self.i += 1,
            }
        }
        Err("unterminated string")
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<&'a [u8], Error> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.digits() {
            0 => return Err("bad number"),
            n if n > 1 && self.s[self.i - n] == b'0' => return Err("bad number"),
            _ => {}
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err("bad number");
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err("bad number");
            }
        }
        Ok(&self.s[start..self.i])
    }

    fn literal(&mut self, word: &[u8], v: Value<'a>) -> Result<Value<'a>, Error> {
        if self.s[self.i..].starts_with(word) {
            self.i += word.len();
            Ok(v)
        } else {
            Err("unexpected character")
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, Error> {
        self.ws();
        match self.peek().ok_or("unexpected end")? {
            b'"' => self.string().map(Value::Str),
            b'{' => {
                let start = self.i;
                self.walk_object(depth + 1, &mut |_, _| Ok(()))?;
                Ok(Value::Object(&self.s[start..self.i]))
            }
            b'[' => {
                let start = self.i;
                self.walk_array(depth + 1, &mut |_| Ok(()))?;
                Ok(Value::Array(&self.s[start..self.i]))
            }
            b't' => self.literal(b"true", Value::Bool(true)),
            b'f' => self.literal(b"false", Value::Bool(false)),
            b'n' => self.literal(b"null", Value::Null),
            b'-' | b'0'..=b'9' => self.number().map(Value::Num),
            _ => Err("unexpected character"),
        }
    }

    fn walk_object(
        &mut self,
        depth: usize,
        f: &mut dyn FnMut(Str<'a>, Value<'a>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err("nesting too deep");
        }
        self.expect(b'{', "expected an object")?;
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':', "expected `:`")?;
            let v = self.value(depth)?;
            f(key, v)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err("expected `,` or `}`"),
            }
        }
    }

    fn walk_array(
        &mut self,
        depth: usize,
        f: &mut dyn FnMut(Value<'a>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if depth > MAX_DEPTH {
            return Err("nesting too deep");
        }
        self.expect(b'[', "expected an array")?;
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            let v = self.value(depth)?;
            f(v)?;
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err("expected `,` or `]`"),
            }
        }
    }

    fn end(&mut self) -> Result<(), Error> {
        self.ws();
        if self.i == self.s.len() { Ok(()) } else { Err("trailing characters") }
    }
}

/// Calls `f` with every member of the object `text` (which must be one object, surrounding
/// whitespace allowed). `f` may stop the walk by returning an error.
pub fn members<'a>(
    text: &'a [u8],
    mut f: impl FnMut(Str<'a>, Value<'a>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut r = Reader { s: text, i: 0 };
    r.walk_object(0, &mut f)?;
    r.end()
}

/// Calls `f` with every item of the array `text`.
pub fn items<'a>(
    text: &'a [u8],
    mut f: impl FnMut(Value<'a>) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut r = Reader { s: text, i: 0 };
    r.walk_array(0, &mut f)?;
    r.end()
}

/// Appends `s` to `out` as a JSON string body (quotes not included), escaping as needed.
pub fn escape_into(s: &[u8], out: &mut Buf) {
    for &c in s {
        match c {
            b'"' => out.put(b"\\\""),
            b'\\' => out.put(b"\\\\"),
            0..=0x1f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.put(b"\\u00").byte(HEX[usize::from(c >> 4)]).byte(HEX[usize::from(c & 15)])
            }
            _ => out.byte(c),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(text: &str) -> Result<Vec<(String, String)>, Error> {
        let mut v = Vec::new();
        members(text.as_bytes(), |k, val| {
            let mut b = Buf::new();
            let key = String::from_utf8(k.content(&mut b)?.to_vec()).unwrap();
            let val = match val {
                Value::Str(s) => String::from_utf8(s.content(&mut b)?.to_vec()).unwrap(),
                Value::Num(n) | Value::Object(n) | Value::Array(n) => {
                    String::from_utf8(n.to_vec()).unwrap()
                }
                Value::Bool(x) => x.to_string(),
                Value::Null => "null".into(),
            };
            v.push((key, val));
            Ok(())
        })?;
        Ok(v)
    }

    #[test]
    fn reads_flat_and_nested_members() {
        let v = collect(
            r#" {"a": "x", "b":-1.5e3, "c" : [1, {"d": null}], "e\u0041": "q\"\\\n", "f": true} "#,
        )
        .unwrap();
        assert_eq!(v[0], ("a".into(), "x".into()));
        assert_eq!(v[1], ("b".into(), "-1.5e3".into()));
        assert_eq!(v[2], ("c".into(), "[1, {\"d\": null}]".into()));
        assert_eq!(v[3], ("eA".into(), "q\"\\\n".into()));
        assert_eq!(v[4], ("f".into(), "true".into()));
        let mut n = 0;
        items(b"[1,2, 3]", |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 3);
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            "{",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{\"a\":01}",
            "{\"a\":1.}",
            "[1]",
            "{\"a\":\"x}",
            "{\"a\":tru}",
            "{} x",
            "{\"a\":\"\u{1}\"}",
            "{\"a\":-}",
        ] {
            assert!(collect(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert_eq!(collect(&format!("{{\"a\":{deep}}}")), Err("nesting too deep"));
    }

    #[test]
    fn string_comparison_and_escaping() {
        let mut seen = None;
        members(br#"{"k\u0065y":"v"}"#, |k, _| {
            seen = Some(k.is("key"));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, Some(true));
        let mut b = Buf::new();
        escape_into(b"a\"b\\c\n", &mut b);
        assert_eq!(b.get(), Some(&br#"a\"b\\c\u000a"#[..]));
    }
}
