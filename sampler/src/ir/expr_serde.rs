//! Hand-written serde for [`Expr`]: compact JSON (numbers, names, one-key objects), bounded nesting.
//!
//! Besides the unary (`{"exp": e}`) and binary (`{"add": [a, b]}`) operations there are three
//! structural forms: `{"concat": [e1, e2, ...]}`, `{"elem": [e, k]}` and
//! `{"slice": [e, start, len]}`, where `k`, `start` and `len` are non-negative integers.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeTuple, Serializer};
use serde::{Deserialize, Serialize};

use super::{BinaryOp, Expr, UnaryOp};

/// Deepest expression nesting accepted by the decoder. Deeper input is refused with an error
/// instead of risking the stack; real models nest a few levels.
pub const MAX_EXPR_DEPTH: usize = 64;

impl Serialize for Expr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Expr::Const(value) => serializer.serialize_f64(*value),
            Expr::Ref(name) => serializer.serialize_str(name),
            Expr::Unary(op, arg) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(op.name(), arg)?;
                map.end()
            }
            Expr::Binary(op, lhs, rhs) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(op.name(), &Pair(lhs, rhs))?;
                map.end()
            }
            Expr::Concat(parts) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(CONCAT, parts)?;
                map.end()
            }
            Expr::Elem(arg, k) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(ELEM, &Indexed(arg, &[*k]))?;
                map.end()
            }
            Expr::Slice(arg, start, len) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(SLICE, &Indexed(arg, &[*start, *len]))?;
                map.end()
            }
        }
    }
}

const CONCAT: &str = "concat";
const ELEM: &str = "elem";
const SLICE: &str = "slice";

/// An expression followed by constant positions: `[e, k]` or `[e, start, len]`.
struct Indexed<'a>(&'a Expr, &'a [u32]);

impl Serialize for Indexed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(1 + self.1.len())?;
        tuple.serialize_element(self.0)?;
        for position in self.1 {
            tuple.serialize_element(position)?;
        }
        tuple.end()
    }
}

struct Pair<'a>(&'a Expr, &'a Expr);

impl Serialize for Pair<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(2)?;
        tuple.serialize_element(self.0)?;
        tuple.serialize_element(self.1)?;
        tuple.end()
    }
}

impl<'de> Deserialize<'de> for Expr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Expr, D::Error> {
        ExprSeed { depth: 0 }.deserialize(deserializer)
    }
}

