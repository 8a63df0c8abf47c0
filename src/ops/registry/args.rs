//! Argument checking: every builtin's arguments are read through [`Args`], whose messages name
//! the builtin, the argument, what was expected and what was found.

use super::{ArgVal, Indices};
use crate::error::{Arg, Error, Result};
use crate::ir::{DType, Expr, Name, Nest, Op, Shape, State, TExpr, TNode, Value};

pub(super) struct Args<'a> {
    pub(super) builtin: &'static str,
    pub(super) state: &'a State,
    pub(super) args: &'a [ArgVal],
}

impl<'a> Args<'a> {
    pub(super) fn new(
        builtin: &'static str,
        state: &'a State,
        args: &'a [ArgVal],
        min: usize,
        max: usize,
        usage: &str,
    ) -> Result<Self> {
        if args.len() < min || args.len() > max {
            let expected = if min == max {
                format!("{min} arguments: {usage}")
            } else {
                format!("{min} to {max} arguments: {usage}")
            };
            return Err(Error::bad_argument(
                builtin,
                Arg::new(args.len().min(max.saturating_add(1)), "arguments"),
                expected,
                format!("{} arguments", args.len()),
            ));
        }
        Ok(Args { builtin, state, args })
    }

    pub(super) fn get(&self, pos: usize) -> &ArgVal {
        self.args.get(pos - 1).unwrap_or(&ArgVal::Omitted)
    }

    pub(super) fn wrong(&self, pos: usize, role: &str, expected: &str) -> Error {
        Error::WrongKind {
            builtin: self.builtin.into(),
            arg: Arg::new(pos, role),
            expected: expected.into(),
            found: self.get(pos).describe(),
        }
    }

    pub(super) fn value(&self, pos: usize, role: &str) -> Result<Value> {
        match self.get(pos) {
            ArgVal::Value(v) => Ok(v.clone()),
            ArgVal::Word(_) | ArgVal::Index(_) if self.word(pos).is_some() => {
                let w = self.word(pos).cloned().unwrap_or_else(|| Name::from(""));
                self.state.get(&w).cloned().or_else(|| self.temporary(&w)).ok_or_else(|| {
                    Error::UnknownIdentifier {
                        builtin: self.builtin.into(),
                        arg: Arg::new(pos, role),
                        name: w.to_string(),
                    }
                })
            }
            _ => Err(self.wrong(pos, role, "an identifier")),
        }
    }

    /// The nests among the arguments (values, or variables that hold one).
    fn nest_args(&self) -> impl Iterator<Item = &Nest> {
        self.args.iter().filter_map(|a| match a {
            ArgVal::Value(Value::Nest(n)) => Some(n),
            ArgVal::Word(w) => match self.state.get(w) {
                Some(Value::Nest(n)) => Some(n),
                _ => None,
            },
            _ => None,
        })
    }

    /// A temporary that `lift` introduced in a nest among the arguments (`store_at(l, 1, v_1)`):
    /// the assignment that defines it there.
    pub(super) fn temporary(&self, name: &str) -> Option<Value> {
        self.nest_args().find_map(|nest| nest.temporary(name).map(Value::Tensor))
    }

    /// Whether a nest argument accesses a tensor called `name`.
    fn accessed(&self, name: &str) -> bool {
        self.nest_args().any(|nest| nest.rank_of(name).is_some())
    }

    pub(super) fn word(&self, pos: usize) -> Option<&Name> {
        match self.get(pos) {
            ArgVal::Word(w) => Some(w),
            ArgVal::Index(e) => e.as_var(),
            _ => None,
        }
    }

    /// A tensor expression; numbers are accepted as literal scalar operands when `lit`.
    pub(super) fn tensor(&self, pos: usize, role: &str, lit: bool) -> Result<TExpr> {
        match self.get(pos) {
            ArgVal::Int(i) if lit => Ok(literal(*i as f64)),
            ArgVal::Float(x) if lit => Ok(literal(*x)),
            ArgVal::Index(e) if lit && e.as_const().is_some() => Ok(literal(e.constant() as f64)),
            // A named constant as a value (PolyBench's `(DATA_TYPE)_PB_N`): its value now.
            ArgVal::Word(w) if lit && self.state.get(w).is_none() && self.state.constant(w).is_some() => {
                Ok(literal(self.state.constant(w).unwrap_or(0) as f64))
            }
            _ => match self.value(pos, role)? {
                Value::Tensor(t) => Ok(t),
                v @ Value::Nest(_) => Err(Error::WrongKind {
                    builtin: self.builtin.into(),
                    arg: Arg::new(pos, role),
                    expected: "a tensor expression".into(),
                    found: v.kind(),
                }),
            },
        }
    }

