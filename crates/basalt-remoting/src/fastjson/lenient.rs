//! The lenient layer: deserializes a parsed JSON value into any serde type,
//! coercing a value where the target asks for another kind, as fastjson 1.x
//! does when Java's broker reads a body (spec §1.6):
//!
//! * integers and floats from JSON numbers, numeric strings (`"42"`, `" 7 "`,
//!   `"1.0"`), booleans (1/0) and null or `""` (0);
//! * booleans from JSON booleans, numbers (0 is false, any other true), the
//!   strings `true`/`false`/`1`/`0`/`Y`/`N`/`T`/`F` in any case, and null or
//!   `""` (false);
//! * strings from numbers and booleans (their JSON text), objects and arrays
//!   (their JSON text, as fastjson's `toString`), and null (empty);
//! * enums by name or by ordinal (`variants[i]`, the order Java declares);
//! * null as the default for options, collections, maps and structs (a
//!   struct's fields then take their `#[serde(default)]`s);
//! * object keys that match a struct field only when case, `_` and `-` are
//!   ignored (fastjson's smart match), and unknown keys ignored as usual.
//!
//! Targets that take anything (`serde_json::Value`, `IgnoredAny`) get the
//! value as it is.

use std::fmt;

use serde::de::value::StringDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    VariantAccess, Visitor,
};
use serde_json::{Map, Number, Value};

/// A value that did not fit its target, with the path to it
/// (`consumerDataSet[0].consumeType: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LenientError {
    /// Path segments, innermost first (they are added while unwinding).
    path: Vec<Segment>,
    msg: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

impl LenientError {
    fn within(mut self, seg: Segment) -> Self {
        self.path.push(seg);
        self
    }
}

impl fmt::Display for LenientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.path.iter().rev().enumerate() {
            match seg {
                Segment::Key(k) if i == 0 => write!(f, "{k}")?,
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        if self.path.is_empty() {
            f.write_str(&self.msg)
        } else {
            write!(f, ": {}", self.msg)
        }
    }
}

impl std::error::Error for LenientError {}

impl de::Error for LenientError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        LenientError {
            path: Vec::new(),
            msg: msg.to_string(),
        }
    }
}

type Result<T> = std::result::Result<T, LenientError>;

/// Deserializes `T` from `value` with fastjson's coercions.
pub fn from_value<T: de::DeserializeOwned>(value: Value) -> Result<T> {
    T::deserialize(LenientValue(value))
}

/// A JSON value as a lenient [`Deserializer`]: every coercion of the module
/// doc happens here, and nested values are wrapped again, so the whole tree
/// is lenient.
pub struct LenientValue(pub Value);

/// An integer read leniently: signed unless it only fits unsigned.
enum Int {
    Signed(i64),
    Unsigned(u64),
}

fn unexpected(v: &Value) -> de::Unexpected<'_> {
    match v {
        Value::Null => de::Unexpected::Unit,
        Value::Bool(b) => de::Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => de::Unexpected::Signed(i),
            (None, Some(u)) => de::Unexpected::Unsigned(u),
            _ => de::Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => de::Unexpected::Str(s),
        Value::Array(_) => de::Unexpected::Seq,
        Value::Object(_) => de::Unexpected::Map,
    }
}

/// Whether fastjson reads this string as null (`""` or `null`).
fn is_null_text(s: &str) -> bool {
    s.is_empty() || s.eq_ignore_ascii_case("null")
}

/// Java's `Number.longValue()` of a double: truncation toward zero.
fn truncate(f: f64) -> Option<Int> {
    let t = f.trunc();
    // i64::MAX as f64 rounds up to 2^63, which does not fit.
    (f.is_finite() && t >= i64::MIN as f64 && t < i64::MAX as f64).then_some(Int::Signed(t as i64))
}

fn number_to_int(n: &Number) -> Option<Int> {
    if let Some(i) = n.as_i64() {
        Some(Int::Signed(i))
    } else if let Some(u) = n.as_u64() {
        Some(Int::Unsigned(u))
    } else {
        n.as_f64().and_then(truncate)
    }
}

fn text_to_int(s: &str) -> Option<Int> {
    let t = s.trim();
    if is_null_text(t) {
        return Some(Int::Signed(0));
    }
    if let Ok(i) = t.parse::<i64>() {
        return Some(Int::Signed(i));
    }
    if let Ok(u) = t.parse::<u64>() {
        return Some(Int::Unsigned(u));
    }
    t.parse::<f64>().ok().and_then(truncate)
}

