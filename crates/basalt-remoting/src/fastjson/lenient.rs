//! The lenient layer: a [`Deserializer`] wrapper that coerces a JSON value
//! where the target type asks for another kind, as fastjson 1.x does when
//! Java's broker reads a body (docs/protocol.md#fastjson-quirks):
//!
//! * integers and floats from JSON numbers, numeric strings (`"42"`, `" 7 "`,
//!   `"1.0"`), booleans (1/0) and null or `""` (0); floats are truncated
//!   toward zero where an integer is wanted, as Java's `longValue()` does;
//! * booleans from JSON booleans, numbers (0 is false, any other true), the
//!   strings `true`/`false`/`1`/`0`/`Y`/`N`/`T`/`F` in any case, and null or
//!   `""` (false);
//! * strings from numbers and booleans (their JSON text), objects and arrays
//!   (their JSON text, as fastjson's `toString`), and null (empty);
//! * enums by name or by ordinal (`variants[i]`, the order Java declares);
//! * null as the default for options, collections, maps and structs (a
//!   struct's fields then take their `#[serde(default)]`s);
//! * object keys that match a struct field only when case, `_` and `-` are
//!   ignored (fastjson's smart match); unknown keys are ignored as usual.
//!
//! It wraps the streaming deserializer, so no intermediate value tree is
//! built; every nested value is wrapped again, so the whole body is lenient.
//! Targets that take anything (`serde_json::Value`, `IgnoredAny`) get the
//! input as it is.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, SeqAccess, Unexpected,
    Visitor,
};

/// A deserializer whose every value is read leniently (see the module doc).
pub struct Lenient<D>(pub D);

/// An integer read leniently: signed unless it only fits unsigned.
enum Int {
    Signed(i64),
    Unsigned(u64),
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

/// The JSON text of a float, as serde_json writes it (`7.0`, `1.5`).
fn float_text(f: f64) -> String {
    serde_json::Number::from_f64(f)
        .map(|n| n.to_string())
        .unwrap_or_else(|| f.to_string())
}

macro_rules! lenient_ints {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
                self.0.deserialize_any(IntVisitor(v))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Lenient<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(v)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(BoolVisitor(v))
    }

    lenient_ints! {
        deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
    }

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(FloatVisitor(v))
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(FloatVisitor(v))
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(StringVisitor(v))
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(StringVisitor(v))
    }

    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(StringVisitor(v))
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_bytes(v)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_byte_buf(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_option(OptionVisitor(v))
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit(v)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, NewtypeVisitor(v))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(SeqVisitor(v))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(SeqVisitor(v))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(SeqVisitor(v))
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(MapVisitor { v, fields: &[] })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(MapVisitor { v, fields })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(EnumVisitor { v, name, variants })
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_identifier(v)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_ignored_any(v)
    }
}

/// Reads a seed's value through [`Lenient`].
struct LenientSeed<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for LenientSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Lenient(d))
    }
}

/// Forwards the `visit_` calls a coercing visitor does not change.
macro_rules! forward_visits {
    ($($method:ident($ty:ty))*) => {
        $(
            fn $method<E: de::Error>(self, x: $ty) -> Result<V::Value, E> {
                self.0.$method(x)
            }
        )*
    };
}

