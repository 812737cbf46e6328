//! A tiny JSON writer for the hot path and for fastjson-shaped bodies that
//! serde cannot produce (bare numeric map keys). Output is compact.

use bytes::BufMut;

/// Appends `s` as a JSON string literal (quotes included).
///
/// Escapes `"`, `\` and control characters (`\u0001` as fastjson does);
/// non-ASCII text is written as raw UTF-8, which is valid JSON.
pub fn write_str<B: BufMut>(out: &mut B, s: &str) {
    out.put_u8(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        if start < i {
            out.put_slice(&bytes[start..i]);
        }
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.put_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
            ]);
        } else {
            out.put_slice(esc);
        }
        start = i + 1;
    }
    if start < bytes.len() {
        out.put_slice(&bytes[start..]);
    }
    out.put_u8(b'"');
}

/// Appends a decimal integer.
pub fn write_i64<B: BufMut>(out: &mut B, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let neg = v < 0;
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if neg {
        out.put_u8(b'-');
    }
    out.put_slice(&buf[i..]);
}

/// Appends `true` or `false`.
pub fn write_bool<B: BufMut>(out: &mut B, v: bool) {
    out.put_slice(if v { b"true" } else { b"false" });
}

/// Appends `"key":` (the key must not need escaping only if `raw`; here it is
/// always escaped properly).
pub fn write_key<B: BufMut>(out: &mut B, key: &str) {
    write_str(out, key);
    out.put_u8(b':');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_like_json() {
        let mut v = Vec::new();
        write_str(&mut v, "a\u{1}b\u{2}\"\\\n é");
        assert_eq!(
            String::from_utf8(v.clone()).unwrap(),
            "\"a\\u0001b\\u0002\\\"\\\\\\n é\""
        );
        let back: String = serde_json::from_slice(&v).unwrap();
        assert_eq!(back, "a\u{1}b\u{2}\"\\\n é");
    }

    #[test]
    fn integers() {
        for n in [0i64, 7, -1, 42, i64::MIN, i64::MAX, 1_700_000_000_000] {
            let mut v = Vec::new();
            write_i64(&mut v, n);
            assert_eq!(String::from_utf8(v).unwrap(), n.to_string());
        }
    }
}
