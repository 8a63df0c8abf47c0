//! The adapters: one `b_*` function per builtin, reading its arguments through [`Args`] and
//! calling the pure function of `ops` that implements it.

use super::ArgVal;
use super::args::*;
use crate::error::{Arg, Error, Result};
use crate::ir::Func;
use crate::ir::{DType, Expr, Init, KernelRequest, Name, Nest, State, TExpr, Value};
use crate::ops::tensor::Arith;
use crate::ops::{build, tensor, transform};

pub(super) fn b_scalar(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("scalar", s, a, 0, 1, "scalar() or scalar(type)")?;
    let dtype = if a.args.is_empty() { DType::Double } else { a.dtype(1)? };
    Ok(tensor_value(tensor::scalar(dtype)))
}

pub(super) fn b_tensor(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("tensor", s, a, 1, 2, "tensor([extents]) or tensor(type, [extents])")?;
    let (dtype, dims) =
        if a.args.len() == 2 { (a.dtype(1)?, a.extents(2)?) } else { (DType::Double, a.extents(1)?) };
    Ok(tensor_value(tensor::tensor(s, "tensor", &dims, dtype)?))
}

pub(super) fn b_accumulator(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("accumulator", s, a, 1, 1, "accumulator([extents]) or accumulator(t)")?;
    let dims = match a.get(1) {
        ArgVal::List(_) => a.extents(1)?,
        _ => {
            let x = a.tensor(1, "shape of", false)?;
            match x.shape.dims() {
                Some(d) => d
                    .iter()
                    .map(|d| match d {
                        crate::ir::Dim::Known(e) => Ok(e.clone()),
                        crate::ir::Dim::Unknown => {
                            Err(a.wrong(1, "shape of", "a tensor expression of known shape"))
                        }
                    })
                    .collect::<Result<Vec<_>>>()?,
                None => return Err(a.wrong(1, "shape of", "a tensor expression with a shape")),
            }
        }
    };
    Ok(tensor_value(tensor::tensor(s, "accumulator", &dims, DType::Double)?))
}

pub(super) fn b_eq(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("eq", s, a, 3, 3, "eq(t, I0 -> I1)")?;
    let x = a.tensor(1, "tensor", true)?;
    let i0 = a.iters(a.get(2), 2, "iterators")?;
    let i1 = a.result_iters(3)?;
    Ok(tensor_value(tensor::eq(s, &x, i0.as_deref(), &i1)?))
}

macro_rules! vop_builtin {
    ($f:ident, $name:literal, $op:expr) => {
        pub(super) fn $f(s: &State, a: &[ArgVal]) -> Result<Value> {
            let a = Args::new($name, s, a, 2, 3, concat!($name, "(t0, t1, [I0, I1])"))?;
            let (x0, x1) = (a.tensor(1, "operand", true)?, a.tensor(2, "operand", true)?);
            let (i0, i1) = a.iter_pair(3)?;
            Ok(tensor_value(tensor::vop(s, $op, &x0, &x1, i0.as_deref(), i1.as_deref())?))
        }
    };
}

macro_rules! op_builtin {
    ($f:ident, $name:literal, $op:expr) => {
        pub(super) fn $f(s: &State, a: &[ArgVal]) -> Result<Value> {
            let a = Args::new($name, s, a, 4, 4, concat!($name, "(t0, t1, [I0, I1] -> I2)"))?;
            let (x0, x1) = (a.tensor(1, "operand", true)?, a.tensor(2, "operand", true)?);
            let (i0, i1) = a.iter_pair(3)?;
            let i2 = a.result_iters(4)?;
            Ok(tensor_value(tensor::op(s, $op, &x0, &x1, i0.as_deref(), i1.as_deref(), &i2)?))
        }
    };
}