    /// The name of a real tensor: given as its name (a string), as the tensor, or as the
    /// assignment that defines it.
    pub(super) fn real_tensor_name(&self, pos: usize) -> Result<Name> {
        if let ArgVal::Str(name) = self.get(pos) {
            // By name, a tensor a nest argument accesses counts too: in a script, a variable
            // can shadow the program's tensor of the same name (`let p = ...` over adi's `p`).
            return if self.state.real_tensor(name).is_some()
                || self.temporary(name).is_some()
                || self.accessed(name)
            {
                Ok(Name::from(name.as_str()))
            } else {
                Err(self.wrong(pos, "tensor", "the name of a real tensor"))
            };
        }
        let t = self.tensor(pos, "tensor", false)?;
        match (&t.op, t.target().and_then(|x| x.id())) {
            (Op::Id(n), _) => Ok(n.clone()),
            (_, Some(n)) => Ok(n.clone()),
            _ => Err(self.wrong(pos, "tensor", "a real tensor (declared, or the target of an assignment)")),
        }
    }

    pub(super) fn nest(&self, pos: usize, role: &str) -> Result<Nest> {
        match self.value(pos, role)? {
            Value::Nest(n) => Ok(n),
            v @ Value::Tensor(_) => Err(Error::WrongKind {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: "a loop nest (build a tensor expression first)".into(),
                found: v.kind(),
            }),
        }
    }

    pub(super) fn int(&self, pos: usize, role: &str) -> Result<i64> {
        match self.get(pos) {
            ArgVal::Int(i) => Ok(*i),
            ArgVal::Index(e) if e.as_const().is_some() => Ok(e.constant()),
            ArgVal::Word(w) if self.state.constant(w).is_some() => Ok(self.state.constant(w).unwrap_or(0)),
            _ => Err(self.wrong(pos, role, "an integer")),
        }
    }

    /// An optional order of dimensions, numbered from 1 as written (`[2, 1]`), 0-based; empty
    /// where the argument is omitted.
    pub(super) fn order(&self, pos: usize) -> Result<Vec<usize>> {
        match self.get(pos) {
            ArgVal::Omitted => Ok(Vec::new()),
            _ => self
                .ints(pos, "order")?
                .into_iter()
                .map(|d| {
                    usize::try_from(d - 1).map_err(|_| self.wrong(pos, "order", "dimensions numbered from 1"))
                })
                .collect(),
        }
    }

    pub(super) fn ints(&self, pos: usize, role: &str) -> Result<Vec<i64>> {
        match self.get(pos) {
            ArgVal::List(xs) => xs
                .iter()
                .map(|x| match x {
                    ArgVal::Int(i) => Ok(*i),
                    ArgVal::Index(e) if e.as_const().is_some() => Ok(e.constant()),
                    other => Err(Error::WrongKind {
                        builtin: self.builtin.into(),
                        arg: Arg::new(pos, role),
                        expected: "a list of integers".into(),
                        found: format!("{} in the list", other.describe()),
                    }),
                })
                .collect(),
            _ => Err(self.wrong(pos, role, "a list of integers")),
        }
    }

    /// An index expression (iterator, integer or affine expression).
    pub(super) fn index(&self, x: &ArgVal, pos: usize, role: &str) -> Result<Expr> {
        match x {
            ArgVal::Index(e) => Ok(e.clone()),
            ArgVal::Word(w) => Ok(Expr::var_name(w)),
            ArgVal::Int(i) => Ok(Expr::int(*i)),
            other => Err(Error::IteratorList {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: "iterators or affine index expressions".into(),
                found: other.describe(),
            }),
        }
    }

    /// An iterator list `[i, j+1]`, or `None` where omitted (ε).
    pub(super) fn iters(&self, x: &ArgVal, pos: usize, role: &str) -> Result<Option<Vec<Expr>>> {
        match x {
            ArgVal::Omitted => Ok(None),
            ArgVal::List(xs) => {
                xs.iter().map(|x| self.index(x, pos, role)).collect::<Result<Vec<_>>>().map(Some)
            }
            other => Err(Error::IteratorList {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: "an iterator list [...]".into(),
                found: other.describe(),
            }),
        }
    }

    /// The pair `[I0?, I1?]` of vop/op; an omitted argument omits both.
    pub(super) fn iter_pair(&self, pos: usize) -> Result<(Option<Indices>, Option<Indices>)> {
        let role = "iterator lists [I0, I1]";
        match self.get(pos) {
            ArgVal::Omitted => Ok((None, None)),
            ArgVal::List(xs)
                if xs.len() == 2 && xs.iter().all(|x| matches!(x, ArgVal::List(_) | ArgVal::Omitted)) =>
            {
                Ok((self.iters(&xs[0], pos, role)?, self.iters(&xs[1], pos, role)?))
            }
            other => Err(Error::IteratorList {
                builtin: self.builtin.into(),
                arg: Arg::new(pos, role),
                expected: "a pair of iterator lists [I0, I1] (either may be omitted: [, [k, j]])".into(),
                found: other.describe(),
            }),
        }
    }