fn text_to_bool(s: &str) -> Option<bool> {
    let t = s.trim();
    if is_null_text(t) {
        return Some(false);
    }
    const TRUE: [&str; 4] = ["true", "1", "y", "t"];
    const FALSE: [&str; 4] = ["false", "0", "n", "f"];
    if TRUE.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Some(true)
    } else if FALSE.iter().any(|w| t.eq_ignore_ascii_case(w)) {
        Some(false)
    } else {
        None
    }
}

impl LenientValue {
    fn int(self, expected: &str) -> Result<Int> {
        let got = match &self.0 {
            Value::Null => Some(Int::Signed(0)),
            Value::Bool(b) => Some(Int::Signed(*b as i64)),
            Value::Number(n) => number_to_int(n),
            Value::String(s) => text_to_int(s),
            Value::Array(_) | Value::Object(_) => None,
        };
        got.ok_or_else(|| de::Error::invalid_type(unexpected(&self.0), &expected))
    }

    fn visit_int<'de, V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match self.int("an integer")? {
            Int::Signed(i) => v.visit_i64(i),
            Int::Unsigned(u) => v.visit_u64(u),
        }
    }

    fn float(self) -> Result<f64> {
        let got = match &self.0 {
            Value::Null => Some(0.0),
            Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
            Value::Number(n) => n.as_f64(),
            Value::String(s) if is_null_text(s.trim()) => Some(0.0),
            Value::String(s) => s.trim().parse().ok(),
            Value::Array(_) | Value::Object(_) => None,
        };
        got.ok_or_else(|| de::Error::invalid_type(unexpected(&self.0), &"a number"))
    }

    fn bool(self) -> Result<bool> {
        let got = match &self.0 {
            Value::Null => Some(false),
            Value::Bool(b) => Some(*b),
            Value::Number(n) => Some(n.as_f64().is_some_and(|f| f != 0.0)),
            Value::String(s) => text_to_bool(s),
            Value::Array(_) | Value::Object(_) => None,
        };
        got.ok_or_else(|| de::Error::invalid_type(unexpected(&self.0), &"a boolean"))
    }

    fn string(self) -> String {
        match self.0 {
            Value::String(s) => s,
            Value::Null => String::new(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            // fastjson's String codec: the JSON text of the parsed value.
            other => other.to_string(),
        }
    }
}

