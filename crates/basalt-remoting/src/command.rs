//! [`RemotingCommand`]: one remoting request or response (docs/protocol.md#commands),
//! with its ext fields and the typed getters header parsing builds on.

use std::fmt;

use bytes::Bytes;

use crate::error::HeaderError;

/// Bit 0 of `flag`: the command is a response.
pub const FLAG_RESPONSE: i32 = 0x1;
/// Bit 1 of `flag`: the request expects no reply.
pub const FLAG_ONEWAY: i32 = 0x2;

/// The client language a command claims to come from (`LanguageCode`,
/// docs/protocol.md#json-header).
///
/// The JSON header carries the name, the binary header the number. Names and
/// numbers Basalt does not know decode as [`LanguageCode::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LanguageCode {
    #[default]
    Java,
    Cpp,
    Dotnet,
    Python,
    Delphi,
    Erlang,
    Ruby,
    Other,
    Http,
    Go,
    Php,
    Oms,
    Rust,
    NodeJs,
}

impl LanguageCode {
    const ALL: [LanguageCode; 14] = [
        Self::Java,
        Self::Cpp,
        Self::Dotnet,
        Self::Python,
        Self::Delphi,
        Self::Erlang,
        Self::Ruby,
        Self::Other,
        Self::Http,
        Self::Go,
        Self::Php,
        Self::Oms,
        Self::Rust,
        Self::NodeJs,
    ];

    /// The Java enum name, as written in JSON headers.
    pub fn name(self) -> &'static str {
        match self {
            Self::Java => "JAVA",
            Self::Cpp => "CPP",
            Self::Dotnet => "DOTNET",
            Self::Python => "PYTHON",
            Self::Delphi => "DELPHI",
            Self::Erlang => "ERLANG",
            Self::Ruby => "RUBY",
            Self::Other => "OTHER",
            Self::Http => "HTTP",
            Self::Go => "GO",
            Self::Php => "PHP",
            Self::Oms => "OMS",
            Self::Rust => "RUST",
            Self::NodeJs => "NODE_JS",
        }
    }

    /// The byte used by the binary header.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Decodes a binary-header byte; unknown numbers become `Other`.
    pub fn from_code(code: u8) -> Self {
        Self::ALL.get(code as usize).copied().unwrap_or(Self::Other)
    }

    /// Decodes a JSON-header name; unknown names become `Other`.
    pub fn from_name(name: &str) -> Self {
        Self::ALL
            .iter()
            .copied()
            .find(|l| l.name() == name)
            .unwrap_or(Self::Other)
    }
}

/// How a command's header is serialized on the wire (`SerializeType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// fastjson-compatible JSON text (type byte 0).
    #[default]
    Json,
    /// RocketMQ's binary layout (type byte 1, docs/protocol.md#binary-header).
    Rocketmq,
}

impl SerializeType {
    pub fn code(self) -> u8 {
        match self {
            Self::Json => 0,
            Self::Rocketmq => 1,
        }
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Json),
            1 => Some(Self::Rocketmq),
            _ => None,
        }
    }
}

/// The flattened custom header of a command: string keys to string values,
/// kept in insertion order (keys unique; `insert` replaces).
///
/// All keys and values live in one text buffer with a small span table, so a
/// decoded or cloned header costs two allocations however many fields it has
/// (a send request has fourteen). Lookups scan linearly, which beats hashing
/// at these sizes.
#[derive(Clone, Default)]
pub struct ExtFields {
    text: String,
    spans: Vec<Span>,
}

/// One entry: key = `text[start..key_end]`, value = `text[key_end..end]`.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    key_end: usize,
    end: usize,
}

impl ExtFields {
    pub fn new() -> Self {
        Self::default()
    }