/// An integer target: numbers, numeric strings, booleans and null.
struct IntVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for IntVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer or a numeric string")
    }

    forward_visits! { visit_i64(i64) visit_u64(u64) }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<V::Value, E> {
        match truncate(x) {
            Some(Int::Signed(i)) => self.0.visit_i64(i),
            _ => Err(E::invalid_value(Unexpected::Float(x), &self)),
        }
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<V::Value, E> {
        self.0.visit_i64(b as i64)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<V::Value, E> {
        match text_to_int(s) {
            Some(Int::Signed(i)) => self.0.visit_i64(i),
            Some(Int::Unsigned(u)) => self.0.visit_u64(u),
            None => Err(E::invalid_type(Unexpected::Str(s), &self)),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_i64(0)
    }
}

/// A float target: numbers, numeric strings, booleans and null.
struct FloatVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for FloatVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or a numeric string")
    }

    forward_visits! { visit_i64(i64) visit_u64(u64) visit_f64(f64) }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<V::Value, E> {
        self.0.visit_f64(if b { 1.0 } else { 0.0 })
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<V::Value, E> {
        let t = s.trim();
        if is_null_text(t) {
            return self.0.visit_f64(0.0);
        }
        match t.parse::<f64>() {
            Ok(f) => self.0.visit_f64(f),
            Err(_) => Err(E::invalid_type(Unexpected::Str(s), &self)),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_f64(0.0)
    }
}

/// A boolean target: booleans, numbers, fastjson's words, and null.
struct BoolVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for BoolVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a boolean")
    }

    forward_visits! { visit_bool(bool) }

    fn visit_i64<E: de::Error>(self, x: i64) -> Result<V::Value, E> {
        self.0.visit_bool(x != 0)
    }

    fn visit_u64<E: de::Error>(self, x: u64) -> Result<V::Value, E> {
        self.0.visit_bool(x != 0)
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<V::Value, E> {
        self.0.visit_bool(x != 0.0)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<V::Value, E> {
        match text_to_bool(s) {
            Some(b) => self.0.visit_bool(b),
            None => Err(E::invalid_value(Unexpected::Str(s), &self)),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_bool(false)
    }
}

/// A string target: text, the JSON text of any other value, and null.
struct StringVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for StringVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    forward_visits! { visit_str(&str) visit_string(String) visit_borrowed_str(&'de str) }

    fn visit_i64<E: de::Error>(self, x: i64) -> Result<V::Value, E> {
        self.0.visit_string(x.to_string())
    }

    fn visit_u64<E: de::Error>(self, x: u64) -> Result<V::Value, E> {
        self.0.visit_string(x.to_string())
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<V::Value, E> {
        self.0.visit_string(float_text(x))
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<V::Value, E> {
        self.0.visit_str(if b { "true" } else { "false" })
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_str("")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        let value: serde_json::Value =
            de::Deserialize::deserialize(SeqAccessDeserializer::new(seq))?;
        self.0.visit_string(value.to_string())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let value: serde_json::Value =
            de::Deserialize::deserialize(MapAccessDeserializer::new(map))?;
        self.0.visit_string(value.to_string())
    }
}

/// An `Option`: null is `None`, anything else a lenient `Some`.
struct OptionVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for OptionVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_some(Lenient(d))
    }
}

/// A newtype struct: its inner value is lenient.
struct NewtypeVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for NewtypeVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.0.visit_newtype_struct(Lenient(d))
    }
}

/// A sequence target: an array of lenient elements, or null (empty).
struct SeqVisitor<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for SeqVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array or null")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.0.visit_seq(LenientSeq(seq))
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.0.visit_seq(Empty(PhantomData))
    }
}

/// A map or struct target: an object of lenient values, or null (empty).
/// For a struct, `fields` are its wire names, for the smart match.
struct MapVisitor<V> {
    v: V,
    fields: &'static [&'static str],
}

impl<'de, V: Visitor<'de>> Visitor<'de> for MapVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object or null")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.v.visit_map(LenientMap {
            map,
            fields: self.fields,
        })
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_map(Empty(PhantomData))
    }
}

/// An enum target: a variant name, a Java ordinal, `{"Variant": value}`,
/// or null (the target's `visit_unit`, a default where it has one).
struct EnumVisitor<V> {
    v: V,
    name: &'static str,
    variants: &'static [&'static str],
}

