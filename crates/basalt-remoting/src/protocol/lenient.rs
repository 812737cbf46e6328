//! Serde helpers for fastjson-written bodies: null reads as the default, and
//! numbers and booleans may arrive as strings (docs/protocol.md#fastjson-quirks).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// `null` (or a missing key, with `#[serde(default)]`) becomes `T::default()`.
pub fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

struct NumVisitor<T>(PhantomData<T>);

impl<T> Visitor<'_> for NumVisitor<T>
where
    T: TryFrom<i64> + TryFrom<u64> + std::str::FromStr + Default,
{
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer, a numeric string or null")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        v.trim()
            .parse()
            .map_err(|_| E::custom(format!("{v:?} is not an integer")))
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
}

/// An i64 written as a number, a numeric string, or null (→ 0).
pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(NumVisitor::<i64>(PhantomData))
}

/// An i32 written as a number, a numeric string, or null (→ 0).
pub fn i32<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    d.deserialize_any(NumVisitor::<i32>(PhantomData))
}

/// A boolean written as `true`/`false`, a string (Java `parseBoolean`), or null (→ false).
pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a boolean")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
            Ok(crate::command::java_parse_bool(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<bool, E> {
            Ok(v != 0)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<bool, E> {
            Ok(v != 0)
        }
        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Ok(false)
        }
    }
    d.deserialize_any(V)
}

/// A string that may be null (→ empty).
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    null_default(d)
}