enum OpKey {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Concat,
    /// `elem` (one position) or `slice` (two).
    Indexed(&'static str, usize),
}

fn op_from_name(name: &str) -> Option<OpKey> {
    match name {
        CONCAT => return Some(OpKey::Concat),
        ELEM => return Some(OpKey::Indexed(ELEM, 1)),
        SLICE => return Some(OpKey::Indexed(SLICE, 2)),
        _ => {}
    }
    UnaryOp::ALL
        .iter()
        .find(|op| op.name() == name)
        .map(|op| OpKey::Unary(*op))
        .or_else(|| {
            BinaryOp::ALL
                .iter()
                .find(|op| op.name() == name)
                .map(|op| OpKey::Binary(*op))
        })
}

fn op_names() -> String {
    let unary = UnaryOp::ALL.iter().map(|op| op.name());
    let binary = BinaryOp::ALL.iter().map(|op| op.name());
    unary
        .chain(binary)
        .chain([CONCAT, ELEM, SLICE])
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Clone, Copy)]
struct ExprSeed {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for ExprSeed {
    type Value = Expr;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Expr, D::Error> {
        if self.depth > MAX_EXPR_DEPTH {
            return Err(de::Error::custom(format_args!(
                "expression nested deeper than {MAX_EXPR_DEPTH} levels"
            )));
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ExprSeed {
    type Value = Expr;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an expression: a number, a name, or a one-key object such as {\"exp\": \"x\"}")
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Expr, E> {
        Ok(Expr::Const(value))
    }

    fn visit_f32<E: de::Error>(self, value: f32) -> Result<Expr, E> {
        Ok(Expr::Const(f64::from(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Expr, E> {
        Ok(Expr::Const(value as f64))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Expr, E> {
        Ok(Expr::Const(value as f64))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Expr, E> {
        Ok(Expr::Ref(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Expr, E> {
        Ok(Expr::Ref(value))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Expr, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::custom("empty object is not an expression"));
        };
        let op = op_from_name(&key).ok_or_else(|| {
            de::Error::custom(format_args!(
                "unknown operation `{key}`, expected one of: {}",
                op_names()
            ))
        })?;
        let inner = ExprSeed {
            depth: self.depth + 1,
        };
        let expr = match op {
            OpKey::Unary(op) => Expr::Unary(op, Box::new(map.next_value_seed(inner)?)),
            OpKey::Binary(op) => {
                let (lhs, rhs) = map.next_value_seed(PairSeed { inner, op })?;
                Expr::Binary(op, Box::new(lhs), Box::new(rhs))
            }
            OpKey::Concat => Expr::Concat(map.next_value_seed(ListSeed { inner })?),
            OpKey::Indexed(name, n_positions) => {
                let (arg, positions) = map.next_value_seed(IndexedSeed {
                    inner,
                    name,
                    n_positions,
                })?;
                match positions[..] {
                    [k] => Expr::Elem(Box::new(arg), k),
                    [start, len] => Expr::Slice(Box::new(arg), start, len),
                    _ => unreachable!("n_positions is 1 or 2"),
                }
            }
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format_args!(
                "an expression object has exactly one key, found `{key}` and `{extra}`"
            )));
        }
        Ok(expr)
    }
}

struct PairSeed {
    inner: ExprSeed,
    op: BinaryOp,
}

impl<'de> DeserializeSeed<'de> for PairSeed {
    type Value = (Expr, Expr);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(Expr, Expr), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for PairSeed {
    type Value = (Expr, Expr);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a list of two arguments for `{}`", self.op.name())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(Expr, Expr), A::Error> {
        let wrong_len = || {
            de::Error::custom(format_args!(
                "`{}` takes a list of exactly two arguments",
                self.op.name()
            ))
        };
        let lhs = seq.next_element_seed(self.inner)?.ok_or_else(wrong_len)?;
        let rhs = seq.next_element_seed(self.inner)?.ok_or_else(wrong_len)?;
        // A third element is an error whatever it is; decode it with the bounded seed rather
        // than skipping it (skipping recurses without our depth limit).
        if seq.size_hint().is_some_and(|n| n > 0) || seq.next_element_seed(self.inner)?.is_some() {
            return Err(wrong_len());
        }
        Ok((lhs, rhs))
    }
}

/// The parts of a `concat`: a list of expressions.
struct ListSeed {
    inner: ExprSeed,
}

impl<'de> DeserializeSeed<'de> for ListSeed {
    type Value = Vec<Expr>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Vec<Expr>, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ListSeed {
    type Value = Vec<Expr>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of expressions for `concat`")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Expr>, A::Error> {
        // No preallocation from the size hint: the input, not the hint, bounds the length.
        let mut parts = Vec::new();
        while let Some(part) = seq.next_element_seed(self.inner)? {
            parts.push(part);
        }
        Ok(parts)
    }
}

/// `[e, k]` for `elem`, `[e, start, len]` for `slice`.
struct IndexedSeed {
    inner: ExprSeed,
    name: &'static str,
    n_positions: usize,
}

impl<'de> DeserializeSeed<'de> for IndexedSeed {
    type Value = (Expr, Vec<u32>);

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for IndexedSeed {
    type Value = (Expr, Vec<u32>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.shape())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let wrong_len = || de::Error::custom(self.shape());
        let arg = seq.next_element_seed(self.inner)?.ok_or_else(wrong_len)?;
        let mut positions = Vec::with_capacity(self.n_positions);
        for _ in 0..self.n_positions {
            let position: u32 = seq.next_element()?.ok_or_else(wrong_len)?;
            positions.push(position);
        }
        // As in `PairSeed`: an extra element is decoded with the bounded seed, not skipped.
        if seq.size_hint().is_some_and(|n| n > 0) || seq.next_element_seed(self.inner)?.is_some() {
            return Err(wrong_len());
        }
        Ok((arg, positions))
    }
}

impl IndexedSeed {
    fn shape(&self) -> String {
        match self.n_positions {
            1 => format!(
                "`{}` takes a list [expression, k] with k a non-negative integer",
                self.name
            ),
            _ => format!(
                "`{}` takes a list [expression, start, len] of non-negative integers",
                self.name
            ),
        }
    }
}

/// Deserialises a string-keyed map, refusing duplicate keys (which JSON allows and would
/// otherwise silently overwrite data).
pub fn map_without_duplicates<'de, D, V>(deserializer: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    struct MapVisitor<V>(std::marker::PhantomData<V>);

    impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
        type Value = BTreeMap<String, V>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map from names to values")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = BTreeMap::new();
            while let Some(key) = map.next_key::<String>()? {
                if out.contains_key(&key) {
                    return Err(de::Error::custom(format_args!(
                        "duplicate data name `{key}`"
                    )));
                }
                let value = map.next_value()?;
                out.insert(key, value);
            }
            Ok(out)
        }
    }

    deserializer.deserialize_map(MapVisitor(std::marker::PhantomData))
}