vop_builtin!(b_vadd, "vadd", Arith::Add);
vop_builtin!(b_vsub, "vsub", Arith::Sub);
vop_builtin!(b_vmul, "vmul", Arith::Mul);
vop_builtin!(b_vdiv, "vdiv", Arith::Div);
op_builtin!(b_add, "add", Arith::Add);
op_builtin!(b_sub, "sub", Arith::Sub);
op_builtin!(b_mul, "mul", Arith::Mul);
op_builtin!(b_div, "div", Arith::Div);
vop_builtin!(b_vpow, "vpow", Arith::Pow);
vop_builtin!(b_vmin, "vmin", Arith::Min);
vop_builtin!(b_vmax, "vmax", Arith::Max);
op_builtin!(b_pow, "pow", Arith::Pow);
op_builtin!(b_min, "min", Arith::Min);
op_builtin!(b_max, "max", Arith::Max);
vop_builtin!(b_vlt, "vlt", Arith::Cmp(Func::Lt));
vop_builtin!(b_vle, "vle", Arith::Cmp(Func::Le));
vop_builtin!(b_vgt, "vgt", Arith::Cmp(Func::Gt));
vop_builtin!(b_vge, "vge", Arith::Cmp(Func::Ge));
vop_builtin!(b_veq, "veq", Arith::Cmp(Func::Eq));
vop_builtin!(b_vne, "vne", Arith::Cmp(Func::Ne));

/// The three operands of `vselect`/`select` and their iterator lists.
pub(super) type SelectArgs = ([TExpr; 3], [Option<Vec<Expr>>; 3]);

/// The three operands and lists of `vselect`/`select`; a missing else is refused.
pub(super) fn select_args(a: &Args<'_>, name: &str) -> Result<SelectArgs> {
    let ops = [a.tensor(1, "condition", true)?, a.tensor(2, "then", true)?, a.tensor(3, "else", true)?];
    let lists = match a.get(4) {
        ArgVal::Omitted => [None, None, None],
        ArgVal::List(xs)
            if xs.len() == 3 && xs.iter().all(|x| matches!(x, ArgVal::List(_) | ArgVal::Omitted)) =>
        {
            [
                a.iters(&xs[0], 4, "iterator lists")?,
                a.iters(&xs[1], 4, "iterator lists")?,
                a.iters(&xs[2], 4, "iterator lists")?,
            ]
        }
        other => {
            return Err(Error::IteratorList {
                builtin: name.into(),
                arg: Arg::new(4, "iterator lists"),
                expected: "three iterator lists [Ic, It, If] (any may be omitted: [[i], , [i]])".into(),
                found: other.describe(),
            });
        }
    };
    Ok((ops, lists))
}

pub(super) fn b_vselect(s: &State, a: &[ArgVal]) -> Result<Value> {
    let usage = "vselect(c, t, f, [Ic, It, If]): a condition, a value where it holds, and an else value";
    let a = Args::new("vselect", s, a, 3, 4, usage)?;
    let (ops, lists) = select_args(&a, "vselect")?;
    let l = [lists[0].as_deref(), lists[1].as_deref(), lists[2].as_deref()];
    Ok(tensor_value(tensor::vselect(s, [&ops[0], &ops[1], &ops[2]], l)?))
}

pub(super) fn b_select(s: &State, a: &[ArgVal]) -> Result<Value> {
    let usage =
        "select(c, t, f, [Ic, It, If] -> I): a condition, a value where it holds, an else value, the result";
    let a = Args::new("select", s, a, 5, 5, usage)?;
    let (ops, lists) = select_args(&a, "select")?;
    let l = [lists[0].as_deref(), lists[1].as_deref(), lists[2].as_deref()];
    let i = a.result_iters(5)?;
    Ok(tensor_value(tensor::select(s, [&ops[0], &ops[1], &ops[2]], l, &i)?))
}

