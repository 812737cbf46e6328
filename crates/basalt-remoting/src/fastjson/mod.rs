//! fastjson 1.x compatibility (docs/protocol.md#fastjson-quirks).
//!
//! Reading is one layer for every body: [`from_slice`] and [`from_str`]
//! normalise the keys, parse the JSON, and hand the value to the lenient
//! deserializer of [`lenient`], which coerces scalars and enums the way
//! fastjson does wherever the target type asks for them. Body types then only
//! declare Java's defaults (`#[serde(default)]`).
//!
//! [`normalize`] rewrites fastjson's non-standard object keys into
//! standard JSON before serde sees them — bare keys (`{0:"a"}` → `{"0":"a"}`)
//! and object keys (`{{"topic":"t"}:1}` → `{"{\"topic\":\"t\"}":1}`, which
//! [`mq_map`] turns back into structs). Text inside strings is never touched.
//!
//! Writing: fastjson emits bare numeric keys for `Map<Integer|Long, _>`; the
//! writers here do the same where Java does (see `protocol::route`).

use std::borrow::Cow;

use serde::de::DeserializeOwned;

use crate::json;

pub mod lenient;

/// Input that is not JSON even by fastjson's looser rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FastJsonError {
    #[error("unterminated string starting at byte {0}")]
    UnterminatedString(usize),
    #[error("unbalanced brackets at byte {0}")]
    Unbalanced(usize),
    #[error("unexpected byte {byte:#04x} where an object key belongs, at byte {at}")]
    BadKey { byte: u8, at: usize },
    #[error("body is not UTF-8")]
    Utf8,
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
    #[error("{0}")]
    Json(String),
}

/// Deepest nesting accepted (serde_json's own default is 128).
const MAX_DEPTH: usize = 128;

/// Returns `input` as standard JSON: unchanged (borrowed) when it already is
/// quoted-key JSON, rewritten otherwise.
pub fn normalize(input: &str) -> Result<Cow<'_, str>, FastJsonError> {
    let b = input.as_bytes();
    // `out` stays empty until the first rewrite; `copied` marks how much of
    // the input has been copied into it so far.
    let mut out: Vec<u8> = Vec::new();
    let mut copied = 0usize;
    let mut rewrote = false;
    let mut stack: Vec<bool> = Vec::new(); // true = object
    let mut expect_key = false;
    let mut i = 0usize;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if expect_key {
            match c {
                b'"' => {
                    i = end_of_string(b, i)?;
                    expect_key = false;
                    continue;
                }
                b'}' => {}
                b'{' => {
                    let end = end_of_balanced(b, i)?;
                    out.extend_from_slice(&b[copied..i]);
                    json::write_str(&mut out, &input[i..end]);
                    copied = end;
                    rewrote = true;
                    i = end;
                    expect_key = false;
                    continue;
                }
                c if is_bare_key_byte(c) => {
                    let mut end = i;
                    while end < b.len() && is_bare_key_byte(b[end]) {
                        end += 1;
                    }
                    out.extend_from_slice(&b[copied..i]);
                    out.push(b'"');
                    out.extend_from_slice(&b[i..end]);
                    out.push(b'"');
                    copied = end;
                    rewrote = true;
                    i = end;
                    expect_key = false;
                    continue;
                }
                _ => return Err(FastJsonError::BadKey { byte: c, at: i }),
            }
        }
        match c {
            b'"' => {
                i = end_of_string(b, i)?;
                continue;
            }
            b'{' | b'[' => {
                if stack.len() >= MAX_DEPTH {
                    return Err(FastJsonError::TooDeep(MAX_DEPTH));
                }
                stack.push(c == b'{');
                expect_key = c == b'{';
            }
            b'}' | b']' => {
                match stack.pop() {
                    Some(obj) if obj == (c == b'}') => {}
                    _ => return Err(FastJsonError::Unbalanced(i)),
                }
                expect_key = false;
            }
            b',' => expect_key = stack.last() == Some(&true),
            _ => {}
        }
        i += 1;
    }
    if !stack.is_empty() {
        return Err(FastJsonError::Unbalanced(b.len()));
    }
    if !rewrote {
        return Ok(Cow::Borrowed(input));
    }
    out.extend_from_slice(&b[copied..]);
    // Only ASCII was inserted and whole UTF-8 runs were copied, so this holds.
    String::from_utf8(out)
        .map(Cow::Owned)
        .map_err(|_| FastJsonError::Utf8)
}

fn is_bare_key_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'$' | b'.' | b'+')
}

/// Index just past the string literal that starts at `start` (a `"`).
fn end_of_string(b: &[u8], start: usize) -> Result<usize, FastJsonError> {
    let mut j = start + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Ok(j + 1),
            _ => j += 1,
        }
    }
    Err(FastJsonError::UnterminatedString(start))
}

