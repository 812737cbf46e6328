//! The RocketMQ property string: `name 0x01 value 0x02` repeated
//! (docs/protocol.md#message-properties).
//!
//! The broker mostly handles properties as the encoded bytes it received: it
//! looks up a few keys ([`find`]) and appends its own ([`append`]) without
//! re-encoding the whole map. [`Properties`] is the decoded form for clients
//! and tools.

use crate::CodecError;
use crate::constants::property::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};

/// Largest encoded property string a record can hold (the length is an i16).
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

/// Decoded message properties, in insertion order; setting an existing name
/// replaces its value (Java's `HashMap` semantics, minus the random order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    entries: Vec<(String, String)>,
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
        // the vector.
        let segments = bytes.iter().filter(|b| **b == PROPERTY_SEPARATOR).count() + 1;
        let mut props = Properties {
            entries: Vec::with_capacity(segments + 2),
        };
        for (name, value) in iter(bytes) {
            props.set(owned_str(name), owned_str(value));
        }
        props
    }

    /// Encodes every pair as `name\x01value\x02`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        for (k, v) in &self.entries {
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
        self.entries
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum()
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Sets `name` to `value`, replacing an earlier value.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let name = name.into();
        let value = value.into();
        if let Some(slot) = self.entries.iter_mut().find(|(k, _)| *k == name) {
            slot.1 = value;
        } else {
            self.entries.push((name, value));
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<String> {
        let pos = self.entries.iter().position(|(k, _)| k == name)?;
        Some(self.entries.remove(pos).1)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Properties {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        let mut p = Properties::new();
        for (k, v) in iter {
            p.set(k, v);
        }
        p
    }
}

/// `bytes` as a `String`, invalid UTF-8 replaced as `from_utf8_lossy`
/// does. Valid input (nearly all) takes the plain check, which is several
/// times cheaper than the lossy scan on a consumer's decode path.
fn owned_str(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
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