macro_rules! vfn_builtin {
    ($f:ident, $name:literal, $func:expr) => {
        pub(super) fn $f(s: &State, a: &[ArgVal]) -> Result<Value> {
            let a = Args::new($name, s, a, 1, 2, concat!($name, "(t, I0)"))?;
            let x = a.tensor(1, "operand", true)?;
            let i0 = a.iters(a.get(2), 2, "iterators")?;
            Ok(tensor_value(tensor::vcall(s, $func, &x, i0.as_deref())?))
        }
    };
}

macro_rules! fn_builtin {
    ($f:ident, $name:literal, $func:expr) => {
        pub(super) fn $f(s: &State, a: &[ArgVal]) -> Result<Value> {
            let a = Args::new($name, s, a, 3, 3, concat!($name, "(t, I0 -> I1)"))?;
            let x = a.tensor(1, "operand", true)?;
            let i0 = a.iters(a.get(2), 2, "iterators")?;
            let i1 = a.result_iters(3)?;
            Ok(tensor_value(tensor::call(s, $func, &x, i0.as_deref(), &i1)?))
        }
    };
}

vfn_builtin!(b_vsqrt, "vsqrt", Func::Sqrt);
vfn_builtin!(b_vexp, "vexp", Func::Exp);
vfn_builtin!(b_vlog, "vlog", Func::Log);
vfn_builtin!(b_vabs, "vabs", Func::Abs);
fn_builtin!(b_sqrt, "sqrt", Func::Sqrt);
fn_builtin!(b_exp, "exp", Func::Exp);
fn_builtin!(b_log, "log", Func::Log);
fn_builtin!(b_abs, "abs", Func::Abs);

pub(super) fn b_vcontract(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new(
        "vcontract",
        s,
        a,
        3,
        3,
        "vcontract(t0, t1, [r0, r1]) or vcontract(t0, t1, [[r0, r1], ...])",
    )?;
    let (x0, x1) = (a.tensor(1, "operand", false)?, a.tensor(2, "operand", false)?);
    let pairs = match a.get(3) {
        ArgVal::List(xs) if xs.iter().all(|x| matches!(x, ArgVal::List(_))) && !xs.is_empty() => {
            let mut out = Vec::new();
            for x in xs {
                let sub = Args { builtin: a.builtin, state: s, args: std::slice::from_ref(x) };
                let p = sub.ints(1, "dimension pairs")?;
                if p.len() != 2 {
                    return Err(a.wrong(3, "dimension pairs", "pairs [r0, r1] of 1-based dimensions"));
                }
                out.push((p[0], p[1]));
            }
            out
        }
        _ => {
            let p = a.ints(3, "dimension pair")?;
            if p.len() != 2 {
                return Err(a.wrong(3, "dimension pair", "a pair [r0, r1] of 1-based dimensions"));
            }
            vec![(p[0], p[1])]
        }
    };
    Ok(tensor_value(tensor::vcontract(s, &x0, &x1, &pairs)?))
}

pub(super) fn b_build(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("build", s, a, 1, 2, "build(t) or build(t, ranges)")?;
    let x = a.tensor(1, "assignment", false)?;
    if a.args.len() == 1 {
        return Ok(nest_value(build::build(s, &x)?));
    }
    let dom = a.ranges(2)?;
    if !x.is_assign() {
        return Ok(nest_value(build::build(s, &x)?)); // build says what it expected
    }
    let mut full = x.domain();
    full.ranges = dom.ranges;
    full.free.extend(dom.free.into_iter().filter(|v| !full.outer.contains(v)));
    Ok(nest_value(build::build(s, &x.with_domain(full))?))
}

