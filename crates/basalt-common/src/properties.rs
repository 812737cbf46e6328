//! The RocketMQ property string: `name 0x01 value 0x02` repeated
//! (docs/protocol.md#message-properties).
//!
//! The broker mostly handles properties as the encoded bytes it received: it
//! looks up a few keys ([`find`]) and appends its own ([`append`]) without
//! re-encoding the whole map. [`Properties`] is the decoded form for clients
//! and tools.

use std::fmt;

use crate::CodecError;
use crate::constants::property::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};

/// Largest encoded property string a record can hold (the length is an i16).
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

/// Bytes a pulled message's MIN_OFFSET and MAX_OFFSET pairs take at most:
/// two names of 10 bytes and two i64 values of up to 20.
const PULL_STAMP_RESERVE: usize = 2 * (10 + 20);

/// Decoded message properties, in insertion order; setting an existing name
/// replaces its value (Java's `HashMap` semantics, minus the random order).
///
/// Every name and value lives in one string, `text`, and `spans` says where
/// each pair is. A consumer decodes a property string with two allocations
/// instead of two per pair. Invariant: each span is a char-boundary range of
/// `text`, and no two spans have the same name. `text` may also hold the
/// bytes of replaced or removed pairs (`waste` counts them); they are
/// dropped once they outweigh the live ones.
#[derive(Clone, Default)]
pub struct Properties {
    text: String,
    spans: Vec<Span>,
    waste: usize,
}

/// Where one pair's name and value lie in [`Properties::text`].
#[derive(Debug, Clone, Copy)]
struct Span {
    name: (usize, usize),
    value: (usize, usize),
}

impl Span {
    fn len(&self) -> usize {
        (self.name.1 - self.name.0) + (self.value.1 - self.value.0)
    }
}

impl Properties {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes a property string with Java's rules: a segment shorter than 3
    /// bytes, or with an empty name or value, is skipped; a later duplicate
    /// name wins.
    pub fn decode(bytes: &[u8]) -> Self {
        // Room for every segment and two more: a client adds MIN_OFFSET and
        // MAX_OFFSET to each pulled message, which would otherwise grow
        // the vectors.
        let segments = bytes.iter().filter(|b| **b == PROPERTY_SEPARATOR).count() + 1;
        let mut props = Properties {
            text: String::with_capacity(bytes.len() + PULL_STAMP_RESERVE),
            spans: Vec::with_capacity(segments + 2),
            waste: 0,
        };
        match std::str::from_utf8(bytes) {
            // The separators are ASCII, so every segment of a valid string
            // is itself valid and its bounds are char boundaries.
            Ok(s) => {
                props.text.push_str(s);
                for (name, value) in iter(bytes) {
                    let name = offset_in(bytes, name);
                    let value = offset_in(bytes, value);
                    props.put_span(Span { name, value });
                }
            }
            Err(_) => {
                for (name, value) in iter(bytes) {
                    let name = props.push_text(&String::from_utf8_lossy(name));
                    let value = props.push_text(&String::from_utf8_lossy(value));
                    props.put_span(Span { name, value });
                }
            }
        }
        props
    }

