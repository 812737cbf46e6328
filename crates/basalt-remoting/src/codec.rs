//! The remoting frame (docs/protocol.md#frame) and both header serializations
//! (docs/protocol.md#json-header, docs/protocol.md#binary-header).
//!
//! ```text
//! [length i32 = 4 + headerLen + bodyLen][serializeType u8 | headerLen u24][header][body]
//! ```
//!
//! Encoding writes the length word, the type word and the header into a small
//! buffer and leaves the body as its own [`Bytes`], so a writer can send both
//! with one vectored write and never copy a large body.

use std::fmt;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use crate::error::DecodeError;
use crate::json;

/// Default largest frame accepted (`com.rocketmq.remoting.frameMaxLength`): 16 MiB.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 16 * 1024 * 1024;

/// Largest header the 24-bit length field can describe.
pub const MAX_HEADER_LEN: usize = 0x00FF_FFFF;

/// Fixed part of the binary header: code, language, version, opaque, flag,
/// remark length, ext length.
const BINARY_FIXED_LEN: usize = 2 + 1 + 2 + 4 + 4 + 4 + 4;

/// Appends the frame prefix and header of `cmd` to `dst`: everything of the
/// frame except the body, which the caller sends right after.
///
/// The header is serialized as `cmd.serialize_type` says.
pub fn encode_header_into(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), DecodeError> {
    let start = dst.len();
    dst.put_slice(&[0u8; 8]);
    match cmd.serialize_type {
        SerializeType::Json => write_json_header(cmd, dst),
        SerializeType::Rocketmq => {
            if let Err(e) = write_binary_header(cmd, dst) {
                dst.truncate(start);
                return Err(e);
            }
        }
    }
    let header_len = dst.len() - start - 8;
    let total = 4 + header_len as u64 + cmd.body_len() as u64;
    if header_len > MAX_HEADER_LEN || total > i32::MAX as u64 {
        dst.truncate(start);
        return Err(DecodeError::Encode(format!(
            "frame too large: header {header_len} bytes, body {} bytes",
            cmd.body_len()
        )));
    }
    let word = ((cmd.serialize_type.code() as u32) << 24) | header_len as u32;
    dst[start..start + 4].copy_from_slice(&(total as i32).to_be_bytes());
    dst[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
    Ok(())
}

/// Encodes a whole frame (prefix, header, body) into one buffer. Handy for
/// tests and small commands; the transport uses [`encode_header_into`].
pub fn encode_frame(cmd: &RemotingCommand) -> Result<BytesMut, DecodeError> {
    let mut buf = BytesMut::with_capacity(256 + cmd.body_len());
    encode_header_into(cmd, &mut buf)?;
    buf.put_slice(&cmd.body);
    for part in &cmd.body_parts {
        buf.put_slice(part);
    }
    Ok(buf)
}

fn write_json_header(cmd: &RemotingCommand, out: &mut BytesMut) {
    out.reserve(
        160 + cmd
            .ext_fields
            .iter()
            .map(|(k, v)| k.len() + v.len() + 6)
            .sum::<usize>(),
    );
    out.put_slice(b"{\"code\":");
    json::write_i64(out, cmd.code as i64);
    out.put_slice(b",\"extFields\":{");
    for (i, (k, v)) in cmd.ext_fields.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        json::write_str(out, k);
        out.put_u8(b':');
        json::write_str(out, v);
    }
    out.put_slice(b"},\"flag\":");
    json::write_i64(out, cmd.flag as i64);
    out.put_slice(b",\"language\":\"");
    out.put_slice(cmd.language.name().as_bytes());
    out.put_slice(b"\",\"opaque\":");
    json::write_i64(out, cmd.opaque as i64);
    if let Some(remark) = &cmd.remark {
        out.put_slice(b",\"remark\":");
        json::write_str(out, remark);
    }
    out.put_slice(b",\"serializeTypeCurrentRPC\":\"");
    out.put_slice(match cmd.serialize_type {
        SerializeType::Json => b"JSON",
        SerializeType::Rocketmq => b"ROCKETMQ",
    });
    out.put_slice(b"\",\"version\":");
    json::write_i64(out, cmd.version as i64);
    out.put_u8(b'}');
}