/// `lift(t)` / `lift(t, order)`: TeIL Sec. 5's lifting of a nested contraction into single
/// contractions through temporaries (`ops::lift`).
pub(super) fn b_lift(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("lift", s, a, 1, 3, "lift(t), lift(t, order) or lift(t, order, layout)")?;
    let x = a.tensor(1, "expression", false)?;
    let order = match a.get(2) {
        // `lift(t, , "summed_first")` or `lift(t, [], ...)`: the best order.
        ArgVal::Omitted => None,
        ArgVal::List(steps) if steps.is_empty() => None,
        ArgVal::List(steps) => Some(
            steps
                .iter()
                .map(|step| match step {
                    ArgVal::List(xs) if xs.len() == 2 => {
                        let int = |x: &ArgVal| match x {
                            ArgVal::Int(i) => Some(*i),
                            ArgVal::Index(e) => e.as_const(),
                            _ => None,
                        };
                        int(&xs[0]).zip(int(&xs[1])).ok_or(())
                    }
                    _ => Err(()),
                })
                .collect::<std::result::Result<Vec<(i64, i64)>, ()>>()
                .map_err(|_| {
                    a.wrong(2, "order", "a list of steps [a, b] (two positions each), as opt_einsum's paths")
                })?,
        ),
        _ => {
            return Err(a.wrong(
                2,
                "order",
                "a list of steps [a, b] (two positions each), as opt_einsum's paths",
            ));
        }
    };
    let layout = match a.get(3) {
        ArgVal::Omitted => crate::ops::lift::TempLayout::default(),
        ArgVal::Str(w) => crate::ops::lift::TempLayout::NAMES
            .iter()
            .find(|(name, _)| name == w)
            .map(|(_, l)| *l)
            .ok_or_else(|| a.wrong(3, "layout", "\"result_first\" or \"summed_first\""))?,
        _ => return Err(a.wrong(3, "layout", "\"result_first\" or \"summed_first\"")),
    };
    Ok(nest_value(crate::ops::lift::lift(s, &x, order.as_deref(), layout)?.nest))
}

/// `factor(t)`: a common operand out of a sum of two products (`ops::algebra`).
pub(super) fn b_factor(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("factor", s, a, 1, 1, "factor(t)")?;
    Ok(tensor_value(crate::ops::algebra::factor(s, &a.tensor(1, "expression", false)?)?))
}

/// `expand(t)`: a product distributed over a sum among its factors (`ops::algebra`).
pub(super) fn b_expand(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("expand", s, a, 1, 1, "expand(t)")?;
    Ok(tensor_value(crate::ops::algebra::expand(s, &a.tensor(1, "expression", false)?)?))
}

pub(super) fn b_around(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("around", s, a, 3, usize::MAX, "around(t, [lb, ub], l1, l2, ...)")?;
    let it = match a.get(1) {
        ArgVal::Word(w) => w.clone(),
        ArgVal::Index(e) if e.as_var().is_some() => e.as_var().cloned().unwrap_or_else(|| "".into()),
        _ => return Err(a.wrong(1, "iterator", "an iterator name")),
    };
    let usage = "a range [lb, ub] (inclusive), or [ub, lb, -1] (backward)";
    let (lb, ub, backward) = match a.get(2) {
        ArgVal::List(xs) if xs.len() == 2 => {
            (a.index(&xs[0], 2, "range")?, a.index(&xs[1], 2, "range")?, false)
        }
        ArgVal::List(xs) if xs.len() == 3 => match a.index(&xs[2], 2, "range")?.as_const() {
            Some(-1) => (a.index(&xs[1], 2, "range")?, a.index(&xs[0], 2, "range")?, true),
            Some(1) => (a.index(&xs[0], 2, "range")?, a.index(&xs[1], 2, "range")?, false),
            _ => return Err(a.wrong(2, "range", usage)),
        },
        _ => return Err(a.wrong(2, "range", usage)),
    };
    let nests = (3..=a.args.len()).map(|k| a.nest(k, "nest")).collect::<Result<Vec<_>>>()?;
    Ok(nest_value(build::around_dir(s, &it, &lb, &ub, backward, &nests)?))
}