impl<'de, V: Visitor<'de>> Visitor<'de> for EnumVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a name or an ordinal of enum {}", self.name)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<V::Value, E> {
        self.v.visit_enum(s.into_deserializer())
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<V::Value, E> {
        self.v.visit_enum(StringDeserializer::new(s))
    }

    fn visit_u64<E: de::Error>(self, x: u64) -> Result<V::Value, E> {
        let variant = usize::try_from(x).ok().and_then(|i| self.variants.get(i));
        match variant {
            Some(name) => self.v.visit_enum(name.into_deserializer()),
            None => Err(E::custom(format!(
                "{x} is not an ordinal of enum {} ({} variants)",
                self.name,
                self.variants.len()
            ))),
        }
    }

    fn visit_i64<E: de::Error>(self, x: i64) -> Result<V::Value, E> {
        match u64::try_from(x) {
            Ok(u) => self.visit_u64(u),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(x), &self)),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.v.visit_unit()
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        let lenient = LenientMap { map, fields: &[] };
        self.v.visit_enum(MapAccessDeserializer::new(lenient))
    }
}

/// An array whose elements are lenient.
struct LenientSeq<A>(A);

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for LenientSeq<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(LenientSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

/// An object whose values (and map keys) are lenient; struct keys are
/// smart-matched against `fields`.
struct LenientMap<A> {
    map: A,
    fields: &'static [&'static str],
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for LenientMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        if self.fields.is_empty() {
            self.map.next_key_seed(LenientSeed(seed))
        } else {
            self.map.next_key_seed(FieldSeed {
                seed,
                fields: self.fields,
            })
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.map.next_value_seed(LenientSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// A struct's key: the field it names exactly, or the one fastjson's smart
/// match finds (case, `_` and `-` ignored), or the key itself (unknown).
struct FieldSeed<K> {
    seed: K,
    fields: &'static [&'static str],
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for FieldSeed<K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, K: DeserializeSeed<'de>> Visitor<'de> for FieldSeed<K> {
    type Value = K::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<K::Value, E> {
        let name = if self.fields.contains(&key) {
            key
        } else {
            smart_match(key, self.fields).unwrap_or(key)
        };
        self.seed.deserialize(name.into_deserializer())
    }
}

/// fastjson's smart match: the field whose name equals `key` once case,
/// `_` and `-` are ignored.
fn smart_match(key: &str, fields: &'static [&'static str]) -> Option<&'static str> {
    let squashed = |s: &str| {
        s.bytes()
            .filter(|c| *c != b'_' && *c != b'-')
            .map(|c| c.to_ascii_lowercase())
            .collect::<Vec<u8>>()
    };
    let want = squashed(key);
    fields.iter().copied().find(|f| squashed(f) == want)
}

/// The empty array or object that null stands for.
struct Empty<E>(PhantomData<E>);

impl<'de, E: de::Error> SeqAccess<'de> for Empty<E> {
    type Error = E;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, _: T) -> Result<Option<T::Value>, E> {
        Ok(None)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(0)
    }
}