fn write_binary_header(cmd: &RemotingCommand, out: &mut BytesMut) -> Result<(), DecodeError> {
    let code = i16::try_from(cmd.code).map_err(|_| {
        DecodeError::Encode(format!("code {} does not fit the binary header", cmd.code))
    })?;
    let version = i16::try_from(cmd.version).map_err(|_| {
        DecodeError::Encode(format!(
            "version {} does not fit the binary header",
            cmd.version
        ))
    })?;
    let ext_len: usize = cmd
        .ext_fields
        .iter()
        .map(|(k, v)| 2 + k.len() + 4 + v.len())
        .sum();
    let remark = cmd.remark.as_deref().unwrap_or("");
    out.reserve(BINARY_FIXED_LEN + remark.len() + ext_len);
    out.put_i16(code);
    out.put_u8(cmd.language.code());
    out.put_i16(version);
    out.put_i32(cmd.opaque);
    out.put_i32(cmd.flag);
    out.put_i32(remark.len() as i32);
    out.put_slice(remark.as_bytes());
    if ext_len > i32::MAX as usize {
        return Err(DecodeError::Encode("ext fields too large".into()));
    }
    out.put_i32(ext_len as i32);
    for (k, v) in cmd.ext_fields.iter() {
        let klen = i16::try_from(k.len())
            .map_err(|_| DecodeError::Encode(format!("ext key of {} bytes", k.len())))?;
        out.put_i16(klen);
        out.put_slice(k.as_bytes());
        out.put_i32(v.len() as i32);
        out.put_slice(v.as_bytes());
    }
    Ok(())
}

/// Splits frames off a byte stream, enforcing a maximum frame size.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max_frame_size: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

impl FrameDecoder {
    pub fn new(max_frame_size: usize) -> Self {
        Self { max_frame_size }
    }

    pub fn max_frame_size(&self) -> usize {
        self.max_frame_size
    }

    /// Takes one complete frame off the front of `src` and decodes it.
    /// `Ok(None)` means more bytes are needed; making room for them is the
    /// caller's choice (the transport grows its buffer with what arrives
    /// rather than trusting the announced length). An error means the stream
    /// is unusable.
    pub fn decode(&self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, DecodeError> {
        if src.len() < 4 {
            return Ok(None);
        }
        let len = i32::from_be_bytes([src[0], src[1], src[2], src[3]]);
        if len < 4 || len as usize > self.max_frame_size {
            return Err(DecodeError::FrameTooLarge {
                len: len as i64,
                max: self.max_frame_size,
            });
        }
        let need = 4 + len as usize;
        if src.len() < need {
            return Ok(None);
        }
        let mut frame = src.split_to(need).freeze();
        frame.advance(4);
        decode_frame(frame).map(Some)
    }
}

/// Decodes one frame without its length prefix: `[type word][header][body]`.
/// The body is a slice of `frame` (no copy).
pub fn decode_frame(frame: Bytes) -> Result<RemotingCommand, DecodeError> {
    if frame.len() < 4 {
        return Err(DecodeError::Truncated("no header-length word"));
    }
    let word = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    let ty = SerializeType::from_code((word >> 24) as u8)
        .ok_or(DecodeError::UnknownSerializeType((word >> 24) as u8))?;
    let header_len = (word & 0x00FF_FFFF) as usize;
    if 4 + header_len > frame.len() {
        return Err(DecodeError::HeaderLength {
            header_len,
            frame_len: frame.len(),
        });
    }
    let header = &frame[4..4 + header_len];
    let mut cmd = match ty {
        SerializeType::Json => decode_json_header(header)?,
        SerializeType::Rocketmq => decode_binary_header(header)?,
    };
    cmd.body = frame.slice(4 + header_len..);
    Ok(cmd)
}

/// Decodes a ROCKETMQ binary header (docs/protocol.md#binary-header).
pub fn decode_binary_header(mut h: &[u8]) -> Result<RemotingCommand, DecodeError> {
    if h.len() < BINARY_FIXED_LEN - 4 {
        return Err(DecodeError::Binary("fixed part truncated"));
    }
    let code = h.get_i16() as i32;
    let language = LanguageCode::from_code(h.get_u8());
    let version = h.get_i16() as i32;
    let opaque = h.get_i32();
    let flag = h.get_i32();
    let remark_len = h.get_i32();
    if remark_len < 0 || remark_len as usize > h.len() {
        return Err(DecodeError::Binary("remark length out of range"));
    }
    let remark = if remark_len == 0 {
        None
    } else {
        let s = std::str::from_utf8(&h[..remark_len as usize])
            .map_err(|_| DecodeError::Utf8("remark"))?
            .to_string();
        h.advance(remark_len as usize);
        Some(s)
    };
    if h.len() < 4 {
        return Err(DecodeError::Binary("ext length truncated"));
    }
    let ext_len = h.get_i32();
    if ext_len < 0 || ext_len as usize > h.len() {
        return Err(DecodeError::Binary("ext length out of range"));
    }
    let mut area = &h[..ext_len as usize];
    let mut ext = ExtFields::with_capacity(16);
    while !area.is_empty() {
        if area.len() < 2 {
            return Err(DecodeError::Binary("ext key length truncated"));
        }
        let klen = area.get_i16();
        if klen < 0 || klen as usize > area.len() {
            return Err(DecodeError::Binary("ext key length out of range"));
        }
        let key = std::str::from_utf8(&area[..klen as usize])
            .map_err(|_| DecodeError::Utf8("ext key"))?;
        area.advance(klen as usize);
        if area.len() < 4 {
            return Err(DecodeError::Binary("ext value length truncated"));
        }
        let vlen = area.get_i32();
        if vlen < 0 || vlen as usize > area.len() {
            return Err(DecodeError::Binary("ext value length out of range"));
        }
        let val = std::str::from_utf8(&area[..vlen as usize])
            .map_err(|_| DecodeError::Utf8("ext value"))?;
        if !key.is_empty() {
            ext.push_unchecked(key, val);
        }
        area.advance(vlen as usize);
    }
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields: ext,
        body: Bytes::new(),
        body_parts: Vec::new(),
        serialize_type: SerializeType::Rocketmq,
    })
}

