//! Reading the fields of JSON records (YSB events, SenML messages) with `serde_json` without
//! copying them: strings are borrowed from the record unless they hold escapes, and values
//! whose exact text matters (numbers, which may also be written as strings) are taken as the
//! raw text of the record.

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// The number (or string of digits) after the first `"name":` of a JSON line, read without
/// parsing the rest: a record's event time, cheaply, before its operators validate it. `quoted`
/// is the member name with its quotes; `None` when absent or not a number.
pub fn member_u64(line: &[u8], quoted: &[u8]) -> Option<u64> {
    let at = line.windows(quoted.len()).position(|w| w == quoted)? + quoted.len();
    let rest = line[at..].trim_ascii_start().strip_prefix(b":")?.trim_ascii_start();
    let rest = rest.strip_prefix(b"\"").unwrap_or(rest);
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    crate::text::parse_u64(&rest[..digits])
}

/// A value that must be a JSON object: a derived struct alone would also accept an array of
/// its fields' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Members<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(Members(PhantomData)).map(Object)
    }
}

/// A JSON string: borrowed from the record when it has no escapes, decoded otherwise.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl Text<'_> {
    /// The string's content.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A string if the value is one; a value of any other type is validated, skipped and read as
/// `None`, so that a member of the wrong type can be reported for what it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaybeText<'a>(pub Option<Cow<'a, str>>);

impl<'de> Deserialize<'de> for MaybeText<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct AnyValue;
        impl<'de> Visitor<'de> for AnyValue {
            type Value = MaybeText<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: Error>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(MaybeText(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E: Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(MaybeText(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_bool<E: Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MaybeText(None))
            }
            fn visit_i64<E: Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MaybeText(None))
            }
            fn visit_u64<E: Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MaybeText(None))
            }
            fn visit_f64<E: Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MaybeText(None))
            }
            fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
                Ok(MaybeText(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeText(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                skip_members(map)?;
                Ok(MaybeText(None))
            }
        }
        d.deserialize_any(AnyValue)
    }
}

/// Reads and discards the remaining members of an object (validating them).
pub fn skip_members<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A member that may be absent. Unlike `Option`, `null` is a value (of the wrong type for a
/// string or a number), not an absent member, so that it is reported as such.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Member<T> {
    /// The object has no such member.
    #[default]
    Absent,
    /// The member's value.
    Present(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Member<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Member::Present)
    }
}

impl<T> Member<T> {
    /// The value, if present.
    pub fn present(self) -> Option<T> {
        match self {
            Member::Absent => None,
            Member::Present(v) => Some(v),
        }
    }
}

/// What a raw value holds, for fields that may be a number or a string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scalar<'a> {
    /// A number, as written.
    Number(&'a str),
    /// A string's content.
    Text(Cow<'a, str>),
    /// `null`, `true`, `false`, an object or an array.
    Other,
}

/// Classifies the raw text of one JSON value (which `serde_json` has already validated).
pub fn scalar(raw: &RawValue) -> Scalar<'_> {
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => Scalar::Number(text),
        Some(b'"') => match serde_json::from_str::<Text<'_>>(text) {
            Ok(t) => Scalar::Text(t.0),
            Err(_) => Scalar::Other,
        },
        _ => Scalar::Other,
    }
}

/// The text of a number, or of a string holding one (SenML files write `"v":"21.5"`, YSB
/// `"event_time":"1500000000000"`); `None` for other values.
pub fn numeric_text<'a>(raw: &'a RawValue) -> Option<Cow<'a, str>> {
    match scalar(raw) {
        Scalar::Number(n) => Some(Cow::Borrowed(n)),
        Scalar::Text(t) => Some(t),
        Scalar::Other => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Record<'a> {
        #[serde(borrow, default)]
        s: Member<Text<'a>>,
        #[serde(borrow, default)]
        v: Member<&'a RawValue>,
    }

    #[test]
    fn strings_are_borrowed_unless_escaped() {
        let Object(r) =
            serde_json::from_str::<Object<Record<'_>>>(r#"{"s": "plain", "v": 1}"#).unwrap();
        assert!(matches!(r.s, Member::Present(Text(Cow::Borrowed("plain")))));
        let r: Record<'_> = serde_json::from_str(r#"{"s": "k\u0065y\n"}"#).unwrap();
        assert_eq!(r.s, Member::Present(Text(Cow::Owned("key\n".into()))));
        assert!(matches!(r.s, Member::Present(Text(Cow::Owned(_)))));
        assert!(matches!(r.v, Member::Absent));
    }

    #[test]
    fn maybe_text_reads_strings_and_skips_anything_else() {
        fn read(t: &str) -> serde_json::Result<Option<Cow<'_, str>>> {
            serde_json::from_str::<MaybeText<'_>>(t).map(|m| m.0)
        }
        assert!(matches!(read(r#""x""#), Ok(Some(Cow::Borrowed("x")))));
        assert_eq!(read(r#""\"x""#).unwrap().as_deref(), Some("\"x"));
        for other in ["1", "-1", "1.5", "true", "null", r#"[1, {"a": [2]}]"#, r#"{"a": {"b": 1}}"#]
        {
            assert_eq!(read(other).unwrap(), None, "{other}");
        }
        for bad in ["[1,]", r#"{"a" 1}"#, "tru"] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn null_is_a_value_and_absence_is_not() {
        let r: Record<'_> = serde_json::from_str(r#"{"v": null}"#).unwrap();
        assert_eq!(r.s, Member::Absent);
        assert_eq!(scalar(r.v.present().unwrap()), Scalar::Other);
        assert!(serde_json::from_str::<Record<'_>>(r#"{"s": null}"#).is_err());
        assert!(serde_json::from_str::<Record<'_>>(r#"{"s": 7}"#).is_err());
    }

    #[test]
    fn numbers_keep_their_text() {
        let raw = |t: &str| -> Box<RawValue> { serde_json::from_str(t).unwrap() };
        assert_eq!(numeric_text(&raw(" 1.0005 ")).as_deref(), Some("1.0005"));
        assert_eq!(numeric_text(&raw("-2e3")).as_deref(), Some("-2e3"));
        assert_eq!(numeric_text(&raw(r#""21.5""#)).as_deref(), Some("21.5"));
        assert_eq!(numeric_text(&raw(r#""\u0032""#)).as_deref(), Some("2"));
        for other in ["true", "null", "[1]", "{}"] {
            assert_eq!(numeric_text(&raw(other)), None, "{other}");
        }
    }

    #[test]
    fn malformed_text_and_arrays_for_objects_are_errors() {
        assert!(serde_json::from_str::<Record<'_>>(r#"["x"]"#).is_ok(), "a struct takes an array");
        for bad in [
            "",
            "{",
            "{\"s\"}",
            "{\"s\":}",
            "{\"s\":\"x\",}",
            "{\"v\":01}",
            "{\"v\":1.}",
            "[1]",
            "[\"x\"]",
            "{\"s\":\"x}",
            "{\"v\":tru}",
            "{} x",
            "{\"s\":\"\u{1}\"}",
            "{\"v\":-}",
        ] {
            assert!(serde_json::from_str::<Object<Record<'_>>>(bad).is_err(), "{bad:?}");
        }
    }
}