    /// Room for `n` entries of typical size.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            text: String::with_capacity(n * 16),
            spans: Vec::with_capacity(n),
        }
    }

    fn key_of(&self, s: &Span) -> &str {
        &self.text[s.start..s.key_end]
    }

    fn value_of(&self, s: &Span) -> &str {
        &self.text[s.key_end..s.end]
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.spans.iter().position(|s| self.key_of(s) == key)
    }

    /// Sets `key` to `value`, replacing an earlier value of the same key.
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        match self.position(key) {
            Some(i) => {
                // The old text stays behind as garbage; headers are short-lived.
                let start = self.text.len();
                self.text.push_str(key);
                let key_end = self.text.len();
                self.text.push_str(value);
                self.spans[i] = Span {
                    start,
                    key_end,
                    end: self.text.len(),
                };
            }
            None => self.push_unchecked(key, value),
        }
    }

    /// Appends an entry without looking for an earlier one with the same
    /// key, for builders whose keys are distinct by construction (a send
    /// header's fourteen keys): no scan per insert. With a duplicate key,
    /// `get` sees the first value.
    pub fn push(&mut self, key: &str, value: &str) {
        self.push_unchecked(key, value);
    }

    /// Appends without checking for an earlier value of the same key. The
    /// decoders and typed headers use it; with a duplicate key, `get` sees
    /// the first value.
    pub(crate) fn push_unchecked(&mut self, key: &str, value: &str) {
        let start = self.text.len();
        self.text.push_str(key);
        let key_end = self.text.len();
        self.text.push_str(value);
        self.spans.push(Span {
            start,
            key_end,
            end: self.text.len(),
        });
    }

    /// Appends an entry whose key and value a decoder has just written to
    /// the end of the text buffer (see [`Self::text_mut`]).
    pub(crate) fn push_written(&mut self, start: usize, key_end: usize) {
        self.spans.push(Span {
            start,
            key_end,
            end: self.text.len(),
        });
    }

    /// Appends `key` with a decimal value, formatted in place.
    pub(crate) fn push_i64(&mut self, key: &str, v: i64) {
        use std::fmt::Write;
        let start = self.text.len();
        self.text.push_str(key);
        let key_end = self.text.len();
        let _ = write!(self.text, "{v}");
        self.push_written(start, key_end);
    }

    /// The text buffer, for decoders that append keys and values in place.
    pub(crate) fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.spans
            .iter()
            .find(|s| self.key_of(s) == key)
            .map(|s| self.value_of(s))
    }

    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.position(key)?;
        let s = self.spans.remove(i);
        Some(self.value_of(&s).to_string())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
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
            .map(|s| (self.key_of(s), self.value_of(s)))
    }

    /// Moves every entry of `other` into `self` (replacing equal keys).
    pub fn extend(&mut self, other: ExtFields) {
        for (k, v) in other.iter() {
            self.insert(k, v);
        }
    }

    /// Required string field.
    pub fn ext_str(&self, key: &'static str) -> Result<&str, HeaderError> {
        self.get(key).ok_or(HeaderError::Missing { field: key })
    }

    /// Required i32 field (Java `Integer.parseInt`).
    pub fn ext_i32(&self, key: &'static str) -> Result<i32, HeaderError> {
        parse_int(key, self.ext_str(key)?)
    }

    /// Required i64 field (Java `Long.parseLong`).
    pub fn ext_i64(&self, key: &'static str) -> Result<i64, HeaderError> {
        parse_int(key, self.ext_str(key)?)
    }

    /// Required boolean field with Java's lenient `Boolean.parseBoolean`:
    /// "true" in any case is true, anything else is false.
    pub fn ext_bool(&self, key: &'static str) -> Result<bool, HeaderError> {
        Ok(java_parse_bool(self.ext_str(key)?))
    }

    pub fn ext_str_opt(&self, key: &str) -> Option<&str> {
        self.get(key)
    }

    /// Optional i32: absent → `None`; present but not a number → error.
    pub fn ext_i32_opt(&self, key: &'static str) -> Result<Option<i32>, HeaderError> {
        self.get(key).map(|v| parse_int(key, v)).transpose()
    }

    pub fn ext_i64_opt(&self, key: &'static str) -> Result<Option<i64>, HeaderError> {
        self.get(key).map(|v| parse_int(key, v)).transpose()
    }

    pub fn ext_bool_opt(&self, key: &str) -> Option<bool> {
        self.get(key).map(java_parse_bool)
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut ext = ExtFields::new();
        for (k, v) in iter {
            ext.insert(k, v);
        }
        ext
    }
}

/// Java's `Boolean.parseBoolean`.
pub fn java_parse_bool(v: &str) -> bool {
    v.eq_ignore_ascii_case("true")
}

fn parse_int<T: std::str::FromStr>(field: &'static str, v: &str) -> Result<T, HeaderError> {
    // Java's parseInt accepts a leading '+', as does Rust's; neither accepts spaces.
    v.parse::<T>().map_err(|_| HeaderError::Invalid {
        field,
        value: truncate_for_error(v),
    })
}

pub(crate) fn truncate_for_error(v: &str) -> String {
    const MAX: usize = 64;
    if v.len() <= MAX {
        return v.to_string();
    }
    let mut end = MAX;
    while !v.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &v[..end])
}