/// Index just past the object or array that starts at `start`.
fn end_of_balanced(b: &[u8], start: usize) -> Result<usize, FastJsonError> {
    let mut depth = 0usize;
    let mut j = start;
    while j < b.len() {
        match b[j] {
            b'"' => {
                j = end_of_string(b, j)?;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(FastJsonError::TooDeep(MAX_DEPTH));
                }
            }
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(j + 1);
                }
            }
            _ => {}
        }
        j += 1;
    }
    Err(FastJsonError::Unbalanced(start))
}

/// Parses a fastjson body into `T`, leniently (see [`lenient`]). Trailing
/// whitespace (a C++ client ends its bodies with a newline) is allowed.
pub fn from_slice<T: DeserializeOwned>(body: &[u8]) -> Result<T, FastJsonError> {
    let text = std::str::from_utf8(body).map_err(|_| FastJsonError::Utf8)?;
    from_str(text)
}

/// Parses fastjson text into `T`, leniently (see [`lenient`]).
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, FastJsonError> {
    let std = normalize(text)?;
    let mut de = serde_json::Deserializer::from_str(&std);
    let value = T::deserialize(lenient::Lenient(&mut de))
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| FastJsonError::Json(e.to_string()))?;
    Ok(value)
}

/// Writes a `Map<Integer|Long, Long>` the way fastjson does: `{0:120,1:118}`
/// (bare keys, as in consumerOffset.json and delayOffset.json).
pub fn write_bare_key_i64_map(out: &mut Vec<u8>, map: impl IntoIterator<Item = (i64, i64)>) {
    out.push(b'{');
    for (i, (k, v)) in map.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::write_i64(out, k);
        out.push(b':');
        json::write_i64(out, v);
    }
    out.push(b'}');
}

/// Serde helpers for maps whose keys fastjson writes as objects
/// (`Map<MessageQueue, V>`): after [`normalize`] the keys are JSON text.
pub mod mq_map {
    use std::fmt;
    use std::marker::PhantomData;

    use serde::de::{DeserializeOwned, Error as _, MapAccess, Visitor};
    use serde::{Deserialize, Deserializer};

    /// Deserializes `{ "<json key>": value, ... }` into `(K, V)` pairs in
    /// input order; null is an empty table. Keys are parsed with
    /// [`super::from_str`], so they are as lenient as the body.
    pub fn deserialize<'de, D, K, V>(d: D) -> Result<Vec<(K, V)>, D::Error>
    where
        D: Deserializer<'de>,
        K: DeserializeOwned,
        V: Deserialize<'de>,
    {
        struct Entries<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = Vec<(String, V)>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object keyed by JSON text")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
                while let Some(entry) = map.next_entry::<String, V>()? {
                    out.push(entry);
                }
                Ok(out)
            }

            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(Vec::new())
            }
        }

        d.deserialize_map(Entries(PhantomData))?
            .into_iter()
            .map(|(k, v)| {
                let key = super::from_str::<K>(&k).map_err(D::Error::custom)?;
                Ok((key, v))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn bare_numeric_keys_become_quoted() {
        let n = normalize(r#"{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}}"#).unwrap();
        assert_eq!(
            n,
            r#"{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}}"#
        );
        let m: BTreeMap<String, BTreeMap<i64, String>> =
            from_str("{\"brokerAddrs\" : { 0 : \"a\" ,\n -1:\"b\"}}").unwrap();
        assert_eq!(m["brokerAddrs"][&-1], "b");
    }

    #[test]
    fn digits_inside_strings_are_untouched() {
        let s = r#"{"k":"{0:1}, 2:3","a":["x",{"b":"c\"d{9:9}"}]}"#;
        assert!(matches!(normalize(s).unwrap(), Cow::Borrowed(_)));
        let s2 = r#"{5:"{0:1},\"6:7"}"#;
        assert_eq!(normalize(s2).unwrap(), r#"{"5":"{0:1},\"6:7"}"#);
    }

    #[test]
    fn object_keys_become_strings() {
        let s =
            r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":5}}}"#;
        let n = normalize(s).unwrap();
        let v: serde_json::Value = serde_json::from_str(&n).unwrap();
        let key = v["offsetTable"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        assert_eq!(key, r#"{"brokerName":"b","queueId":0,"topic":"t"}"#);
    }

    #[test]
    fn non_ascii_survives() {
        let s = "{0:\"é漢\",\"k\":\"🎉\"}";
        assert_eq!(normalize(s).unwrap(), "{\"0\":\"é漢\",\"k\":\"🎉\"}");
    }

    #[test]
    fn malformed_input_is_an_error() {
        for s in ["{", "{\"a\":\"b}", "{0:1]", "{:1}", "[1,2", "}"] {
            assert!(normalize(s).is_err(), "{s}");
        }
        let deep = "[".repeat(500) + &"]".repeat(500);
        assert!(normalize(&deep).is_err());
    }

    #[test]
    fn bare_key_writer() {
        let mut out = Vec::new();
        write_bare_key_i64_map(&mut out, [(0, 120), (1, -1)]);
        assert_eq!(out, b"{0:120,1:-1}");
        let back: BTreeMap<i64, i64> = from_slice(&out).unwrap();
        assert_eq!(back[&0], 120);
    }
}
