//! Java's `String.hashCode`, which RocketMQ stores on disk (ConsumeQueue tags
//! code, IndexFile key hash), so it must be reproduced bit for bit.

/// `h = 31*h + u` over the UTF-16 code units of `s`, with i32 wrapping arithmetic,
/// exactly as `java.lang.String#hashCode`.
pub fn java_string_hash(s: &str) -> i32 {
    let mut h: i32 = 0;
    for unit in s.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    h
}

/// Same as [`java_string_hash`] for UTF-8 bytes; invalid UTF-8 is hashed after
/// lossy conversion, as Java would see it after `new String(bytes, UTF_8)`.
pub fn java_bytes_hash(bytes: &[u8]) -> i32 {
    if bytes.is_ascii() {
        // Fast path: one UTF-16 unit per byte.
        let mut h: i32 = 0;
        for &b in bytes {
            h = h.wrapping_mul(31).wrapping_add(b as i32);
        }
        return h;
    }
    java_string_hash(&String::from_utf8_lossy(bytes))
}

/// The ConsumeQueue tags code for a message's `TAGS` property: the Java hash
/// sign-extended to i64, or 0 when the message has no tag.
pub fn tags_code(tags: Option<&[u8]>) -> i64 {
    match tags {
        Some(t) if !t.is_empty() => java_bytes_hash(t) as i64,
        _ => 0,
    }
}

/// The IndexFile key hash: `abs(hashCode)`, with `Integer.MIN_VALUE` mapped to 0.
pub fn index_key_hash(key: &str) -> i32 {
    let h = java_string_hash(key);
    if h == i32::MIN { 0 } else { h.abs() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_java_values() {
        // Values computed with java.lang.String#hashCode.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("TagA"), 2598919);
        assert_eq!(java_string_hash("hello"), 99162322);
        assert_eq!(java_string_hash("TopicTest"), -1_902_610_879);
        // A supplementary character is two UTF-16 units (a surrogate pair).
        assert_eq!(java_string_hash("😀"), 1_772_899);
        assert_eq!(java_string_hash("é"), 0xE9);
    }

    #[test]
    fn bytes_hash_agrees_with_str_hash() {
        for s in ["", "TagA", "héllo", "日本語", "a😀b"] {
            assert_eq!(java_bytes_hash(s.as_bytes()), java_string_hash(s));
        }
    }

    #[test]
    fn index_hash_is_non_negative() {
        assert!(index_key_hash("TopicTest#key") >= 0);
        // "polygenelubricants" is the classic string whose hashCode is Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(index_key_hash("polygenelubricants"), 0);
    }

    #[test]
    fn tags_code_of_absent_tag_is_zero() {
        assert_eq!(tags_code(None), 0);
        assert_eq!(tags_code(Some(b"")), 0);
        assert_eq!(tags_code(Some(b"TagA")), 2598919);
    }
}