/// One remoting command: a request, or a response to one (docs/protocol.md#commands).
///
/// `opaque` matches a response to its request; `flag` carries the response
/// and oneway bits. The body is opaque bytes, shared not copied (a pull
/// response body can be a slice of a mapped CommitLog file). A sender may
/// assemble a body from shared pieces: `body` then `body_parts`, in order,
/// form the frame's body on the wire (written with vectored writes, never
/// joined). A decoded command always has its whole body in `body`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotingCommand {
    pub code: i32,
    pub language: LanguageCode,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    pub body: Bytes,
    /// Further pieces of the body, sent right after `body` (empty when the
    /// body is one buffer, and always in a decoded command).
    pub body_parts: Vec<Bytes>,
    /// How this command's header is (or will be) serialized.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    /// A new request with the given code, Basalt's version and JSON headers.
    /// The opaque is assigned when it is sent.
    pub fn request(code: i32) -> Self {
        Self {
            code,
            language: LanguageCode::Java,
            version: basalt_common::constants::MQ_VERSION,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            body_parts: Vec::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// A new response with the given code and remark. The server sets the
    /// opaque of the request it answers.
    pub fn response(code: i32, remark: Option<String>) -> Self {
        let mut cmd = Self::request(code);
        cmd.flag = FLAG_RESPONSE;
        cmd.remark = remark;
        cmd
    }

    /// A SUCCESS response to `req`, echoing its opaque.
    pub fn response_to(req: &RemotingCommand) -> Self {
        let mut cmd = Self::response(crate::code::response::SUCCESS, None);
        cmd.opaque = req.opaque;
        cmd
    }

    /// The `REQUEST_CODE_NOT_SUPPORTED` reply Java sends for an unknown code.
    pub fn not_supported(req: &RemotingCommand) -> Self {
        let mut cmd = Self::response(
            crate::code::response::REQUEST_CODE_NOT_SUPPORTED,
            Some(format!(" request type {} not supported", req.code)),
        );
        cmd.opaque = req.opaque;
        cmd
    }

    pub fn with_ext(mut self, ext: ExtFields) -> Self {
        self.ext_fields = ext;
        self
    }

    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the body as pieces sent in order without being joined (see the
    /// type's documentation).
    pub fn with_body_parts(mut self, first: Bytes, rest: Vec<Bytes>) -> Self {
        self.body = first;
        self.body_parts = rest;
        self
    }

    /// Length of the body on the wire: `body` and every one of `body_parts`.
    pub fn body_len(&self) -> usize {
        self.body.len() + self.body_parts.iter().map(Bytes::len).sum::<usize>()
    }

    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }

    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// Shorthand for `self.ext_fields.ext_str(key)`; the other getters live on
    /// [`ExtFields`].
    pub fn ext_str(&self, key: &'static str) -> Result<&str, HeaderError> {
        self.ext_fields.ext_str(key)
    }

    pub fn ext_i32(&self, key: &'static str) -> Result<i32, HeaderError> {
        self.ext_fields.ext_i32(key)
    }

    pub fn ext_i64(&self, key: &'static str) -> Result<i64, HeaderError> {
        self.ext_fields.ext_i64(key)
    }

    pub fn ext_bool(&self, key: &'static str) -> Result<bool, HeaderError> {
        self.ext_fields.ext_bool(key)
    }

    /// Decodes the ext fields into a typed header.
    pub fn decode_header<H: crate::header::CommandHeader>(&self) -> Result<H, HeaderError> {
        H::from_ext(&self.ext_fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_names_and_codes_round_trip() {
        for l in LanguageCode::ALL {
            assert_eq!(LanguageCode::from_name(l.name()), l);
            assert_eq!(LanguageCode::from_code(l.code()), l);
        }
        assert_eq!(LanguageCode::from_name("COBOL"), LanguageCode::Other);
        assert_eq!(LanguageCode::from_code(200), LanguageCode::Other);
        assert_eq!(LanguageCode::NodeJs.code(), 13);
    }

    #[test]
    fn typed_getters_name_the_field() {
        let ext: ExtFields = [("queueId", "x1"), ("flag", "TRUE"), ("n", "-5")]
            .into_iter()
            .collect();
        assert_eq!(
            ext.ext_i32("queueId").unwrap_err(),
            HeaderError::Invalid {
                field: "queueId",
                value: "x1".into()
            }
        );
        assert_eq!(
            ext.ext_str("topic").unwrap_err(),
            HeaderError::Missing { field: "topic" }
        );
        assert!(ext.ext_bool("flag").unwrap());
        assert_eq!(ext.ext_i64("n").unwrap(), -5);
        assert_eq!(ext.ext_i64_opt("absent").unwrap(), None);
        assert!(ext.ext_i64_opt("queueId").is_err());
        assert_eq!(ext.ext_bool_opt("n"), Some(false));
    }

    #[test]
    fn push_appends_without_replacing() {
        let mut ext = ExtFields::with_capacity(2);
        ext.push("a", "1");
        ext.push("b", "2");
        ext.push("a", "3");
        assert_eq!(ext.len(), 3);
        assert_eq!(ext.get("a"), Some("1"));
        assert_eq!(ext.get("b"), Some("2"));
    }

    #[test]
    fn flags_and_constructors() {
        let mut req = RemotingCommand::request(310);
        req.opaque = 9;
        req.mark_oneway();
        assert!(req.is_oneway() && !req.is_response());
        let resp = RemotingCommand::response_to(&req);
        assert!(resp.is_response());
        assert_eq!(resp.opaque, 9);
        let ns = RemotingCommand::not_supported(&req);
        assert_eq!(ns.code, 3);
        assert_eq!(
            ns.remark.as_deref(),
            Some(" request type 310 not supported")
        );
    }
}