    pub(super) fn result_iters(&self, pos: usize) -> Result<Vec<Expr>> {
        match self.iters(self.get(pos), pos, "result iterators")? {
            Some(xs) => Ok(xs),
            None => Err(self.wrong(pos, "result iterators", "a result iterator list -> [...]")),
        }
    }

    pub(super) fn extents(&self, pos: usize) -> Result<Vec<Expr>> {
        match self.get(pos) {
            ArgVal::List(xs) => xs
                .iter()
                .map(|x| match x {
                    ArgVal::Int(i) => Ok(Expr::int(*i)),
                    ArgVal::Word(w) => Ok(Expr::var_name(w)),
                    ArgVal::Index(e) => Ok(e.clone()),
                    other => Err(Error::WrongKind {
                        builtin: self.builtin.into(),
                        arg: Arg::new(pos, "shape"),
                        expected: "extents: integers or named constants".into(),
                        found: other.describe(),
                    }),
                })
                .collect(),
            _ => Err(self.wrong(pos, "shape", "a shape [extent, ...]")),
        }
    }

    /// The ranges of `build(t, ranges)`: `[[j, 0, i-1], [i, N-1, 0, -1], [t]]`: an iterator
    /// with its bounds (inclusive; `-1` last: from the first bound down to the second), or
    /// alone: bound by a loop around the sequence (`around`).
    pub(super) fn ranges(&self, pos: usize) -> Result<crate::ir::Domain> {
        let role = "ranges";
        let usage = "a list of ranges [[i, lb, ub], [j, ub, lb, -1] (backward), [t] (bound by `around`)]";
        let ArgVal::List(rs) = self.get(pos) else { return Err(self.wrong(pos, role, usage)) };
        let mut dom = crate::ir::Domain::default();
        for r in rs {
            let bad = |found: String| Error::bad_argument(self.builtin, Arg::new(pos, role), usage, found);
            let ArgVal::List(xs) = r else { return Err(bad(format!("{} in the list", r.describe()))) };
            let it = match xs.first() {
                Some(ArgVal::Word(w)) => w.clone(),
                Some(ArgVal::Index(e)) if e.as_var().is_some() => {
                    e.as_var().cloned().unwrap_or_else(|| "".into())
                }
                Some(other) => {
                    return Err(bad(format!("{} where an iterator starts a range", other.describe())));
                }
                None => return Err(bad("an empty range []".into())),
            };
            if self.state.constant(&it).is_some() {
                return Err(bad(format!("the named constant `{it}` where an iterator starts a range")));
            }
            let bound = |x: &ArgVal| -> Result<Expr> {
                match x {
                    ArgVal::Int(i) => Ok(Expr::int(*i)),
                    ArgVal::Word(w) => Ok(Expr::var_name(w)),
                    ArgVal::Index(e) => Ok(e.clone()),
                    other => Err(bad(format!("{} as a bound of `{it}`", other.describe()))),
                }
            };
            match xs.as_slice() {
                [_] => dom.free.push(it),
                [_, lb, ub] => dom.ranges.push(crate::ir::Range {
                    iter: it.clone(),
                    lb: bound(lb)?,
                    ub: bound(ub)?,
                    backward: false,
                }),
                [_, hi, lo, step] => {
                    let step = match step {
                        ArgVal::Int(k) => Some(*k),
                        ArgVal::Index(e) => e.as_const(),
                        _ => None,
                    };
                    match step {
                        Some(-1) => dom.ranges.push(crate::ir::Range {
                            iter: it.clone(),
                            lb: bound(lo)?,
                            ub: bound(hi)?,
                            backward: true,
                        }),
                        Some(1) => dom.ranges.push(crate::ir::Range {
                            iter: it.clone(),
                            lb: bound(hi)?,
                            ub: bound(lo)?,
                            backward: false,
                        }),
                        _ => {
                            return Err(bad(format!(
                                "the step {} of `{it}` (expected 1 or -1)",
                                xs[3].describe()
                            )));
                        }
                    }
                }
                _ => return Err(bad(format!("a range of {} elements for `{it}`", xs.len()))),
            }
        }
        Ok(dom)
    }

    pub(super) fn dtype(&self, pos: usize) -> Result<DType> {
        let word = match self.word(pos) {
            Some(w) => Some(w.to_string()),
            None => match self.get(pos) {
                ArgVal::Str(s) => Some(s.to_string()),
                _ => None,
            },
        };
        match word.as_deref().and_then(DType::from_name) {
            Some(d) => Ok(d),
            None => {
                let all: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
                Err(self.wrong(pos, "element type", &format!("an element type: {}", all.join(", "))))
            }
        }
    }
}

pub(super) fn literal(x: f64) -> TExpr {
    TNode::leaf(Op::Lit(x), Shape::Dims(vec![]), crate::ir::Iters::Bullet, DType::Double)
}

pub(super) fn tensor_value(x: TExpr) -> Value {
    Value::Tensor(x)
}

pub(super) fn nest_value(x: Nest) -> Value {
    Value::Nest(x)
}