    /// Encodes every pair as `name\x01value\x02`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        for (k, v) in self.iter() {
            push_pair(&mut out, k, v);
        }
        out
    }

    /// Encodes and checks the result fits a record's i16 length.
    pub fn encode_checked(&self) -> Result<Vec<u8>, CodecError> {
        let out = self.encode();
        if out.len() > MAX_PROPERTIES_LEN {
            return Err(CodecError::TooLarge {
                what: "properties",
                len: out.len(),
                max: MAX_PROPERTIES_LEN,
            });
        }
        Ok(out)
    }

    fn encoded_len(&self) -> usize {
        self.spans.iter().map(|s| s.len() + 2).sum()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        let i = self.position(name)?;
        Some(self.slice(self.spans[i].value))
    }

    /// Sets `name` to `value`, replacing an earlier value.
    pub fn set(&mut self, name: impl AsRef<str>, value: impl AsRef<str>) {
        let (name, value) = (name.as_ref(), value.as_ref());
        if let Some(i) = self.position(name) {
            let old = self.spans[i].value;
            self.waste += old.1 - old.0;
            self.spans[i].value = self.push_text(value);
        } else {
            let name = self.push_text(name);
            let value = self.push_text(value);
            self.spans.push(Span { name, value });
        }
        self.compact_if_wasteful();
    }

    pub fn remove(&mut self, name: &str) -> Option<String> {
        let i = self.position(name)?;
        let span = self.spans.remove(i);
        let value = self.slice(span.value).to_owned();
        self.waste += span.len();
        self.compact_if_wasteful();
        Some(value)
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|s| (self.slice(s.name), self.slice(s.value)))
    }

    fn slice(&self, (start, end): (usize, usize)) -> &str {
        &self.text[start..end]
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.spans.iter().position(|s| self.slice(s.name) == name)
    }

    /// Adds a decoded pair; a later duplicate name replaces the earlier value.
    fn put_span(&mut self, span: Span) {
        let name = self.slice(span.name);
        match self.position(name) {
            Some(i) => {
                let old = self.spans[i].value;
                self.waste += old.1 - old.0 + (span.name.1 - span.name.0);
                self.spans[i].value = span.value;
            }
            None => self.spans.push(span),
        }
    }

    fn push_text(&mut self, s: &str) -> (usize, usize) {
        let start = self.text.len();
        self.text.push_str(s);
        (start, self.text.len())
    }

    /// Rewrites `text` with only the live pairs once dead bytes outnumber
    /// them, so repeated `set`s of one name cannot grow it without bound.
    fn compact_if_wasteful(&mut self) {
        if self.waste <= 64 || self.waste <= self.text.len() / 2 {
            return;
        }
        let mut text = String::with_capacity(self.text.len() - self.waste);
        for span in &mut self.spans {
            let name = &self.text[span.name.0..span.name.1];
            let value = &self.text[span.value.0..span.value.1];
            let n0 = text.len();
            text.push_str(name);
            let v0 = text.len();
            text.push_str(value);
            *span = Span {
                name: (n0, v0),
                value: (v0, text.len()),
            };
        }
        self.text = text;
        self.waste = 0;
    }
}

/// Where `part`, a subslice of `whole`, lies in it.
fn offset_in(whole: &[u8], part: &[u8]) -> (usize, usize) {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    debug_assert!(start + part.len() <= whole.len());
    (start, start + part.len())
}

impl PartialEq for Properties {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Properties {}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Properties {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        let mut p = Properties::new();
        for (k, v) in iter {
            p.set(k, v);
        }
        p
    }
}

/// Iterates the `(name, value)` pairs of an encoded property string, skipping
/// malformed segments exactly as [`Properties::decode`] does.
pub fn iter(bytes: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    bytes.split(|b| *b == PROPERTY_SEPARATOR).filter_map(|seg| {
        if seg.len() < 3 {
            return None;
        }
        let sep = seg.iter().position(|b| *b == NAME_VALUE_SEPARATOR)?;
        if sep == 0 || sep >= seg.len() - 1 {
            return None;
        }
        Some((&seg[..sep], &seg[sep + 1..]))
    })
}

/// The value of `name` in an encoded property string (the last one, if repeated).
pub fn find<'a>(bytes: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let name = name.as_bytes();
    let mut found = None;
    for (k, v) in iter(bytes) {
        if k == name {
            found = Some(v);
        }
    }
    found
}

/// The value of each of `names` (the last one, if repeated), found in one
/// pass over the string. A send looks up a dozen names; calling [`find`]
/// for each scanned the string a dozen times.
pub fn find_each<'a, const N: usize>(bytes: &'a [u8], names: [&str; N]) -> [Option<&'a [u8]>; N] {
    let mut found = [None; N];
    for (k, v) in iter(bytes) {
        for (slot, name) in found.iter_mut().zip(names) {
            if k == name.as_bytes() {
                *slot = Some(v);
            }
        }
    }
    found
}