macro_rules! lenient_ints {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
                self.visit_int(v)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for LenientValue {
    type Error = LenientError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match self.0 {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    v.visit_i64(i)
                } else if let Some(u) = n.as_u64() {
                    v.visit_u64(u)
                } else {
                    v.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => v.visit_string(s),
            Value::Array(a) => v.visit_seq(LenientSeq::new(a)),
            Value::Object(m) => v.visit_map(LenientMap::new(m, &[])),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_bool(self.bool()?)
    }

    lenient_ints! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_f64(self.float()?)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_f64(self.float()?)
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_string(self.string())
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_string(self.string())
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_string(self.string())
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.deserialize_any(v)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.deserialize_any(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match self.0 {
            Value::Null => v.visit_none(),
            other => v.visit_some(LenientValue(other)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match self.0 {
            Value::Null => v.visit_unit(),
            other => LenientValue(other).deserialize_any(v),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match self.0 {
            Value::Array(a) => v.visit_seq(LenientSeq::new(a)),
            Value::Null => v.visit_seq(LenientSeq::new(Vec::new())),
            other => LenientValue(other).deserialize_any(v),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        v: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.deserialize_struct("", &[], v)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value> {
        match self.0 {
            Value::Object(m) => v.visit_map(LenientMap::new(m, fields)),
            Value::Null => v.visit_map(LenientMap::new(Map::new(), fields)),
            other => LenientValue(other).deserialize_any(v),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value> {
        match self.0 {
            Value::String(s) => v.visit_enum(StringDeserializer::<LenientError>::new(s)),
            Value::Number(n) => {
                let ordinal = n.as_u64().and_then(|i| usize::try_from(i).ok());
                match ordinal.and_then(|i| variants.get(i)) {
                    Some(variant) => {
                        v.visit_enum(StringDeserializer::<LenientError>::new(variant.to_string()))
                    }
                    None => Err(de::Error::custom(format!(
                        "{n} is not an ordinal of enum {name} ({} variants)",
                        variants.len()
                    ))),
                }
            }
            Value::Object(m) if m.len() == 1 => v.visit_enum(LenientVariant(m)),
            Value::Null => v.visit_unit(),
            other => Err(de::Error::invalid_type(
                unexpected(&other),
                &"an enum name or ordinal",
            )),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.deserialize_any(v)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_unit()
    }
}

/// An array's elements, each lenient; errors name the index.
struct LenientSeq {
    iter: std::vec::IntoIter<Value>,
    index: usize,
}

impl LenientSeq {
    fn new(a: Vec<Value>) -> Self {
        LenientSeq {
            iter: a.into_iter(),
            index: 0,
        }
    }
}

impl<'de> SeqAccess<'de> for LenientSeq {
    type Error = LenientError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        let Some(value) = self.iter.next() else {
            return Ok(None);
        };
        let i = self.index;
        self.index += 1;
        seed.deserialize(LenientValue(value))
            .map(Some)
            .map_err(|e| e.within(Segment::Index(i)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// An object's entries, each lenient. For a struct, `fields` are its wire
/// names: a key that matches none exactly is matched the fastjson way.
struct LenientMap {
    iter: serde_json::map::IntoIter,
    fields: &'static [&'static str],
    /// The entry whose key was just handed out: (key, value).
    pending: Option<(String, Value)>,
}

impl LenientMap {
    fn new(m: Map<String, Value>, fields: &'static [&'static str]) -> Self {
        LenientMap {
            iter: m.into_iter(),
            fields,
            pending: None,
        }
    }
}

/// fastjson's smart match: the field whose name equals `key` once case,
/// `_` and `-` are ignored.
fn smart_match(key: &str, fields: &'static [&'static str]) -> Option<&'static str> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let want = squash(key);
    fields.iter().copied().find(|f| squash(f) == want)
}

impl<'de> MapAccess<'de> for LenientMap {
    type Error = LenientError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        let Some((key, value)) = self.iter.next() else {
            return Ok(None);
        };
        let name = if self.fields.is_empty() || self.fields.contains(&key.as_str()) {
            None
        } else {
            smart_match(&key, self.fields)
        };
        let k = match name {
            Some(field) => seed.deserialize(KeyDeserializer(field)),
            None => seed.deserialize(KeyDeserializer(&key)),
        }
        .map_err(|e| e.within(Segment::Key(key.clone())))?;
        self.pending = Some((key, value));
        Ok(Some(k))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        let (key, value) = self.pending.take().ok_or_else(|| {
            <LenientError as de::Error>::custom("a value was asked before its key")
        })?;
        seed.deserialize(LenientValue(value))
            .map_err(|e| e.within(Segment::Key(key)))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// An object key as a lenient deserializer: text, or a number or boolean
/// parsed from it (`{"0":"a"}` into a `BTreeMap<i64, _>`).
struct KeyDeserializer<'a>(&'a str);

impl KeyDeserializer<'_> {
    fn visit_int<'de, V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match text_to_int(self.0) {
            Some(Int::Signed(i)) => v.visit_i64(i),
            Some(Int::Unsigned(u)) => v.visit_u64(u),
            None => Err(de::Error::invalid_type(
                de::Unexpected::Str(self.0),
                &"an integer key",
            )),
        }
    }
}

macro_rules! key_ints {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
                self.visit_int(v)
            }
        )*
    };
}

impl<'de> Deserializer<'de> for KeyDeserializer<'_> {
    type Error = LenientError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_str(self.0)
    }

    key_ints! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match text_to_bool(self.0) {
            Some(b) => v.visit_bool(b),
            None => Err(de::Error::invalid_type(
                de::Unexpected::Str(self.0),
                &"a boolean key",
            )),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value> {
        v.visit_enum(StringDeserializer::<LenientError>::new(self.0.to_string()))
    }

    serde::forward_to_deserialize_any! {
        f32 f64 char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

/// `{"Variant": value}`: an enum variant with data.
struct LenientVariant(Map<String, Value>);

impl<'de> EnumAccess<'de> for LenientVariant {
    type Error = LenientError;
    type Variant = LenientValue;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, LenientValue)> {
        let (name, value) = self
            .0
            .into_iter()
            .next()
            .ok_or_else(|| <LenientError as de::Error>::custom("an empty enum object"))?;
        let variant = seed.deserialize(name.into_deserializer())?;
        Ok((variant, LenientValue(value)))
    }
}

impl<'de> VariantAccess<'de> for LenientValue {
    type Error = LenientError;

    fn unit_variant(self) -> Result<()> {
        match self.0 {
            Value::Null => Ok(()),
            other => Err(de::Error::invalid_type(
                unexpected(&other),
                &"a unit variant",
            )),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value> {
        seed.deserialize(self)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value> {
        self.deserialize_seq(v)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value> {
        self.deserialize_struct("", fields, v)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase", default)]
    struct Target {
        count: i32,
        big: u64,
        ratio: f64,
        flag: bool,
        name: String,
        maybe: Option<i64>,
        list: Vec<i32>,
        table: BTreeMap<i64, String>,
        model: Model,
        inner: Inner,
    }

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(default)]
    struct Inner {
        depth: i32,
    }

    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    enum Model {
        Broadcasting,
        #[default]
        Clustering,
    }

    fn read(v: Value) -> Result<Target> {
        from_value(v)
    }

    #[test]
    fn scalars_are_coerced_where_the_target_asks() {
        let t = read(json!({
            "count": " 42 ", "big": "18446744073709551615", "ratio": "1.5",
            "flag": "TRUE", "name": 7, "maybe": "9", "list": ["1", 2, 3.0],
            "table": {"0": "a", "-1": "b"}, "model": 0, "inner": {"depth": true},
        }))
        .unwrap();
        assert_eq!(t.count, 42);
        assert_eq!(t.big, u64::MAX);
        assert_eq!(t.ratio, 1.5);
        assert!(t.flag);
        assert_eq!(t.name, "7");
        assert_eq!(t.maybe, Some(9));
        assert_eq!(t.list, [1, 2, 3]);
        assert_eq!(t.table[&-1], "b");
        assert_eq!(t.model, Model::Broadcasting);
        assert_eq!(t.inner.depth, 1);
    }

    #[test]
    fn null_and_empty_read_as_defaults() {
        let t = read(json!({
            "count": null, "big": "", "ratio": null, "flag": null, "name": null,
            "maybe": null, "list": null, "table": null, "inner": null,
        }))
        .unwrap();
        assert_eq!(t, Target::default());
        assert_eq!(read(json!({})).unwrap(), Target::default());
        assert_eq!(read(Value::Null).unwrap(), Target::default());
    }

    #[test]
    fn booleans_like_fastjson() {
        for (v, want) in [
            (json!("1"), true),
            (json!("0"), false),
            (json!("y"), true),
            (json!("F"), false),
            (json!(2), true),
            (json!(0), false),
            (json!("False"), false),
        ] {
            assert_eq!(read(json!({ "flag": v })).unwrap().flag, want, "{v}");
        }
        assert!(read(json!({"flag": "yes"})).is_err());
    }

    #[test]
    fn strings_take_the_text_of_other_values() {
        assert_eq!(read(json!({"name": true})).unwrap().name, "true");
        assert_eq!(read(json!({"name": 1.5})).unwrap().name, "1.5");
        assert_eq!(read(json!({"name": {"a": 1}})).unwrap().name, r#"{"a":1}"#);
    }

    #[test]
    fn enums_by_name_or_ordinal() {
        assert_eq!(
            read(json!({"model": "CLUSTERING"})).unwrap().model,
            Model::Clustering
        );
        assert_eq!(read(json!({"model": 1})).unwrap().model, Model::Clustering);
        let e = read(json!({"model": 2})).unwrap_err().to_string();
        assert!(
            e.starts_with("model: 2 is not an ordinal of enum Model"),
            "{e}"
        );
        assert!(read(json!({"model": "SIDEWAYS"})).is_err());
    }

    #[test]
    fn keys_match_like_fastjson() {
        let t = read(json!({"COUNT": 3, "inner": {"DEPTH": 4}, "unknown": [1, {}]})).unwrap();
        assert_eq!(t.count, 3);
        assert_eq!(t.inner.depth, 4);
    }

    #[test]
    fn errors_name_the_path() {
        let e = read(json!({"list": [1, "x"]})).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"list[1]: invalid type: string "x", expected an integer"#
        );
        let e = read(json!({"inner": {"depth": [1]}})).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("inner.depth: invalid type: sequence"),
            "{e}"
        );
        let e = read(json!({"count": "99999999999"})).unwrap_err();
        assert!(e.to_string().starts_with("count: invalid value"), "{e}");
        let e = read(json!({"table": {"x": "a"}})).unwrap_err();
        assert!(e.to_string().starts_with("table.x: invalid type"), "{e}");
    }

    #[test]
    fn values_pass_through_to_any() {
        let v: Value = from_value(json!({"a": [1, "2", null, 1.5, -3]})).unwrap();
        assert_eq!(v, json!({"a": [1, "2", null, 1.5, -3]}));
    }
}