/// Decodes a JSON header leniently (docs/protocol.md#json-header): null equals absent, scalar ext
/// values become strings, unknown keys are ignored, an unknown language is
/// `OTHER`, numeric fields may arrive as numeric strings. Missing numeric
/// fields default to 0, as fastjson leaves them.
pub fn decode_json_header(h: &[u8]) -> Result<RemotingCommand, DecodeError> {
    match header_parser::parse(h) {
        Some(cmd) => Ok(cmd),
        None => decode_json_header_serde(h),
    }
}

/// Asserts that the fast JSON header parser agrees with the serde decoder
/// whenever it accepts `h` (fuzzing aid).
#[doc(hidden)]
pub fn check_header_parser_agrees(h: &[u8]) {
    if let Some(fast) = header_parser::parse(h) {
        assert_eq!(Ok(fast), decode_json_header_serde(h));
    }
}

/// The reference JSON header decoder (serde), used for every header the fast
/// parser declines.
fn decode_json_header_serde(h: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let mut de = serde_json::Deserializer::from_slice(h);
    let cmd = de
        .deserialize_map(HeaderVisitor)
        .and_then(|c| de.end().map(|_| c))
        .map_err(|e| DecodeError::Json(e.to_string()))?;
    Ok(cmd)
}

struct HeaderVisitor;

enum HeaderKey {
    Code,
    Language,
    Version,
    Opaque,
    Flag,
    Remark,
    ExtFields,
    Other,
}

