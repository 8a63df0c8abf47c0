//! The Rhai-side values: tensor expressions, loop nests and affine index expressions as custom
//! types, and the conversions between Rhai values and the builtin table's [`ArgVal`]s.

use crate::ir::{Expr, Name, Nest, TExpr, Value};
use crate::ops::ArgVal;
use rhai::{Array, Dynamic, ImmutableString};

/// A tensor expression as a Rhai value (type name `Tensor`).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorVal(pub TExpr);

/// A loop nest as a Rhai value (type name `Nest`).
#[derive(Clone, Debug, PartialEq)]
pub struct NestVal(pub Nest);

/// An affine index expression as a Rhai value (type name `Index`): an iterator (`i`), a named
/// constant (`N`) or an affine combination (`i+1`, `h+kh`, `2*i`, `N-1`).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexVal(pub Expr);

/// The Rhai value of a TeML value.
pub fn to_dynamic(v: Value) -> Dynamic {
    match v {
        Value::Tensor(t) => Dynamic::from(TensorVal(t)),
        Value::Nest(n) => Dynamic::from(NestVal(n)),
    }
}

/// The TeML value a Rhai value holds, if it holds one.
pub fn to_value(d: &Dynamic) -> Option<Value> {
    if let Some(t) = d.clone().try_cast::<TensorVal>() {
        return Some(Value::Tensor(t.0));
    }
    d.clone().try_cast::<NestVal>().map(|n| Value::Nest(n.0))
}

/// An index value as a Rhai value; a constant expression becomes an integer.
pub fn index_dynamic(e: Expr) -> Dynamic {
    match e.as_const() {
        Some(c) => Dynamic::from(c),
        None => Dynamic::from(IndexVal(e)),
    }
}

/// Converts a Rhai value to a builtin argument: integers, floats, strings, `()` (an omitted
/// argument), arrays (lists), tensors, nests and index expressions (a plain name becomes a
/// `Word`, which the builtins resolve by position: iterator, named constant, identifier of σ or
/// type name). `Err` describes a value that cannot be an argument.
pub fn to_arg(d: &Dynamic) -> Result<ArgVal, String> {
    to_arg_at(d, 0)
}

/// Lists nested deeper than this are no arguments (the deepest a builtin reads is 3).
const MAX_LIST_DEPTH: usize = 16;

fn to_arg_at(d: &Dynamic, depth: usize) -> Result<ArgVal, String> {
    if depth > MAX_LIST_DEPTH {
        return Err(format!("lists nested more than {MAX_LIST_DEPTH} deep"));
    }
    let d = d.flatten_clone();
    if d.is_unit() {
        return Ok(ArgVal::Omitted);
    }
    if let Ok(i) = d.as_int() {
        return Ok(ArgVal::Int(i));
    }
    if let Ok(x) = d.as_float() {
        return Ok(ArgVal::Float(x));
    }
    if d.is_string() {
        let s: ImmutableString = d.into_immutable_string().unwrap_or_default();
        return Ok(ArgVal::Str(s.to_string()));
    }
    if d.is_array() {
        let xs: Array = d.into_array().unwrap_or_default();
        return xs.iter().map(|x| to_arg_at(x, depth + 1)).collect::<Result<Vec<_>, _>>().map(ArgVal::List);
    }
    if let Some(v) = to_value(&d) {
        return Ok(ArgVal::Value(v));
    }
    if let Some(IndexVal(e)) = d.clone().try_cast::<IndexVal>() {
        return Ok(index_arg(e));
    }
    Err(format!("a value of type {}", d.type_name()))
}

/// An index expression as an argument: a plain name is a `Word`, a constant an `Int`.
pub fn index_arg(e: Expr) -> ArgVal {
    if let Some(v) = e.as_var() {
        return ArgVal::Word(v.clone());
    }
    match e.as_const() {
        Some(c) => ArgVal::Int(c),
        None => ArgVal::Index(e),
    }
}

/// Converts a builtin argument (from the `.teml` front-end) to a Rhai value. A `Word` is the
/// value `lookup` finds for it, else an iterator (or named constant) index.
pub fn from_arg(a: &ArgVal, lookup: &dyn Fn(&Name) -> Option<Value>) -> Dynamic {
    match a {
        ArgVal::Value(v) => to_dynamic(v.clone()),
        ArgVal::Int(i) => Dynamic::from(*i),
        ArgVal::Float(x) => Dynamic::from(*x),
        ArgVal::Index(e) => index_dynamic(e.clone()),
        ArgVal::Word(w) => match lookup(w) {
            Some(v) => to_dynamic(v),
            None => Dynamic::from(IndexVal(Expr::var_name(w))),
        },
        ArgVal::Str(s) => Dynamic::from(s.clone()),
        ArgVal::List(xs) => Dynamic::from_array(xs.iter().map(|x| from_arg(x, lookup)).collect()),
        ArgVal::Omitted => Dynamic::UNIT,
    }
}

/// A value as error messages show what was found: numbers, strings, `()`, lists and indices
/// as written, tensors and nests by kind.
pub fn short(d: &Dynamic) -> String {
    short_at(d, 0)
}

fn short_at(d: &Dynamic, depth: usize) -> String {
    let d = d.flatten_clone();
    if let Ok(i) = d.as_int() {
        return i.to_string();
    }
    if let Ok(x) = d.as_float() {
        return format!("{x:?}");
    }
    if d.is_string() {
        return format!("\"{d}\"");
    }
    if d.is_unit() {
        return "()".into();
    }
    if let Some(IndexVal(e)) = d.clone().try_cast::<IndexVal>() {
        return e.to_string();
    }
    if let Some(xs) = d.clone().try_cast::<Array>() {
        if depth > 4 {
            return "[...]".into();
        }
        return format!("[{}]", xs.iter().map(|x| short_at(x, depth + 1)).collect::<Vec<_>>().join(", "));
    }
    describe(&d)
}

/// Describes a Rhai value for error messages.
pub fn describe(d: &Dynamic) -> String {
    let d = d.flatten_clone();
    if let Some(v) = to_value(&d) {
        return v.kind();
    }
    if let Some(IndexVal(e)) = d.clone().try_cast::<IndexVal>() {
        return format!("the index expression {e}");
    }
    if d.is_unit() {
        return "nothing (`()`)".into();
    }
    if d.is_array() {
        return format!("an array of {} items", d.into_array().map(|a| a.len()).unwrap_or(0));
    }
    format!("{} `{d}`", d.type_name())
}