impl<'de, E: de::Error> MapAccess<'de> for Empty<E> {
    type Error = E;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, _: K) -> Result<Option<K::Value>, E> {
        Ok(None)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, _: T) -> Result<T::Value, E> {
        Err(E::custom("a value was asked of an empty object"))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use crate::fastjson::{FastJsonError, from_str};

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
        any: serde_json::Value,
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

    fn read(text: &str) -> Result<Target, FastJsonError> {
        from_str(text)
    }

    #[test]
    fn scalars_are_coerced_where_the_target_asks() {
        let t = read(
            r#"{"count":" 42 ","big":"18446744073709551615","ratio":"1.5","flag":"TRUE",
                "name":7,"maybe":"9","list":["1",2,3.0,true],"table":{"0":"a","-1":"b"},
                "model":0,"inner":{"depth":1.9}}"#,
        )
        .unwrap();
        assert_eq!(t.count, 42);
        assert_eq!(t.big, u64::MAX);
        assert_eq!(t.ratio, 1.5);
        assert!(t.flag);
        assert_eq!(t.name, "7");
        assert_eq!(t.maybe, Some(9));
        assert_eq!(t.list, [1, 2, 3, 1]);
        assert_eq!(t.table[&-1], "b");
        assert_eq!(t.model, Model::Broadcasting);
        // Java's longValue() truncates.
        assert_eq!(t.inner.depth, 1);
    }

    #[test]
    fn null_and_empty_read_as_defaults() {
        let t = read(
            r#"{"count":null,"big":"","ratio":null,"flag":null,"name":null,"maybe":null,
                "list":null,"table":null,"inner":null}"#,
        )
        .unwrap();
        assert_eq!(t, Target::default());
        // A derived enum has no default to give null; the protocol's
        // `java_enum!` types read null as theirs.
        assert!(read(r#"{"model":null}"#).is_err());
        assert_eq!(read("{}").unwrap(), Target::default());
        assert_eq!(read("null").unwrap(), Target::default());
        // Trailing whitespace, as the C++ client sends it.
        assert_eq!(read("{} \r\n\t").unwrap(), Target::default());
        assert!(read("{} x").is_err());
    }

    #[test]
    fn booleans_like_fastjson() {
        for (v, want) in [
            (r#""1""#, true),
            (r#""0""#, false),
            (r#""y""#, true),
            (r#""F""#, false),
            ("2", true),
            ("0", false),
            ("0.0", false),
            (r#""False""#, false),
        ] {
            let t = read(&format!(r#"{{"flag":{v}}}"#)).unwrap();
            assert_eq!(t.flag, want, "{v}");
        }
        assert!(read(r#"{"flag":"yes"}"#).is_err());
    }

    #[test]
    fn strings_take_the_text_of_other_values() {
        assert_eq!(read(r#"{"name":true}"#).unwrap().name, "true");
        assert_eq!(read(r#"{"name":1.5}"#).unwrap().name, "1.5");
        assert_eq!(read(r#"{"name":-3}"#).unwrap().name, "-3");
        assert_eq!(
            read(r#"{"name":{"a":[1,"x"]}}"#).unwrap().name,
            r#"{"a":[1,"x"]}"#
        );
    }

    #[test]
    fn enums_by_name_or_ordinal() {
        assert_eq!(
            read(r#"{"model":"CLUSTERING"}"#).unwrap().model,
            Model::Clustering
        );
        assert_eq!(read(r#"{"model":1}"#).unwrap().model, Model::Clustering);
        let e = read(r#"{"model":2}"#).unwrap_err().to_string();
        assert!(e.starts_with("2 is not an ordinal of enum Model"), "{e}");
        assert!(read(r#"{"model":"SIDEWAYS"}"#).is_err());
        assert!(read(r#"{"model":-1}"#).is_err());
    }

    #[test]
    fn keys_match_like_fastjson() {
        let t = read(r#"{"COUNT":3,"inner":{"DEPTH":4},"max_offset":1,"unknown":[1,{}]}"#).unwrap();
        assert_eq!(t.count, 3);
        assert_eq!(t.inner.depth, 4);
        // Map keys are data, not matched.
        let t = read(r#"{"table":{"7":"x"}}"#).unwrap();
        assert_eq!(t.table[&7], "x");
    }

    #[test]
    fn errors_say_where() {
        let e = read(r#"{"list":[1,"x"]}"#).unwrap_err().to_string();
        assert!(e.contains("expected an integer or a numeric string"), "{e}");
        assert!(e.contains("column"), "{e}");
        let e = read(r#"{"count":"99999999999"}"#).unwrap_err().to_string();
        assert!(e.starts_with("invalid value"), "{e}");
        assert!(read(r#"{"inner":{"depth":[1]}}"#).is_err());
        assert!(read(r#"{"table":{"x":"a"}}"#).is_err());
    }

    #[test]
    fn values_pass_through_to_any() {
        let t = read(r#"{"any":{"a":[1,"2",null,1.5,-3]}}"#).unwrap();
        assert_eq!(t.any, serde_json::json!({"a": [1, "2", null, 1.5, -3]}));
    }
}