pub(super) fn b_stripmine(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("stripmine", s, a, 3, 4, "stripmine(l, r, v) or stripmine(l, r, v, \"aligned\")")?;
    let aligned = match a.get(4) {
        ArgVal::Omitted => false,
        ArgVal::Str(m) if m == "aligned" => true,
        _ => return Err(a.wrong(4, "mode", "\"aligned\" (blocks at multiples of v)")),
    };
    let (l, r, v) = (a.nest(1, "nest")?, a.int(2, "level")?, a.int(3, "factor")?);
    Ok(nest_value(transform::stripmine_aligned(s, &l, r, v, aligned)?))
}

pub(super) fn b_skew(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("skew", s, a, 4, 4, "skew(l, r1, r2, f)")?;
    let l = a.nest(1, "nest")?;
    Ok(nest_value(transform::skew(&l, a.int(2, "level")?, a.int(3, "level")?, a.int(4, "factor")?)?))
}

pub(super) fn b_shift(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("shift", s, a, 3, 3, "shift(l, r, c)")?;
    Ok(nest_value(transform::shift(&a.nest(1, "nest")?, a.int(2, "level")?, a.int(3, "offset")?)?))
}

pub(super) fn b_reverse(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("reverse", s, a, 2, 2, "reverse(l, r)")?;
    Ok(nest_value(transform::reverse(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

pub(super) fn b_sink(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new(
        "sink",
        s,
        a,
        2,
        4,
        "sink(l, r), sink(l, r, \"first\" | \"last\") or sink(l, r, where, \"k\")",
    )?;
    let at = match a.get(3) {
        ArgVal::Omitted => transform::SinkAt::Keep,
        ArgVal::Str(m) if m == "first" => transform::SinkAt::First,
        ArgVal::Str(m) if m == "last" => transform::SinkAt::Last,
        _ => {
            return Err(a.wrong(
                3,
                "where",
                "\"first\" or \"last\" (the inner loop's iteration that runs the statements)",
            ));
        }
    };
    let into = match a.get(4) {
        ArgVal::Omitted => None,
        ArgVal::Str(k) => Some(k.clone()),
        _ => {
            return Err(a.wrong(
                4,
                "into",
                "the iterator of the inner loop that takes the statements, a string (\"j\")",
            ));
        }
    };
    Ok(nest_value(transform::sink(&a.nest(1, "nest")?, a.int(2, "level")?, at, into.as_deref())?))
}

pub(super) fn b_split(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("split", s, a, 3, 3, "split(l, r, e)")?;
    let at = a.index(a.get(3), 3, "at")?;
    Ok(nest_value(transform::split(&a.nest(1, "nest")?, a.int(2, "level")?, &at)?))
}

pub(super) fn b_distribute(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("distribute", s, a, 2, 2, "distribute(l, r)")?;
    Ok(nest_value(transform::distribute(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

pub(super) fn b_focus(s: &State, a: &[ArgVal]) -> Result<Value> {
    let usage = "focus(l), focus(l, r) or focus(l, \"k\") / focus(l, \"k#2\")";
    let a = Args::new("focus", s, a, 1, 2, usage)?;
    let l = a.nest(1, "nest")?;
    let addr = match a.get(2) {
        ArgVal::Omitted => return Ok(nest_value(Nest { focus: Vec::new(), ..l })),
        ArgVal::Str(x) => crate::ir::LoopAddr::parse(x).ok_or_else(|| {
            a.wrong(2, "loop", "a loop's iterator, \"k\", or \"k#2\" for the second loop of iterator k")
        })?,
        ArgVal::Word(w) if s.constant(w).is_none() => crate::ir::LoopAddr::Iter(w.to_string(), None),
        _ => crate::ir::LoopAddr::Level(a.int(2, "level")?),
    };
    l.focus_on(&addr)
        .map(nest_value)
        .map_err(|(expected, found)| Error::bad_argument("focus", Arg::new(2, "loop"), expected, found))
}

pub(super) fn b_interchange(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("interchange", s, a, 2, 3, "interchange(l, r1, r2) or interchange(l, [r1, r2])")?;
    let l = a.nest(1, "nest")?;
    let (r1, r2) = if a.args.len() == 3 {
        (a.int(2, "level")?, a.int(3, "level")?)
    } else {
        match a.ints(2, "levels")?.as_slice() {
            [r1, r2] => (*r1, *r2),
            _ => return Err(a.wrong(2, "levels", "two levels [r1, r2]")),
        }
    };
    Ok(nest_value(transform::interchange(&l, r1, r2)?))
}

pub(super) fn b_fuse_outer(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("fuse_outer", s, a, 3, 3, "fuse_outer(l1, l2, r)")?;
    Ok(nest_value(transform::fuse_outer(&a.nest(1, "nest")?, &a.nest(2, "nest")?, a.int(3, "level")?)?))
}

pub(super) fn b_fuse_inner(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("fuse_inner", s, a, 2, 2, "fuse_inner(l, r)")?;
    Ok(nest_value(transform::fuse_inner(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

pub(super) fn b_unroll(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("unroll", s, a, 2, 2, "unroll(l, r)")?;
    Ok(nest_value(transform::unroll(s, &a.nest(1, "nest")?, a.int(2, "level")?)?))
}

pub(super) fn b_parallelize(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("parallelize", s, a, 2, 2, "parallelize(l, r)")?;
    Ok(nest_value(transform::parallelize(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

pub(super) fn b_collapse(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("collapse", s, a, 3, 3, "collapse(l, r, n)")?;
    Ok(nest_value(transform::collapse(&a.nest(1, "nest")?, a.int(2, "level")?, a.int(3, "count")?)?))
}

pub(super) fn b_vectorize(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("vectorize", s, a, 2, 3, "vectorize(l, r) or vectorize(l, r, bits)")?;
    let bits = match a.get(3) {
        ArgVal::Omitted => 0,
        _ => {
            let b = a.int(3, "bits")?;
            u32::try_from(b).map_err(|_| {
                Error::bad_argument(
                    "vectorize",
                    Arg::new(3, "bits"),
                    "a vector width: 128, 256 or 512",
                    b.to_string(),
                )
            })?
        }
    };
    Ok(nest_value(transform::vectorize(&a.nest(1, "nest")?, a.int(2, "level")?, bits)?))
}

pub(super) fn b_dot(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("dot", s, a, 2, 3, "dot(l, r) or dot(l, r, isa)")?;
    let isa = match a.get(3) {
        ArgVal::Omitted => None,
        ArgVal::Str(x) => Some(x.clone()),
        ArgVal::Word(w) => Some(w.to_string()),
        _ => {
            return Err(a.wrong(
                3,
                "instruction",
                "a CPU flag: \"avx512_bf16\", \"avx512_vnni\" or \"avx_vnni\"",
            ));
        }
    };
    Ok(nest_value(transform::dot(&a.nest(1, "nest")?, a.int(2, "level")?, isa.as_deref())?))
}

pub(super) fn b_amx(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("amx", s, a, 2, 2, "amx(l, r)")?;
    Ok(nest_value(transform::amx(&a.nest(1, "nest")?, a.int(2, "level")?)?))
}

pub(super) fn b_stream(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("stream", s, a, 3, 3, "stream(l, r, T)")?;
    Ok(nest_value(transform::stream(&a.nest(1, "nest")?, a.int(2, "level")?, &a.real_tensor_name(3)?)?))
}

pub(super) fn b_registers(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("registers", s, a, 3, 3, "registers(l, r, T)")?;
    Ok(nest_value(transform::registers(&a.nest(1, "nest")?, a.int(2, "level")?, &a.real_tensor_name(3)?)?))
}

pub(super) fn b_result(s: &State, a: &[ArgVal]) -> Result<State> {
    declare(s, a, crate::ir::Role::Result)
}

pub(super) fn b_temporary(s: &State, a: &[ArgVal]) -> Result<State> {
    declare(s, a, crate::ir::Role::Temporary)
}

/// `result(T, ...)` / `temporary(T, ...)`: each tensor's role. A later declaration replaces
/// an earlier one (the lines `auto.teml` and generated spaces add after the program's text);
/// one the command line gave (`--result`, `--temporary`) stays, as `-D` overrides `N = ...`.
fn declare(s: &State, a: &[ArgVal], role: crate::ir::Role) -> Result<State> {
    let b = role.builtin();
    let sig = if role == crate::ir::Role::Result { "result(T1, T2, ...)" } else { "temporary(T1, T2, ...)" };
    let a = Args::new(b, s, a, 1, usize::MAX, sig)?;
    let mut out = s.clone();
    for pos in 1..=a.args.len() {
        let t = a.real_tensor_name(pos)?;
        if !s.roles_given.contains(&t) {
            out.roles.insert(t, role);
        }
    }
    Ok(out)
}

/// Refuses contracting a declared result (`store_at`, `privatize`): its values are kept.
fn not_a_declared_result(s: &State, b: &str, pos: usize, t: &Name) -> Result<()> {
    if s.is_result(t) {
        return Err(Error::bad_argument(
            b,
            Arg::new(pos, "tensor"),
            "a temporary (a tensor the program does not declare a result)",
            format!("`{t}`, declared a result (`result({t})`): its values after the kernel are kept whole"),
        ));
    }
    Ok(())
}

pub(super) fn b_store_at(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("store_at", s, a, 3, 4, "store_at(l, r, T) or store_at(l, r, T, order)")?;
    let order = a.order(4)?;
    let t = a.real_tensor_name(3)?;
    not_a_declared_result(s, "store_at", 3, &t)?;
    Ok(nest_value(transform::store_at(s, &a.nest(1, "nest")?, a.int(2, "level")?, &t, &order)?))
}

pub(super) fn b_privatize(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("privatize", s, a, 3, 3, "privatize(l, r, T)")?;
    let t = a.real_tensor_name(3)?;
    not_a_declared_result(s, "privatize", 3, &t)?;
    Ok(nest_value(transform::privatize(s, &a.nest(1, "nest")?, a.int(2, "level")?, &t)?))
}

pub(super) fn b_in_place(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("in_place", s, a, 3, 3, "in_place(l, y, x)")?;
    Ok(nest_value(transform::in_place(
        s,
        &a.nest(1, "nest")?,
        &a.real_tensor_name(2)?,
        &a.real_tensor_name(3)?,
    )?))
}

pub(super) fn b_regroup(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("regroup", s, a, 4, 5, "regroup(l, T, d, V) or regroup(l, T, d, V, pad)")?;
    let pad = match a.get(5) {
        ArgVal::Omitted => false,
        _ => a.int(5, "pad")? != 0,
    };
    let nest = a.nest(1, "nest")?;
    Ok(nest_value(transform::regroup(
        s,
        &nest,
        &a.real_tensor_name(2)?,
        a.int(3, "dimension")?,
        a.int(4, "width")?,
        pad,
    )?))
}

pub(super) fn b_permute_layout(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("permute_layout", s, a, 3, 3, "permute_layout(l, T, order)")?;
    Ok(nest_value(transform::permute_layout(
        &a.nest(1, "nest")?,
        &a.real_tensor_name(2)?,
        &a.ints(3, "order")?,
    )?))
}

pub(super) fn b_pad(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new("pad", s, a, 4, 5, "pad(l, T, d, m) or pad(l, T, d, m, extra)")?;
    let extra = match a.get(5) {
        ArgVal::Omitted => 0,
        _ => a.int(5, "extra")?,
    };
    Ok(nest_value(transform::pad(
        &a.nest(1, "nest")?,
        &a.real_tensor_name(2)?,
        a.int(3, "dimension")?,
        a.int(4, "multiple")?,
        extra,
    )?))
}

pub(super) fn b_pack(s: &State, a: &[ArgVal]) -> Result<Value> {
    let a = Args::new(
        "pack",
        s,
        a,
        3,
        6,
        "pack(l, r, T), pack(l, r, T, order), pack(l, r, T, order, pad) or pack(l, r, T, order, pad, group)",
    )?;
    let order = a.order(4)?;
    let pad = match a.get(5) {
        ArgVal::Omitted => 1,
        _ => usize::try_from(a.int(5, "pad")?).unwrap_or(0),
    };
    let group = match a.get(6) {
        ArgVal::Omitted => 1,
        _ => usize::try_from(a.int(6, "group")?).unwrap_or(0),
    };
    let layout = crate::ir::PackLayout { order, pad, group };
    Ok(nest_value(transform::pack(
        &a.nest(1, "nest")?,
        a.int(2, "level")?,
        &a.real_tensor_name(3)?,
        &layout,
    )?))
}

pub(super) fn b_init(s: &State, a: &[ArgVal]) -> Result<State> {
    let a = Args::new("init", s, a, 2, 2, "init(t, random | number | \"file.npy\")")?;
    let name = a.word(1).cloned().ok_or_else(|| a.wrong(1, "tensor", "the identifier of a real tensor"))?;
    if s.real_tensor(&name).is_none() {
        return Err(match s.get(&name) {
            None => Error::UnknownIdentifier {
                builtin: "init".into(),
                arg: Arg::new(1, "tensor"),
                name: name.to_string(),
            },
            Some(v) => Error::WrongKind {
                builtin: "init".into(),
                arg: Arg::new(1, "tensor"),
                expected: "a real tensor (declared with tensor, or assigned)".into(),
                found: v.kind(),
            },
        });
    }
    let init = match a.get(2) {
        ArgVal::Word(w) if &**w == "random" => Init::Random,
        ArgVal::Int(i) => Init::Value(*i as f64),
        ArgVal::Float(x) => Init::Value(*x),
        ArgVal::Index(e) if e.as_const().is_some() => Init::Value(e.constant() as f64),
        ArgVal::Str(p) => Init::Npy(p.clone()),
        _ => return Err(a.wrong(2, "data", "random, a number or a \"file.npy\" path")),
    };
    let mut out = s.clone();
    out.inits.insert(name, init);
    Ok(out)
}

pub(super) fn b_codegen(s: &State, a: &[ArgVal]) -> Result<State> {
    let a = Args::new("codegen", s, a, 1, usize::MAX, "codegen(l1, l2, ..., \"name\")")?;
    let mut req = KernelRequest::default();
    let mut nests = a.args.len();
    if let Some(ArgVal::Str(label)) = a.args.last() {
        if !crate::ir::is_c_ident(label) || nests == 1 {
            return Err(a.wrong(
                nests,
                "name",
                "nests, then the kernel's name as a C identifier (\"mm_tiled\")",
            ));
        }
        req.label = Some(label.clone());
        nests -= 1;
    }
    for pos in 1..=nests {
        let nest = a.nest(pos, "nest")?;
        if let Some((o, v)) =
            nest.origin.iter().find_map(|o| o.domain().free.first().map(|v| (o.clone(), v.clone())))
        {
            return Err(Error::bad_argument(
                "codegen",
                Arg::new(pos, "nest"),
                format!("a nest whose every iterator a loop binds (wrap it: around({v}, [lb, ub], ...))"),
                format!("`{o}`, which uses `{v}` and has no loop over it"),
            ));
        }
        req.nests.push(nest);
        req.names.push(a.word(pos).cloned().unwrap_or_else(|| Name::from(format!("nest{pos}").as_str())));
    }
    // Validate now what `teml run` would refuse when generating C (marks that cannot be
    // realized, ...): the refusal is then this statement's error, in every front-end and in
    // `teml check`. No C is generated here.
    let named = req.named();
    crate::analysis::kernel::realizable(s, &named)?;
    let mut out = s.clone();
    out.kernels.push(req);
    Ok(out)
}
