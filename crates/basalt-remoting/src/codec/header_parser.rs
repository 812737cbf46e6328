//! A hand-written parser for the JSON headers real clients send: a flat object
//! of known keys, integers, plain strings and a string-valued `extFields`.
//!
//! It returns `None` for anything outside that shape (floats, nested unknown
//! values, odd escapes, trailing bytes, overflow…), and the caller then uses
//! the serde path, which is the reference: for every input this parser
//! accepts, the serde path yields the same command (a proptest checks this).

use bytes::Bytes;

use crate::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};

struct Parser<'a> {
    /// The whole header, validated as UTF-8 once; slices are cut at ASCII
    /// delimiters, so they are char boundaries.
    s: &'a str,
    b: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(c) = self.b.get(self.at) {
            if matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
                self.at += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.at).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.at += 1;
            Some(())
        } else {
            None
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        if self.b.get(self.at..self.at + word.len())? == word {
            self.at += word.len();
            Some(())
        } else {
            None
        }
    }

    /// A key without escapes, borrowed from the input.
    fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        loop {
            match *self.b.get(self.at)? {
                b'"' => break,
                b'\\' => return None,
                c if c < 0x20 => return None,
                _ => self.at += 1,
            }
        }
        let s = self.s.get(start..self.at)?;
        self.at += 1;
        Some(s)
    }

    /// A string with escapes decoded, appended to `out`. The opening quote
    /// has been consumed.
    fn str_into(&mut self, out: &mut String) -> Option<()> {
        loop {
            let start = self.at;
            while let Some(&c) = self.b.get(self.at) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.at += 1;
            }
            out.push_str(self.s.get(start..self.at)?);
            match *self.b.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => {
                    let esc = *self.b.get(self.at + 1)?;
                    self.at += 2;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi) {
                                if self.b.get(self.at..self.at + 2)? != b"\\u" {
                                    return None;
                                }
                                self.at += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return None;
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            out.push(char::from_u32(cp)?);
                        }
                        _ => return None,
                    }
                }
                _ => return None, // raw control character
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.b.get(self.at..self.at + 4)?;
        let mut v = 0u32;
        for &c in h {
            v = v * 16 + (c as char).to_digit(16)?;
        }
        self.at += 4;
        Some(v)
    }

    /// A JSON integer (no fraction, no exponent, no leading zeros).
    fn int(&mut self) -> Option<i64> {
        self.ws();
        let start = self.at;
        if self.b.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let digits = self.at;
        while self.b.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let n = self.at - digits;
        if n == 0 || (n > 1 && self.b[digits] == b'0') {
            return None;
        }
        if matches!(self.b.get(self.at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        // serde_json reads "-0" as the float -0.0; leave it to that path.
        if self.at - start == 2 && self.b[start] == b'-' && self.b[digits] == b'0' {
            return None;
        }
        self.s.get(start..self.at)?.parse().ok()
    }

    /// An i32 header field: an integer or null (→ 0).
    fn i32_field(&mut self) -> Option<i32> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(0);
        }
        i32::try_from(self.int()?).ok()
    }

    /// A scalar ext value appended to `out`; `false` for null.
    fn ext_value(&mut self, out: &mut String) -> Option<bool> {
        match self.peek()? {
            b'"' => {
                self.at += 1;
                self.str_into(out)?;
                Some(true)
            }
            b'n' => self.literal(b"null").map(|_| false),
            b't' => self.literal(b"true").map(|_| {
                out.push_str("true");
                true
            }),
            b'f' => self.literal(b"false").map(|_| {
                out.push_str("false");
                true
            }),
            _ => {
                use std::fmt::Write;
                let v = self.int()?;
                let _ = write!(out, "{v}");
                Some(true)
            }
        }
    }

    fn ext_fields(&mut self) -> Option<ExtFields> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(ExtFields::new());
        }
        self.eat(b'{')?;
        let mut ext = ExtFields::with_capacity(16);
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(ext);
        }
        loop {
            self.eat(b'"')?;
            let text = ext.text_mut();
            let start = text.len();
            self.str_into(text)?;
            let key_end = text.len();
            self.eat(b':')?;
            let text = ext.text_mut();
            if self.ext_value(text)? {
                ext.push_written(start, key_end);
            } else {
                ext.text_mut().truncate(start);
            }
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(ext);
                }
                _ => return None,
            }
        }
    }

    /// Skips a scalar value of an unknown key.
    fn skip_scalar(&mut self) -> Option<()> {
        let mut sink = String::new();
        self.ext_value(&mut sink).map(|_| ())
    }
}

/// Parses a header in the common shape, or returns `None` to defer to serde.
pub(super) fn parse(h: &[u8]) -> Option<RemotingCommand> {
    let text = std::str::from_utf8(h).ok()?;
    let mut p = Parser {
        s: text,
        b: h,
        at: 0,
    };
    let mut cmd = RemotingCommand {
        code: 0,
        language: LanguageCode::Java,
        version: 0,
        opaque: 0,
        flag: 0,
        remark: None,
        ext_fields: ExtFields::new(),
        body: Bytes::new(),
        body_parts: Vec::new(),
        serialize_type: SerializeType::Json,
    };
    p.eat(b'{')?;
    if p.peek()? == b'}' {
        p.at += 1;
    } else {
        loop {
            let key = p.plain_str()?;
            p.eat(b':')?;
            match key {
                "code" => cmd.code = p.i32_field()?,
                "version" => cmd.version = p.i32_field()?,
                "opaque" => cmd.opaque = p.i32_field()?,
                "flag" => cmd.flag = p.i32_field()?,
                "language" => match p.peek()? {
                    b'"' => cmd.language = LanguageCode::from_name(p.plain_str()?),
                    b'n' => {
                        p.literal(b"null")?;
                        cmd.language = LanguageCode::Java;
                    }
                    _ => return None,
                },
                "remark" => match p.peek()? {
                    b'"' => {
                        p.at += 1;
                        let mut s = String::new();
                        p.str_into(&mut s)?;
                        cmd.remark = Some(s);
                    }
                    b'n' => {
                        p.literal(b"null")?;
                        cmd.remark = None;
                    }
                    _ => return None,
                },
                "extFields" => cmd.ext_fields = p.ext_fields()?,
                _ => p.skip_scalar()?,
            }
            match p.peek()? {
                b',' => p.at += 1,
                b'}' => {
                    p.at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    p.ws();
    (p.at == h.len()).then_some(cmd)
}