impl<'de> de::Deserialize<'de> for HeaderKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HeaderKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a header key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<HeaderKey, E> {
                Ok(match v {
                    "code" => HeaderKey::Code,
                    "language" => HeaderKey::Language,
                    "version" => HeaderKey::Version,
                    "opaque" => HeaderKey::Opaque,
                    "flag" => HeaderKey::Flag,
                    "remark" => HeaderKey::Remark,
                    "extFields" => HeaderKey::ExtFields,
                    _ => HeaderKey::Other,
                })
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Visitor<'de> for HeaderVisitor {
    type Value = RemotingCommand;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a remoting command header object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RemotingCommand, A::Error> {
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
        while let Some(key) = map.next_key::<HeaderKey>()? {
            match key {
                HeaderKey::Code => cmd.code = map.next_value::<LenientI32>()?.0.unwrap_or(0),
                HeaderKey::Version => cmd.version = map.next_value::<LenientI32>()?.0.unwrap_or(0),
                HeaderKey::Opaque => cmd.opaque = map.next_value::<LenientI32>()?.0.unwrap_or(0),
                HeaderKey::Flag => cmd.flag = map.next_value::<LenientI32>()?.0.unwrap_or(0),
                HeaderKey::Language => {
                    cmd.language = map.next_value::<LenientLanguage>()?.0;
                }
                HeaderKey::Remark => cmd.remark = map.next_value::<LenientString>()?.0,
                HeaderKey::ExtFields => {
                    cmd.ext_fields = map
                        .next_value::<Option<LenientExt>>()?
                        .map(|e| e.0)
                        .unwrap_or_default();
                }
                HeaderKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(cmd)
    }
}

/// An i32 that may arrive as a number, a numeric string or null.
struct LenientI32(Option<i32>);

impl<'de> de::Deserialize<'de> for LenientI32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LenientI32;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a 32-bit integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LenientI32, E> {
                i32::try_from(v)
                    .map(|v| LenientI32(Some(v)))
                    .map_err(|_| E::custom(format!("{v} is out of the i32 range")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LenientI32, E> {
                i32::try_from(v)
                    .map(|v| LenientI32(Some(v)))
                    .map_err(|_| E::custom(format!("{v} is out of the i32 range")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientI32, E> {
                v.trim()
                    .parse::<i32>()
                    .map(|v| LenientI32(Some(v)))
                    .map_err(|_| E::custom(format!("{v:?} is not an i32")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<LenientI32, E> {
                Ok(LenientI32(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// The language name; unknown names (and numbers) map as the binary header does.
struct LenientLanguage(LanguageCode);

impl<'de> de::Deserialize<'de> for LenientLanguage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LenientLanguage;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a language name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientLanguage, E> {
                Ok(LenientLanguage(LanguageCode::from_name(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LenientLanguage, E> {
                Ok(LenientLanguage(LanguageCode::from_code(
                    u8::try_from(v).unwrap_or(u8::MAX),
                )))
            }
            fn visit_i64<E: de::Error>(self, _v: i64) -> Result<LenientLanguage, E> {
                Ok(LenientLanguage(LanguageCode::Other))
            }
            fn visit_unit<E: de::Error>(self) -> Result<LenientLanguage, E> {
                Ok(LenientLanguage(LanguageCode::Java))
            }
        }
        d.deserialize_any(V)
    }
}

/// A string that may be null (→ None) or a scalar (→ its text).
struct LenientString(Option<String>);

struct ScalarAsString;

impl<'de> Visitor<'de> for ScalarAsString {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number, boolean or null")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Option<String>, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Option<String>, E> {
        Ok(Some(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Option<String>, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Option<String>, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Option<String>, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Option<String>, E> {
        Ok(Some(if v { "true" } else { "false" }.to_string()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
}

impl<'de> de::Deserialize<'de> for LenientString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarAsString).map(LenientString)
    }
}

/// The extFields object: string keys, scalar values; null values are dropped.
/// Keys and values are appended straight into the [`ExtFields`] text buffer.
struct LenientExt(ExtFields);

impl<'de> de::Deserialize<'de> for LenientExt {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LenientExt;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an extFields object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LenientExt, A::Error> {
                let mut ext = ExtFields::with_capacity(16);
                loop {
                    let start = ext.text_mut().len();
                    if map.next_key_seed(AppendKey(ext.text_mut()))?.is_none() {
                        break;
                    }
                    let key_end = ext.text_mut().len();
                    // Appended without a duplicate scan: a hostile header with
                    // many keys must not cost quadratic time.
                    if map.next_value_seed(AppendScalar(ext.text_mut()))? {
                        ext.push_written(start, key_end);
                    } else {
                        ext.text_mut().truncate(start);
                    }
                }
                Ok(LenientExt(ext))
            }
        }
        d.deserialize_map(V)
    }
}

/// Appends a string key to a buffer.
struct AppendKey<'a>(&'a mut String);

impl<'de> de::DeserializeSeed<'de> for AppendKey<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl Visitor<'_> for AppendKey<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.0.push_str(v);
        Ok(())
    }
}

/// Appends a scalar value as text to a buffer; `false` for null.
struct AppendScalar<'a>(&'a mut String);

impl<'de> de::DeserializeSeed<'de> for AppendScalar<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl Visitor<'_> for AppendScalar<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number, boolean or null")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        self.0.push_str(v);
        Ok(true)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
        use std::fmt::Write;
        let _ = write!(self.0, "{v}");
        Ok(true)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
        use std::fmt::Write;
        let _ = write!(self.0, "{v}");
        Ok(true)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<bool, E> {
        use std::fmt::Write;
        let _ = write!(self.0, "{v}");
        Ok(true)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        self.0.push_str(if v { "true" } else { "false" });
        Ok(true)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

mod header_parser;

#[cfg(test)]
mod tests;