/// Re-encodes a property string without the given names (and without
/// malformed segments).
pub fn without(bytes: &[u8], names: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for (k, v) in iter(bytes) {
        if names.iter().any(|n| n.as_bytes() == k) {
            continue;
        }
        out.extend_from_slice(k);
        out.push(NAME_VALUE_SEPARATOR);
        out.extend_from_slice(v);
        out.push(PROPERTY_SEPARATOR);
    }
    out
}

/// Appends `name\x01value\x02` to an encoded property string, first adding a
/// 0x02 terminator if the string does not end with one.
pub fn append(out: &mut Vec<u8>, name: &str, value: &str) {
    if !out.is_empty() && out.last() != Some(&PROPERTY_SEPARATOR) {
        out.push(PROPERTY_SEPARATOR);
    }
    push_pair(out, name, value);
}

fn push_pair(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.push(NAME_VALUE_SEPARATOR);
    out.extend_from_slice(value.as_bytes());
    out.push(PROPERTY_SEPARATOR);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        let p = Properties::decode(b"K\x01a\xffb\x02\xfe\x01v\x02");
        assert_eq!(p.get("K"), Some("a\u{FFFD}b"));
        assert_eq!(p.get("\u{FFFD}"), Some("v"));
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn decodes_java_output() {
        let p = Properties::decode(b"UNIQ_KEY\x01AB12\x02WAIT\x01true\x02TAGS\x01A\x02");
        assert_eq!(p.get("UNIQ_KEY"), Some("AB12"));
        assert_eq!(p.get("WAIT"), Some("true"));
        assert_eq!(p.get("TAGS"), Some("A"));
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn skips_malformed_segments_like_java() {
        // "ab" is too short, "\x01v" has an empty name, "k\x01" an empty value,
        // "novalue" has no separator; a missing final 0x02 is fine.
        let p = Properties::decode(b"ab\x02\x01v\x02k\x01\x02novalue\x02x\x01y");
        assert_eq!(p.len(), 1);
        assert_eq!(p.get("x"), Some("y"));
    }

    #[test]
    fn later_duplicate_wins() {
        let raw = b"K\x01one\x02K\x01two\x02";
        assert_eq!(Properties::decode(raw).get("K"), Some("two"));
        assert_eq!(find(raw, "K"), Some(&b"two"[..]));
    }

    #[test]
    fn append_adds_missing_terminator() {
        let mut raw = b"A\x01b".to_vec();
        append(&mut raw, "CLUSTER", "c1");
        assert_eq!(raw, b"A\x01b\x02CLUSTER\x01c1\x02");
        let mut empty = Vec::new();
        append(&mut empty, "K", "v");
        assert_eq!(empty, b"K\x01v\x02");
    }

    #[test]
    fn without_drops_named_pairs() {
        let raw = b"A\x01a\x02DELAY\x013\x02B\x01b\x02";
        assert_eq!(without(raw, &["DELAY"]), b"A\x01a\x02B\x01b\x02");
        assert_eq!(without(raw, &[]), raw.to_vec());
    }

    #[test]
    fn encode_checked_rejects_oversize() {
        let mut p = Properties::new();
        p.set("big", "x".repeat(MAX_PROPERTIES_LEN));
        assert!(matches!(
            p.encode_checked(),
            Err(CodecError::TooLarge { .. })
        ));
    }

    #[test]
    fn set_replaces_and_remove_keeps_order() {
        let mut p = Properties::decode(b"A\x01a\x02B\x01b\x02C\x01c\x02");
        p.set("B", "bee");
        assert_eq!(p.remove("A").as_deref(), Some("a"));
        p.set("D", "d");
        let pairs: Vec<_> = p.iter().collect();
        assert_eq!(pairs, [("B", "bee"), ("C", "c"), ("D", "d")]);
        assert_eq!(p.encode(), b"B\x01bee\x02C\x01c\x02D\x01d\x02");
        assert_eq!(p.remove("A"), None);
    }

    #[test]
    fn repeated_sets_do_not_grow_without_bound() {
        let mut p = Properties::new();
        p.set("KEEP", "k");
        for i in 0..10_000 {
            p.set("N", i.to_string());
        }
        assert_eq!(p.get("N"), Some("9999"));
        assert_eq!(p.get("KEEP"), Some("k"));
        assert!(p.text.len() < 256, "text holds {} bytes", p.text.len());
    }

    #[test]
    fn equality_ignores_layout() {
        let mut a = Properties::new();
        a.set("K", "old");
        a.set("K", "v");
        let b = Properties::decode(b"junk\x02K\x01v\x02");
        assert_eq!(a, b);
        assert_eq!(format!("{a:?}"), r#"{"K": "v"}"#);
    }

    fn name() -> impl Strategy<Value = String> {
        "[A-Za-z_#][A-Za-z0-9_#.]{0,15}"
    }

    fn value() -> impl Strategy<Value = String> {
        // Any text without the two separator characters.
        "[^\u{1}\u{2}]{1,40}"
    }

    proptest! {
        #[test]
        fn round_trips(pairs in proptest::collection::vec((name(), value()), 0..12)) {
            let props: Properties = pairs.into_iter().collect();
            let encoded = props.encode();
            prop_assert_eq!(Properties::decode(&encoded), props.clone());
            for (k, v) in props.iter() {
                prop_assert_eq!(find(&encoded, k), Some(v.as_bytes()));
            }
        }

        /// Any sequence of sets and removes leaves what a plain list of
        /// pairs with the same rules would hold.
        #[test]
        fn behaves_like_a_list_of_pairs(
            ops in proptest::collection::vec((any::<bool>(), 0..4usize, value()), 0..60),
        ) {
            let names = ["A", "BB", "C", "UNIQ_KEY"];
            let mut props = Properties::new();
            let mut model: Vec<(String, String)> = Vec::new();
            for (is_set, n, v) in ops {
                let name = names[n];
                let pos = model.iter().position(|(k, _)| k == name);
                if is_set {
                    props.set(name, &v);
                    match pos {
                        Some(i) => model[i].1 = v,
                        None => model.push((name.to_string(), v)),
                    }
                } else {
                    let removed = pos.map(|i| model.remove(i).1);
                    prop_assert_eq!(props.remove(name), removed);
                }
                let got: Vec<(String, String)> =
                    props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
                prop_assert_eq!(&got, &model);
            }
            prop_assert_eq!(Properties::decode(&props.encode()), props);
        }

        /// Decoding any bytes (invalid UTF-8, malformed segments, repeated
        /// names) gives what pair-by-pair lossy decoding gives.
        #[test]
        fn decode_agrees_with_pairwise_lossy_decoding(
            raw in proptest::collection::vec(prop_oneof![Just(1u8), Just(2u8), Just(b'K'), Just(0xffu8), any::<u8>()], 0..64),
        ) {
            let mut model: Vec<(String, String)> = Vec::new();
            for (k, v) in iter(&raw) {
                let (k, v) = (String::from_utf8_lossy(k), String::from_utf8_lossy(v));
                match model.iter().position(|(n, _)| *n == k) {
                    Some(i) => model[i].1 = v.into_owned(),
                    None => model.push((k.into_owned(), v.into_owned())),
                }
            }
            let props = Properties::decode(&raw);
            let got: Vec<(String, String)> =
                props.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            prop_assert_eq!(got, model);
        }

        /// One pass finds what one `find` per name finds, on any bytes
        /// (malformed segments and repeated names included).
        #[test]
        fn find_each_agrees_with_find(
            raw in proptest::collection::vec(prop_oneof![Just(1u8), Just(2u8), Just(b'K'), Just(b'L'), any::<u8>()], 0..64),
        ) {
            let names = ["K", "L", "KL", "missing"];
            let found = find_each(&raw, names);
            for (name, got) in names.iter().zip(found) {
                prop_assert_eq!(got, find(&raw, name));
            }
        }
    }
}
