//! C code generation: loop nests to one readable C99 translation unit.
//!
//! Arrays are passed as pointers to arrays (`double (*restrict A)[N]`) and indexed naturally
//! (`A[i][j]`); named constants are `#define`d; names are kept, except that a C keyword gets a
//! suffix (`do_`) and so does a tensor named like an iterator (`i_`); unrolled statements are
//! laid out one per line. Marks become OpenMP pragmas. Whether a mark is legal is decided
//! before code generation, by isl: the builtin registry refuses, after every transformation
//! (`parallelize` and `vectorize` included), a nest with a marked loop that carries a
//! dependence other than a reduction ([`crate::ops::registry::legal`],
//! [`crate::analysis::legality`]; skipped under `--unchecked`). How a legal mark is realized is
//! asked of [`crate::analysis::kernel::realise`], the same question a `codegen` statement asks
//! to validate its request: its pragma as it is (iterations that carry no dependence, or write
//! disjoint elements), private accumulators with a `reduction(+: ...)` clause (a reduction into
//! elements fixed for the loop, [`crate::analysis::reduction`]), or a refusal with the reason.
//! This module only prints. Accumulators that a contraction introduces are zeroed at the first
//! update of each element, in the transformed order ([`crate::analysis::zeroing`]).
//!
//! The translation unit exports the kernel (`void <name>(...)`) and `void teml_entry(void
//! **args)`, which calls it with the buffers in parameter order.

use crate::analysis::kernel;
use crate::analysis::reduction::Plan;
use crate::analysis::storage;
use crate::analysis::vector::{self, Lanes, Target};
use crate::analysis::zeroing::{self, GNode, Zero};
use crate::error::{Error, Result};
use crate::ir::{
    Atom, DType, Expr, Func, Iters, Loop, Lowered, Name, Nest, Op, State, TNode, Update, is_c_ident, lower,
};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::rc::Rc;
use std::sync::Arc;

/// Name of the generic entry point every generated translation unit exports.
pub const ENTRY: &str = "teml_entry";

/// A kernel parameter: one real tensor (or scalar).
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// Identifier (the teml name: the runtime finds the tensor's data by it).
    pub name: Name,
    /// The spelling in the generated C (the teml name unless that is a C keyword or clashes
    /// with another name of the kernel: then it gets a suffix, as `do_`).
    pub c_name: String,
    /// Element type.
    pub dtype: DType,
    /// Extents (empty for a scalar).
    pub dims: Vec<Expr>,
    /// Written by some statement.
    pub written: bool,
    /// The buffer holds this tensor's data at entry (a result stored over its operand by
    /// `in_place`: `name` is the result, `holds` the operand the statements read and write).
    pub holds: Option<Name>,
    /// The kernel writes every element before reading any: what the buffer holds at entry does
    /// not matter (timed runs need not restore it).
    pub fresh: bool,
}

impl Param {
    /// The tensor the statements access through this parameter (the operand, for a result
    /// stored over it).
    pub fn accessed(&self) -> &Name {
        self.holds.as_ref().unwrap_or(&self.name)
    }

    /// Number of elements, with the named constants `state` binds.
    pub fn len(&self, state: &State) -> std::result::Result<usize, Name> {
        let mut n: usize = 1;
        for d in &self.dims {
            n = n.saturating_mul(usize::try_from(d.eval(&|v| state.constant(v))?).unwrap_or(0));
        }
        Ok(n)
    }

    /// The extents as integers.
    pub fn extents(&self, state: &State) -> std::result::Result<Vec<usize>, Name> {
        self.dims.iter().map(|d| d.eval(&|v| state.constant(v)).map(|x| x.max(0) as usize)).collect()
    }

    /// True for a rank-0 tensor.
    pub fn is_scalar(&self) -> bool {
        self.dims.is_empty()
    }
}

/// A generated kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct CKernel {
    /// The C source.
    pub source: String,
    /// The kernel function's name.
    pub name: String,
    /// Parameters, in order (also the order of `teml_entry`'s `args`).
    pub params: Vec<Param>,
    /// Named constants the source uses.
    pub consts: Vec<Name>,
    /// Their spellings in the C source (`consts[k]` is `const_c_names[k]`).
    pub const_c_names: Vec<String>,
    /// The C type each parameter is cast to from `void *` (`double (*)[N]`), in order.
    pub casts: Vec<String>,
}

/// Generates one kernel running `nests` in order, for the host's vectors ([`Target::native`]).
pub fn generate(state: &State, name: &str, nests: &[(Name, Nest)]) -> Result<CKernel> {
    generate_for(state, name, nests, &Target::native())
}

/// Generates one kernel running `nests` in order, for the host's vectors, keeping the tensors
/// of `keep` whole (`-o` saves them): no temporary among them is stored per iteration.
pub fn generate_keeping(
    state: &State,
    name: &str,
    nests: &[(Name, Nest)],
    keep: &BTreeSet<Name>,
) -> Result<CKernel> {
    generate_with(state, name, nests, &Target::native(), keep)
}

/// Generates one kernel running `nests` in order, with explicit vectors of `target`'s width.
pub fn generate_for(state: &State, name: &str, nests: &[(Name, Nest)], target: &Target) -> Result<CKernel> {
    generate_with(state, name, nests, target, &BTreeSet::new())
}

fn generate_with(
    state: &State,
    name: &str,
    nests: &[(Name, Nest)],
    target: &Target,
    keep: &BTreeSet<Name>,
) -> Result<CKernel> {
    let unrealizable = |reason: String| Error::Unrealizable { builtin: "codegen".into(), reason };
    if !is_c_ident(name) {
        return Err(Error::BadArgument {
            builtin: "codegen".into(),
            arg: crate::error::Arg::new(nests.len() + 1, "name"),
            expected: "a C identifier as kernel name".into(),
            found: format!("`{name}`"),
        });
    }
    // Temporaries that live within one iteration of a loop after fusion are stored there.
    let (contracted, auto) = storage::contract(state, nests, keep);
    let nests = contracted.as_slice();
    let mut local: BTreeSet<Name> = BTreeSet::new();
    for (_, n) in nests {
        for (_, l) in storage::marked(n.items()) {
            local.extend(l.annot.store_at.iter().cloned());
        }
    }
    // Tensors with a copy per iteration of a loop (`privatize`): the kernel holds them.
    let expanded: BTreeSet<Name> =
        nests.iter().flat_map(|(_, n)| n.expanded.values().map(|x| x.buffer.clone())).collect();
    if let Some(t) = nests.iter().flat_map(|(_, n)| n.expanded.keys()).find(|t| keep.contains(*t)) {
        return Err(unrealizable(format!(
            "`{t}` has a copy per iteration of a loop (privatize), so its values are not kept after the \
             kernel; expected no -o for it, or no privatize"
        )));
    }
    if let Some(t) = local.iter().find(|t| keep.contains(*t)) {
        return Err(unrealizable(format!(
            "`{t}` is stored per iteration of a loop (store_at), so its values are not kept after the \
             kernel; expected no -o for it, or no store_at"
        )));
    }
    // Tensors stored in another layout: one per tensor across the kernel's nests.
    let mut layouts: BTreeMap<Name, crate::ir::Layout> = BTreeMap::new();
    for (nname, n) in nests {
        for (t, lay) in &n.layouts {
            if local.contains(t) {
                return Err(unrealizable(format!(
                    "`{t}` has a layout in `{nname}` and is stored per iteration of a loop: expected one of the two"
                )));
            }
            match layouts.get(t) {
                Some(other) if other != lay => {
                    return Err(unrealizable(format!(
                        "`{t}` has two layouts in the kernel: expected one layout per tensor"
                    )));
                }
                _ => {
                    layouts.insert(t.clone(), lay.clone());
                }
            }
        }
    }
    let (tensors, iters, consts) = kernel::layout(state, nests)?;
    let mut params: Vec<Param> = tensors
        .into_iter()
        .map(|t| Param {
            c_name: t.name.to_string(),
            name: t.name,
            dtype: t.dtype,
            dims: t.dims,
            written: t.written,
            holds: None,
            fresh: false,
        })
        .collect();
    let names = Rc::new(CNames::new(name, iters.iter().chain(&consts), params.iter().map(|p| &p.name)));
    for p in params.iter_mut() {
        p.c_name = names.tensor(&p.name).to_string();
    }
    // A result stored over its operand: the operand's buffer is the result's parameter.
    for (_, n) in nests {
        for (y, x) in &n.over {
            if let Some(p) = params.iter_mut().find(|p| &p.name == x) {
                p.holds = Some(x.clone());
                p.name = y.clone();
            }
        }
    }
    // A tensor stored per iteration is no parameter: the kernel holds it.
    params.retain(|p| !local.contains(&p.name));
    for p in params.iter_mut() {
        p.fresh = p.written
            && p.holds.is_none()
            && !layouts.contains_key(&p.name)
            && computed_afresh(nests, &p.name);
    }

    let mut body = String::new();
    let mut helpers = Helpers { names: names.clone(), ..Helpers::default() };
    let mut acc_count = 0;
    // Each laid-out tensor: its buffer, filled from the tensor at entry.
    let mut laid: BTreeMap<Name, (String, crate::ir::Layout)> = BTreeMap::new();
    let mut epilogue = String::new();
    // The temporaries of `lift` (not kept with -o, not stored per iteration) are the kernel's
    // own: allocated per call, never parameters, never converted.
    let internal: BTreeSet<Name> = nests
        .iter()
        .flat_map(|(_, n)| n.temps().cloned())
        .chain(expanded.iter().cloned())
        .filter(|t| !keep.contains(t) && !local.contains(t) && params.iter().any(|p| &p.name == t))
        .collect();
    for (t, lay) in &layouts {
        let Some(p) = params.iter().find(|p| &p.name == t) else { continue };
        helpers.packs = true;
        let (buf, prologue, back) = convert(p, lay, &mut helpers, !internal.contains(t));
        body.push_str(&prologue);
        epilogue.push_str(&back);
        laid.insert(t.clone(), (buf, lay.clone()));
    }
    for p in params.iter().filter(|p| internal.contains(&p.name) && !layouts.contains_key(&p.name)) {
        helpers.packs = true;
        let what = if expanded.contains(&p.name) {
            "a copy per iteration of a loop (privatize)"
        } else {
            "a temporary of `lift`"
        };
        let (prologue, back) = own_buffer(p, what, &mut helpers);
        body.push_str(&prologue);
        epilogue.push_str(&back);
    }
    // What lanes and registers are asked of: the buffers every access prints through.
    let buffers: vector::Layouts = laid.iter().map(|(t, (_, lay))| (t.clone(), lay.clone())).collect();
    for (k, (nname, n)) in nests.iter().enumerate() {
        if k > 0 {
            body.push('\n');
        }
        let _ = writeln!(body, "  /* {nname} */");
        let mut cx = Cx {
            out: String::new(),
            helpers: &mut helpers,
            accs: BTreeMap::new(),
            acc_count: &mut acc_count,
            params: &params,
            state,
            nest: n,
            collapsed: 0,
            target: *target,
            outer: Vec::new(),
            bands: Vec::new(),
            packed: Vec::new(),
            known: Vec::new(),
            tested: Vec::new(),
            parts: Vec::new(),
            guarded: n.stmts().iter().any(|s| !s.guard().is_empty()),
            auto: auto.iter().filter(|(j, _, _)| *j == k).map(|(_, t, _)| t.clone()).collect(),
            laid: &laid,
            buffers: &buffers,
            stream: None,
        };
        for g in &zeroing::place(n.items()) {
            cx.node(g, 1).map_err(unrealizable)?;
        }
        body.push_str(&cx.out);
    }
    body.push_str(&epilogue);

    // Extents may use the helpers too (an inferred `min(N-2, 2)`): the parameters need them.
    for p in &params {
        p.dims.iter().for_each(|d| {
            c_expr(d, &mut helpers, false);
        });
    }
    params.retain(|p| !internal.contains(&p.name));
    let mut src = String::new();
    let nest_names: Vec<&str> = nests.iter().map(|(n, _)| &**n).collect();
    let _ = writeln!(
        src,
        "/* Generated by teml {}: kernel `{name}` runs {} in order. */",
        env!("CARGO_PKG_VERSION"),
        nest_names.join(", ")
    );
    src.push('\n');
    if helpers.math {
        src.push_str("#include <math.h>\n");
        if !helpers.packs && helpers.streams.is_empty() {
            src.push('\n');
        }
    }
    if !helpers.streams.is_empty() {
        src.push_str(
            "#include <stdint.h>\n#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n",
        );
        if !helpers.packs {
            src.push('\n');
        }
    }
    if helpers.packs {
        src.push_str("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n");
        if helpers.layouts {
            src.push_str(LAYOUT_BUFFER);
        }
        src.push('\n');
    }
    for teml_name in &consts {
        let c = names.var(teml_name);
        match state.constant(teml_name) {
            Some(v) => {
                let _ = writeln!(src, "#ifndef {c}\n#define {c} {v}\n#endif");
            }
            None => {
                let _ = writeln!(
                    src,
                    "#ifndef {c}\n#error \"named constant {c} is not bound: give -D {c}=INT\"\n#endif"
                );
            }
        }
    }
    if !consts.is_empty() {
        src.push('\n');
    }
    if helpers.min {
        src.push_str("static inline int teml_min(int a, int b) { return a < b ? a : b; }\n");
    }
    if helpers.max {
        src.push_str("static inline int teml_max(int a, int b) { return a > b ? a : b; }\n");
    }
    if helpers.floordiv {
        src.push_str(
            "static inline int teml_floordiv(int a, int b) { return (a >= 0 ? a : a - b + 1) / b; }\n",
        );
    }
    if helpers.min || helpers.max || helpers.floordiv {
        src.push('\n');
    }
    if !helpers.vtypes.is_empty() {
        src.push_str(
            "/* Explicit vectors (GCC/Clang vector extensions): unaligned, and allowed to alias their elements. */\n",
        );
        for (dtype, w) in &helpers.vtypes {
            let (ty, vt) = (dtype.c_name(), vtype(*dtype, *w));
            let bytes = w * dtype.size();
            let align = dtype.size();
            let _ = writeln!(
                src,
                "typedef {ty} {vt} __attribute__((vector_size({bytes}), aligned({align}), may_alias));"
            );
        }
        for (dtype, w) in &helpers.splats {
            let (ty, vt) = (dtype.c_name(), vtype(*dtype, *w));
            let _ = writeln!(src, "static inline {vt} teml_splat_{vt}({ty} x) {{ return x - ({vt}){{0}}; }}");
        }
        for (dtype, w) in &helpers.hsums {
            let (ty, vt) = (dtype.c_name(), vtype(*dtype, *w));
            let _ = writeln!(
                src,
                "static inline {ty} teml_hsum_{vt}({vt} v) {{ {ty} s = 0; for (int l = 0; l < {w}; l++) s += v[l]; return s; }}"
            );
        }
        for (dtype, w, max) in &helpers.extremes {
            src.push_str(&extreme_helper(*dtype, *w, *max));
        }
        for (dtype, w) in &helpers.streams {
            src.push_str(&stream_helper(*dtype, *w));
        }
        if !helpers.streams.is_empty() {
            src.push_str(STREAM_FENCE);
        }
        src.push('\n');
    }
    for p in params.iter().filter(|p| p.holds.is_some()) {
        let x = p.holds.as_ref().map_or("", |x| &**x);
        let _ = writeln!(src, "/* in place: `{x}` holds {x} at entry and {} at exit */", p.name);
    }
    let decls: Vec<String> = params.iter().map(|p| param_decl(p, &names)).collect();
    let _ = writeln!(src, "void {name}({})\n{{\n{body}}}\n", decls.join(", "));
    let cast_types: Vec<String> = params.iter().map(|p| param_cast(p, &names)).collect();
    let casts: Vec<String> = cast_types.iter().enumerate().map(|(k, c)| format!("({c})args[{k}]")).collect();
    let _ = writeln!(src, "void {ENTRY}(void **args)\n{{\n  {name}({});\n}}", casts.join(", "));
    let const_c_names = consts.iter().map(|c| names.var(c).to_string()).collect();
    Ok(CKernel { source: src, name: name.to_string(), params, consts, const_c_names, casts: cast_types })
}

/// The name of `fmax` (`max`) or `fmin` of vectors of `w` lanes of `dtype`.
fn extreme_name(dtype: DType, w: usize, max: bool) -> String {
    format!("teml_{}_{}", if max { "fmax" } else { "fmin" }, vtype(dtype, w))
}

/// `fmax` or `fmin` lane by lane, in the vector extensions (a comparison is a mask of the
/// lanes): C's semantics, a NaN operand yielding the other one, so that the explicit vectors
/// agree with the scalar remainder and the reference to the bit.
fn extreme_helper(dtype: DType, w: usize, max: bool) -> String {
    let vt = vtype(dtype, w);
    let (name, cmp) = (extreme_name(dtype, w, max), if max { ">=" } else { "<=" });
    format!(
        "static inline {vt} {name}({vt} a, {vt} b) {{ __typeof__(a < b) k = (a {cmp} b) | (b != b); \
         return ({vt})((k & (__typeof__(k))a) | (~k & (__typeof__(k))b)); }}\n"
    )
}

/// True if the first of `nests` that accesses `t` only writes it, each statement setting every
/// element or summing into it from zero (an accumulator zeroed at its first update; `build`
/// makes statements that write their whole target): the kernel's result does not depend on
/// what `t` held at entry.
fn computed_afresh(nests: &[(Name, Nest)], t: &Name) -> bool {
    let Some((_, n)) = nests.iter().find(|(_, n)| n.rank_of(t).is_some()) else { return false };
    n.stmts().iter().all(|s| {
        let Some(lw) = lower(s) else { return false };
        let mut reads = false;
        lw.rhs.visit(&mut |x| reads |= x.id() == Some(t));
        let target = lw.target.id() == Some(t);
        // A statement writing affine positions (an interior, a slice) leaves the rest as it was.
        let whole = lw.target.index_list().is_none_or(|xs| xs.iter().all(|x| x.as_var().is_some()));
        !reads && (!target || (whole && (lw.update == Update::Set || lw.first.is_some())))
    })
}

/// The allocation of a whole-tensor layout buffer: zeroed pages straight from the system, in
/// huge pages where it gives them. (With `calloc`, each call of a kernel took a page fault per
/// 4 KiB of a fresh buffer: a padded 4096 x 4104 input cost 100 ms where the stencil took 16.)
const LAYOUT_BUFFER: &str = "#include <sys/mman.h>\n\n\
/* A layout's buffer: zeroed pages from the system (the padding reads as zero), in 2 MiB pages\n   \
where it gives them (one page fault per 2 MiB, not per 4 KiB). */\n\
static void *teml_buffer(size_t bytes)\n{\n  \
void *p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);\n  \
if (p == MAP_FAILED) return 0;\n  madvise(p, bytes, MADV_HUGEPAGE);\n  return p;\n}\n";

/// The buffer of tensor `p` in layout `lay`: its name, the C that allocates it (zeroed: the
/// padding is defined; [`LAYOUT_BUFFER`]) and converts the tensor into it at kernel entry, and the C that converts
/// it back (if the kernel writes the tensor) and frees it at exit.
fn convert(p: &Param, lay: &crate::ir::Layout, h: &mut Helpers, copy: bool) -> (String, String, String) {
    let ty = p.dtype.c_name();
    let buf = format!("teml_{}_layout", p.c_name);
    let ext: Vec<String> = lay.extents(&p.dims).iter().map(|e| c_expr(e, h, false)).collect();
    let tail: String = ext[1..].iter().map(|e| format!("[{e}]")).collect();
    let all: String = ext.iter().map(|e| format!("[{e}]")).collect();
    let decl = if ext.len() == 1 {
        format!("{ty} *restrict {buf}")
    } else {
        format!("{ty} (*restrict {buf}){tail}")
    };
    let rank = p.dims.len();
    let qs: Vec<Expr> = (0..rank).map(|k| Expr::var(&format!("teml_q{k}"))).collect();
    // The copy runs on the kernel's threads (its rows are independent).
    let mut loops = String::from("  #pragma omp parallel for\n");
    for (k, d) in p.dims.iter().enumerate() {
        let _ = writeln!(
            loops,
            "{}for (int teml_q{k} = 0; teml_q{k} <= {}; teml_q{k}++)",
            "  ".repeat(k + 1),
            c_expr(&d.add_int(-1), h, true)
        );
    }
    let at: String = lay.map(&qs).iter().map(|x| format!("[{}]", c_expr(x, h, false))).collect();
    let src: String = (0..rank).map(|k| format!("[teml_q{k}]")).collect();
    let pad = "  ".repeat(rank + 1);
    let mut pro = String::new();
    let _ = writeln!(
        pro,
        "  /* `{}` laid out {} for this kernel: {} */",
        p.c_name,
        lay.describe(rank),
        match (copy, p.written) {
            (false, _) => "a temporary of `lift`, not converted",
            (true, true) => "converted at entry and back at exit",
            (true, false) => "converted at entry",
        }
    );
    h.layouts = true;
    let _ = writeln!(pro, "  {decl} = teml_buffer(sizeof({ty}{all}));");
    let _ = writeln!(
        pro,
        "  if (!{buf}) {{ fputs(\"teml: out of memory laying out `{}`\\n\", stderr); abort(); }}",
        p.c_name
    );
    if copy {
        pro.push_str(&loops);
        let _ = writeln!(pro, "{pad}{buf}{at} = {}{src};", p.c_name);
    }
    let mut back = String::new();
    if p.written && copy {
        let _ = writeln!(back, "  /* `{}` back to its declared shape */", p.c_name);
        back.push_str(&loops);
        let _ = writeln!(back, "{pad}{}{src} = {buf}{at};", p.c_name);
    }
    let _ = writeln!(back, "  munmap({buf}, sizeof({ty}{all}));");
    (buf, pro, back)
}

/// A temporary of `lift` the kernel holds itself: its buffer allocated at entry (as a
/// layout's) under the name its accesses use, and released at exit.
fn own_buffer(p: &Param, what: &str, h: &mut Helpers) -> (String, String) {
    let ty = p.dtype.c_name();
    let all: String = p.dims.iter().map(|d| format!("[{}]", c_expr(d, h, false))).collect();
    let decl = param_decl(p, &h.names);
    h.layouts = true;
    let mut pro = format!("  /* `{}`: {what}, held by the kernel */\n", p.c_name);
    let _ = writeln!(pro, "  {decl} = teml_buffer(sizeof({ty}{all}));");
    let _ = writeln!(
        pro,
        "  if (!{0}) {{ fputs(\"teml: out of memory for the temporary `{0}`\\n\", stderr); abort(); }}",
        p.c_name
    );
    let back = format!("  munmap({}, sizeof({ty}{all}));\n", p.c_name);
    (pro, back)
}

fn param_decl(p: &Param, names: &Rc<CNames>) -> String {
    let ty = p.dtype.c_name();
    let mut h = Helpers { names: names.clone(), ..Helpers::default() };
    match p.dims.as_slice() {
        [] | [_] => format!("{ty} *restrict {}", p.c_name),
        [_, rest @ ..] => {
            let tail: String = rest.iter().map(|d| format!("[{}]", c_expr(d, &mut h, false))).collect();
            format!("{ty} (*restrict {}){tail}", p.c_name)
        }
    }
}

fn param_cast(p: &Param, names: &Rc<CNames>) -> String {
    let ty = p.dtype.c_name();
    let mut h = Helpers { names: names.clone(), ..Helpers::default() };
    match p.dims.as_slice() {
        [] | [_] => format!("{ty} *"),
        [_, rest @ ..] => {
            let tail: String = rest.iter().map(|d| format!("[{}]", c_expr(d, &mut h, false))).collect();
            format!("{ty} (*){tail}")
        }
    }
}

/// A vectorized loop whose upper bound is a strip-mined block's `min` (a tail).
struct Tail {
    /// Its iterator.
    iter: Name,
    /// Its upper bound as written.
    ub: Expr,
    /// Its full blocks.
    block: vector::Block,
}

/// The vectorized loops below that are strip-mined blocks with a partial last one, whose
/// fullness does not change inside the band (none of the `inner` iterators decides it).
fn partial_lanes(body: &[GNode], inner: &[Name], out: &mut Vec<Tail>) {
    for g in body {
        if let GNode::Loop(l, b) = g {
            if l.annot.vectorize
                && let Some(block) = vector::block(l)
                && !block.full_when.is_empty()
                && !block.full_when.iter().any(|(a, u)| inner.iter().any(|v| a.mentions(v) || u.mentions(v)))
                && !out.iter().any(|t| t.iter == l.iter && t.ub == l.ub)
            {
                out.push(Tail { iter: l.iter.clone(), ub: l.ub.clone(), block });
            }
            partial_lanes(b, inner, out);
        }
    }
}

/// `body` with the loops of `tails` running full blocks; each new loop and the one it stands
/// for are added to `parts`.
fn full_blocks(body: &[GNode], tails: &[Tail], parts: &mut Vec<(Arc<Loop>, Arc<Loop>)>) -> Vec<GNode> {
    body.iter()
        .map(|g| match g {
            GNode::Loop(l, b) => {
                let full = tails.iter().find(|t| t.iter == l.iter && t.ub == l.ub);
                let l2 = match full {
                    Some(t) => {
                        let l2 = Arc::new(Loop { ub: t.block.full_ub.clone(), ..(**l).clone() });
                        let orig = stands_for(parts, l);
                        parts.push((l2.clone(), orig));
                        l2
                    }
                    None => l.clone(),
                };
                GNode::Loop(l2, full_blocks(b, tails, parts))
            }
            other => other.clone(),
        })
        .collect()
}

/// The nest's loop that `l` stands for (itself unless it is one of `parts`).
fn stands_for(parts: &[(Arc<Loop>, Arc<Loop>)], l: &Arc<Loop>) -> Arc<Loop> {
    parts.iter().find(|(c, _)| Arc::ptr_eq(c, l)).map_or_else(|| l.clone(), |(_, o)| o.clone())
}

/// `teml_stream_teml_d8(p, v)`: stores vector `v` at `p` (aligned to its size) with a
/// streaming (non-temporal) store where the target has one of its width, a plain store
/// otherwise (`stream`).
fn stream_helper(dtype: DType, w: usize) -> String {
    let (ty, vt) = (dtype.c_name(), vtype(dtype, w));
    let bits = w * dtype.size() * 8;
    let (isa, prefix) = match bits {
        512 => ("__AVX512F__", "_mm512"),
        256 => ("__AVX__", "_mm256"),
        128 if dtype == DType::Double => ("__SSE2__", "_mm"),
        128 => ("__SSE__", "_mm"),
        _ => ("", ""),
    };
    let plain = format!("*({vt} *)p = v;");
    let body = if isa.is_empty() {
        format!("  {plain}\n")
    } else {
        let (suffix, m) = if dtype == DType::Double { ("pd", "d") } else { ("ps", "") };
        format!(
            "#if defined({isa})\n  {prefix}_stream_{suffix}(({ty} *)p, (__m{bits}{m})v);\n#else\n  {plain}\n#endif\n"
        )
    };
    format!("static inline void teml_stream_{vt}(void *p, {vt} v)\n{{\n{body}}}\n")
}

/// Orders a thread's streaming stores before what it does next (they are weakly ordered).
const STREAM_FENCE: &str =
    "static inline void teml_stream_fence(void)\n{\n#if defined(__SSE__)\n  _mm_sfence();\n#endif\n}\n";

/// The name of the vector type of `w` lanes of `dtype`: `teml_d8` is 8 doubles.
fn vtype(dtype: DType, w: usize) -> String {
    format!("teml_{}{w}", if dtype == DType::Float { "f" } else { "d" })
}

#[derive(Default)]
struct Helpers {
    min: bool,
    max: bool,
    floordiv: bool,
    /// Vector types used: (element type, lanes).
    vtypes: BTreeSet<(DType, usize)>,
    /// Broadcasts of a whole scalar expression used.
    splats: BTreeSet<(DType, usize)>,
    /// Sums of the lanes of a vector used (partial sums stored).
    hsums: BTreeSet<(DType, usize)>,
    /// `fmax` / `fmin` lane by lane: (element type, lanes, max).
    extremes: BTreeSet<(DType, usize, bool)>,
    /// Streaming stores of vectors used (`stream`).
    streams: BTreeSet<(DType, usize)>,
    /// A function of `<math.h>` is called (`sqrt`, `fmax`, ...).
    math: bool,
    /// Some loop packs a tensor (the kernel allocates and copies).
    packs: bool,
    /// Some tensor is laid out in a buffer of its own for the kernel ([`convert`]).
    layouts: bool,
    /// The C spellings of the kernel's names.
    names: Rc<CNames>,
}

/// Words a teml name cannot be in C: the keywords of C89 to C23 and GNU C, the names the
/// generated code and `<string.h>` declare.
const C_RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Bool",
    "_Complex",
    "_Generic",
    "_Imaginary",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "_BitInt",
    "_Decimal32",
    "_Decimal64",
    "_Decimal128",
    "alignas",
    "alignof",
    "bool",
    "constexpr",
    "false",
    "nullptr",
    "static_assert",
    "thread_local",
    "true",
    "typeof",
    "typeof_unqual",
    "asm",
    "__asm__",
    "__typeof__",
    "__inline__",
    "__restrict",
    "__restrict__",
    "__attribute__",
    "__extension__",
    "__label__",
    "__thread",
    "__int128",
    "__builtin_va_list",
    "__func__",
    "__FUNCTION__",
    "__PRETTY_FUNCTION__",
    "args",
    "memset",
    "memcpy",
    "malloc",
    "free",
    "abort",
    "fputs",
    "stderr",
    "stdout",
    "FILE",
    "size_t",
    "NULL",
    "main",
];

/// The C spelling of every name a kernel uses, decided once per kernel. A name stays as it is
/// unless it is a C keyword (or a name the generated code uses: `args`, `memset`, `teml_*`,
/// the kernel's), is not a C identifier, or is already the spelling of another name (a tensor
/// named like an iterator or a named constant: iterators and constants keep theirs). Such a
/// name gets a suffix: `do` is `do_`, a tensor `i` beside iterator `i` is `i_`, then `_2`,
/// `_3`, ... where those are taken too.
#[derive(Clone, Debug, Default)]
struct CNames {
    /// Iterators and named constants (one namespace: an iterator is never a constant).
    vars: BTreeMap<Name, String>,
    /// Tensors and scalars.
    tensors: BTreeMap<Name, String>,
}

impl CNames {
    fn new<'a>(
        kernel: &str,
        vars: impl Iterator<Item = &'a Name>,
        tensors: impl Iterator<Item = &'a Name>,
    ) -> CNames {
        let reserved = |s: &str| C_RESERVED.contains(&s) || s.starts_with("teml_") || s == kernel;
        let all: Vec<(bool, Name)> =
            vars.map(|v| (false, v.clone())).chain(tensors.map(|t| (true, t.clone()))).collect();
        // Every name the kernel uses, and the spellings decided: a new one takes none of them.
        let mut used: BTreeSet<String> = all.iter().map(|(_, n)| n.to_string()).collect();
        let mut kept: BTreeSet<String> = BTreeSet::new();
        let mut out = CNames::default();
        let mut renamed = Vec::new();
        for (is_tensor, n) in &all {
            let map = if *is_tensor { &mut out.tensors } else { &mut out.vars };
            if map.contains_key(n) {
                continue;
            }
            if is_c_ident(n) && !reserved(n) && kept.insert(n.to_string()) {
                map.insert(n.clone(), n.to_string());
            } else {
                renamed.push((*is_tensor, n.clone()));
            }
        }
        for (is_tensor, n) in renamed {
            let map = if is_tensor { &mut out.tensors } else { &mut out.vars };
            if map.contains_key(&n) {
                continue;
            }
            let mut base: String =
                n.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
            if !base.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') || base.starts_with("teml_") {
                base.insert(0, 'x');
            }
            let spelling = std::iter::once(format!("{base}_"))
                .chain((2..).map(|k| format!("{base}_{k}")))
                .find(|c| !reserved(c) && !used.contains(c))
                .unwrap_or_default();
            used.insert(spelling.clone());
            map.insert(n, spelling);
        }
        out
    }

    /// The C spelling of an iterator or named constant.
    fn var<'a>(&'a self, v: &'a str) -> &'a str {
        self.vars.get(v).map_or(v, |s| s.as_str())
    }

    /// The C spelling of a tensor.
    fn tensor<'a>(&'a self, t: &'a str) -> &'a str {
        self.tensors.get(t).map_or(t, |s| s.as_str())
    }
}

/// An integer expression in C; `paren` wraps compound expressions, as in `i <= (N-1)`.
fn c_expr(e: &Expr, h: &mut Helpers, paren: bool) -> String {
    let mut s = String::new();
    let h = std::cell::RefCell::new(h);
    fn atom(a: &Atom, f: &mut dyn std::fmt::Write, h: &std::cell::RefCell<&mut Helpers>) -> std::fmt::Result {
        match a {
            Atom::Var(v) => {
                let h = h.borrow();
                f.write_str(h.names.var(v))
            }
            Atom::Min(xs) | Atom::Max(xs) => {
                let is_min = matches!(a, Atom::Min(_));
                if is_min {
                    h.borrow_mut().min = true;
                } else {
                    h.borrow_mut().max = true;
                }
                let fname = if is_min { "teml_min" } else { "teml_max" };
                // teml_min(a, teml_min(b, c))
                for x in &xs[..xs.len() - 1] {
                    write!(f, "{fname}(")?;
                    x.write_with(f, &|a, f| atom(a, f, h))?;
                    f.write_str(", ")?;
                }
                xs[xs.len() - 1].write_with(f, &|a, f| atom(a, f, h))?;
                for _ in 1..xs.len() {
                    f.write_str(")")?;
                }
                Ok(())
            }
            Atom::FloorDiv(x, d) => {
                h.borrow_mut().floordiv = true;
                f.write_str("teml_floordiv(")?;
                x.write_with(f, &|a, f| atom(a, f, h))?;
                write!(f, ", {d})")
            }
        }
    }
    let _ = e.write_with(&mut s, &|a, f| atom(a, f, &h));
    if paren && e.is_compound() && e.as_const().is_none() { format!("({s})") } else { s }
}

/// A block of lanes of an explicit vector loop: its iterator stands for `base`, `base+1`, ...,
/// `base+width-1`.
struct Lane {
    iter: Name,
    base: Expr,
    width: usize,
    dtype: DType,
}

/// A tensor packed by a loop around the one being printed.
#[derive(Clone, Debug)]
struct Packed {
    tensor: Name,
    /// The buffer's C name.
    buf: String,
    /// The block's first element in the tensor.
    lo: Vec<Expr>,
    /// The block's dimensions in the buffer's order (those of extent 1 in a buffer per
    /// iteration left out).
    order: Vec<usize>,
    /// The tensor's rank.
    rank: usize,
}

/// A loop marked `registers`, being printed: the variables its body has asked for so far.
struct Band {
    /// The tensors it keeps.
    tensors: Vec<Name>,
    /// Its iterator and those of the loops inside it.
    inner: Vec<Name>,
    /// The variables, in order of first use.
    regs: Vec<Reg>,
}

/// One variable of a band: an element, or a block of lanes.
struct Reg {
    /// The C text of the memory it stands for (an lvalue).
    mem: String,
    /// The variable.
    var: String,
    /// Its C type.
    ty: String,
    /// What it is looked up by: the memory, and for a sum, the block of lanes.
    key: String,
    /// Written in the band (stored back after it).
    written: bool,
    /// A vector of partial sums of one element (every lane adds to it): loaded into lane 0
    /// of the first such variable, stored as the sum of all lanes of all of them.
    summed: Option<(DType, usize)>,
}

struct Cx<'a> {
    out: String,
    helpers: &'a mut Helpers,
    /// Target accesses summed in private accumulators: access text -> variable.
    accs: BTreeMap<String, String>,
    acc_count: &'a mut usize,
    params: &'a [Param],
    /// The named constants.
    state: &'a State,
    /// The nest being printed (the legality analysis reads its statements' instances).
    nest: &'a Nest,
    /// Loops still to print inside a collapsed band (they get no pragma of their own).
    collapsed: usize,
    /// The vectors explicit vector loops use.
    target: Target,
    /// The loops around the one being printed, outermost first.
    outer: Vec<Loop>,
    /// The `registers` loops around the statement being printed, outermost first.
    bands: Vec<Band>,
    /// The packed tensors of the loops around.
    packed: Vec<Packed>,
    /// Conditions `g >= 0` that hold here (the main part of a split loop): statements guarded
    /// by them print without a test.
    known: Vec<Expr>,
    /// Conditions a loop around split on that do not hold everywhere here (its remainder):
    /// tested at each statement, not split on again.
    tested: Vec<Expr>,
    /// Loops printed with other bounds or marks than the nest's (the parts of a split loop, a
    /// packed loop, full blocks of lanes), and the nest's loop each stands for: dependence
    /// analysis finds loops by identity.
    parts: Vec<(Arc<Loop>, Arc<Loop>)>,
    /// Some statement of the nest is guarded (an unrolled partial block): only then can a loop
    /// split (the walk is skipped for every other nest).
    guarded: bool,
    /// The tensors code generation stores per iteration on its own (not the program's
    /// `store_at`).
    auto: Vec<Name>,
    /// Tensors stored in another layout: their buffer and layout.
    laid: &'a BTreeMap<Name, (String, crate::ir::Layout)>,
    /// `laid`'s layouts, whichever nest set them: what lanes and registers are asked of, as
    /// every access prints through them.
    buffers: &'a vector::Layouts,
    /// In the whole vectors of a streaming loop (`stream`): the tensor and the index whose
    /// stores are streamed (the access the loop was peeled to align).
    stream: Option<(Name, Vec<Expr>)>,
}

impl Cx<'_> {
    fn line(&mut self, depth: usize, s: &str) {
        let _ = writeln!(self.out, "{}{s}", "  ".repeat(depth));
    }

    fn node(&mut self, x: &GNode, depth: usize) -> std::result::Result<(), String> {
        match x {
            GNode::Zero(z) => self.zero(z, None, depth),
            GNode::Stmt(s) => {
                let Some(lw) = lower(s) else { return Err(format!("not an assignment: {s}")) };
                self.stmt(&lw, None, depth)
            }
            GNode::Loop(l, body) => self.loop_(l, body, depth),
        }
    }

    /// `target (=|+=) rhs;`, scalar or for one block of lanes.
    fn stmt(&mut self, lw: &Lowered, lane: Option<&Lane>, depth: usize) -> std::result::Result<(), String> {
        let mut vector = false;
        let rhs = self.c_value(&lw.rhs, lane, &mut vector)?;
        let target = lw.target.access();
        // A private accumulator of a reduction loop: `-=` sums what is subtracted.
        let acc = self.accs.get(&target).filter(|_| lw.update.accumulates() && lane.is_none()).cloned();
        let op = match (lw.update, &acc) {
            (Update::Set | Update::Max | Update::Min, _) => "=",
            (Update::Sub, None) => "-=",
            _ => "+=",
        };
        let lhs = match acc {
            Some(acc) => acc,
            None => self.mem(&lw.target, lane, true)?.0,
        };
        let rhs = match (lw.update, lane) {
            // Whole vectors of the target (the lanes run along its index: `vector_lanes` refuses
            // a `max` reduction across the lanes).
            (Update::Max | Update::Min, Some(ln)) if ln.width > 1 => {
                let r = self.extreme(ln, lw.update == Update::Max, (&lhs, true), (&rhs, vector));
                vector = true;
                r
            }
            (Update::Max | Update::Min, _) => {
                self.helpers.math = true;
                let f = if lw.update == Update::Max { Func::Max } else { Func::Min };
                format!("{}({lhs}, {rhs})", f.c_name(lw.target.dtype))
            }
            _ => rhs,
        };
        let rhs = match lane {
            Some(ln) if ln.width > 1 && !vector => self.splat(ln, &rhs),
            _ => rhs,
        };
        // A whole vector of the tensor a streaming loop stores: a streaming store.
        let streamed = match (lane, &self.stream) {
            (Some(ln), Some((t, index)))
                if ln.width > 1
                    && lw.update == Update::Set
                    && lw.target.id() == Some(t)
                    && lw.target.index_list() == Some(index.as_slice()) =>
            {
                let vt = vtype(ln.dtype, ln.width);
                lhs.strip_prefix(&format!("*({vt} *)")).map(|p| format!("teml_stream_{vt}({p}, {rhs});"))
            }
            _ => None,
        };
        let text = streamed.unwrap_or_else(|| format!("{lhs} {op} {rhs};"));
        match self.test(&lw.when) {
            Some(test) => {
                self.line(depth, &test);
                self.line(depth + 1, &text);
            }
            None => self.line(depth, &text),
        }
        Ok(())
    }

    /// A scalar expression broadcast to every lane.
    fn splat(&mut self, ln: &Lane, x: &str) -> String {
        self.helpers.splats.insert((ln.dtype, ln.width));
        format!("teml_splat_{}({x})", vtype(ln.dtype, ln.width))
    }

    /// `fmax(a, b)` (or `fmin`) over lanes `ln` of two operands, each `(text, is a vector)`:
    /// a scalar one broadcast to every lane.
    fn extreme(&mut self, ln: &Lane, max: bool, a: (&str, bool), b: (&str, bool)) -> String {
        let [a, b] = [a, b].map(|(x, v)| if v { x.to_string() } else { self.splat(ln, x) });
        self.helpers.vtypes.insert((ln.dtype, ln.width));
        self.helpers.extremes.insert((ln.dtype, ln.width, max));
        format!("{}({a}, {b})", extreme_name(ln.dtype, ln.width, max))
    }

    /// `C[i][j] = 0.0;`, inside its loops and under its guard (for one block of lanes).
    fn zero(&mut self, z: &Zero, lane: Option<&Lane>, depth: usize) -> std::result::Result<(), String> {
        let mut depth = depth;
        if let Some(test) = self.test(&z.when) {
            self.line(depth, &test);
            depth += 1;
        }
        if !z.guard.is_empty() {
            let conds: Vec<String> =
                z.guard.iter().map(|g| format!("{} == 0", c_expr(g, self.helpers, false))).collect();
            self.line(depth, &format!("if ({})", conds.join(" && ")));
            depth += 1;
        }
        for l in &z.loops {
            let h = self.header(l);
            self.line(depth, &h);
            depth += 1;
        }
        let (target, vector) = self.mem(&z.target, lane, true)?;
        let zero = match lane {
            Some(ln) if vector => format!("({}){{0}}", vtype(ln.dtype, ln.width)),
            _ => "0.0".to_string(),
        };
        self.line(depth, &format!("{target} = {zero};"));
        Ok(())
    }

    fn header(&mut self, l: &Loop) -> String {
        format!(
            "for (int {i} = {lb}; {i} <= {ub}; {i}{step})",
            i = self.helpers.names.clone().var(&l.iter),
            lb = c_expr(&l.lb, self.helpers, false),
            ub = c_expr(&l.ub, self.helpers, true),
            step = if l.step == 1 { "++".to_string() } else { format!(" += {}", l.step) }
        )
    }

    fn loop_(&mut self, l: &Arc<Loop>, body: &[GNode], depth: usize) -> std::result::Result<(), String> {
        if let Some((at, conds)) = self.split_point(l, body) {
            return self.split(l, body, &at, conds, depth);
        }
        if !l.annot.pack.is_empty() {
            return self.packed_loop(l, body, depth);
        }
        if let Some(block) = self.summing_block(l, body) {
            return self.summing_lanes(l, body, &block, depth);
        }
        if !l.annot.registers.is_empty() {
            return self.band(l, body, depth);
        }
        self.outer.push(Loop { body: Vec::new(), ..(**l).clone() });
        let r = self.marked_loop(l, body, depth);
        self.outer.pop();
        r
    }

    /// Where loop `l` splits so that the conditions of the copies of a partial block below it
    /// (`g >= 0`, affine, decreasing in `l`'s iterator, and not mentioning the loops below)
    /// hold in the first part: `l <= at`. `None` where nothing splits: no such conditions,
    /// or a loop that cannot be cut in two (vector lanes, a collapsed band, a step).
    fn split_point(&self, l: &Loop, body: &[GNode]) -> Option<(Expr, Vec<Expr>)> {
        if !self.guarded || self.collapsed > 0 || l.annot.collapse > 1 || l.annot.vectorize || l.step != 1 {
            return None;
        }
        let mut conds = Vec::new();
        body.iter().for_each(|g| g.conditions(&mut conds));
        let mut inner = Vec::new();
        body.iter().for_each(|g| g.iters(&mut inner));
        let i = &l.iter;
        // `a*i + r >= 0` with a < 0 holds for `i <= floor(r / -a)`: per (a, r less its
        // constant), the smallest constant decides.
        let mut tightest: Vec<(i64, Expr, i64)> = Vec::new();
        let mut used = Vec::new();
        for g in conds {
            let a = g.coeff(i);
            if self.known.contains(&g)
                || self.tested.contains(&g)
                || !g.is_affine()
                || a >= 0
                || inner.iter().any(|v| g.mentions(v))
            {
                continue;
            }
            let r = g.sub(&Expr::var_name(i).scale(a));
            let c = r.constant();
            let shape = r.add_int(-c);
            match tightest.iter_mut().find(|(b, s, _)| *b == a && *s == shape) {
                Some(t) => t.2 = t.2.min(c),
                None => tightest.push((a, shape, c)),
            }
            used.push(g);
        }
        let at = tightest
            .into_iter()
            .map(|(a, shape, c)| if a == -1 { shape.add_int(c) } else { shape.add_int(c).floordiv(-a) })
            .reduce(|x, y| Expr::min(&x, &y))?;
        Some((at, used))
    }

    /// Loop `l` in two parts: `l <= at`, where the conditions `conds` hold (its statements
    /// run untested: the hot loops of a register tile whose rows do not divide the extent),
    /// then the rest, where they are tested at each statement.
    fn split(
        &mut self,
        l: &Arc<Loop>,
        body: &[GNode],
        at: &Expr,
        conds: Vec<Expr>,
        depth: usize,
    ) -> std::result::Result<(), String> {
        let main = Loop { ub: Expr::min(&l.ub, at), ..(**l).clone() };
        let rest = Loop { lb: Expr::max(&l.lb, &at.add_int(1)), ..(**l).clone() };
        let i = self.helpers.names.var(&l.iter).to_string();
        let upto = c_expr(at, self.helpers, false);
        self.line(
            depth,
            &format!("/* `{i}` in two parts: up to {upto}, where every unrolled copy runs; then the rest */"),
        );
        let n = self.known.len();
        self.known.extend(conds.iter().cloned());
        let r = self.part(l, main, body, depth);
        self.known.truncate(n);
        r?;
        let n = self.tested.len();
        self.tested.extend(conds);
        let r = self.part(l, rest, body, depth);
        self.tested.truncate(n);
        r
    }

    /// Prints `part`, a copy of loop `l` with other bounds or marks (a part of a split loop, a
    /// packed loop without its mark), as standing for the nest's loop `l` stands for.
    fn part(
        &mut self,
        l: &Arc<Loop>,
        part: Loop,
        body: &[GNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        let part = Arc::new(part);
        let n = self.parts.len();
        self.parts.push((part.clone(), stands_for(&self.parts, l)));
        let r = self.loop_(&part, body, depth);
        self.parts.truncate(n);
        r
    }

    /// The block of a vectorized loop inside a band whose lanes sum into an element the band
    /// keeps, where the block is partial at some iteration of the band (a strip-mined
    /// reduction loop whose extent the factor does not divide).
    fn summing_block(&self, l: &Loop, body: &[GNode]) -> Option<vector::Block> {
        if !l.annot.vectorize || self.bands.is_empty() {
            return None;
        }
        let block = vector::block(l).filter(|b| !b.full_when.is_empty())?;
        let sums = body.iter().any(|g| match g {
            GNode::Stmt(s) => lower(s).is_some_and(|lw| {
                lw.update == Update::Add
                    && lw.target.id().is_some_and(|t| self.bands.iter().any(|b| b.tensors.contains(t)))
                    && !lw.target.index_list().unwrap_or(&[]).iter().any(|x| x.mentions(&l.iter))
            }),
            _ => false,
        });
        sums.then_some(block)
    }

    /// A block of summing lanes that may be partial: whole vectors where it is full, else one
    /// lane at a time into the first lane of the partial sums.
    fn summing_lanes(
        &mut self,
        l: &Arc<Loop>,
        body: &[GNode],
        block: &vector::Block,
        depth: usize,
    ) -> std::result::Result<(), String> {
        let conds: Vec<String> = block
            .full_when
            .iter()
            .map(|(a, u)| format!("{} <= {}", c_expr(a, self.helpers, true), c_expr(u, self.helpers, true)))
            .collect();
        let full = Loop { ub: block.full_ub.clone(), ..(**l).clone() };
        let mut last = (**l).clone();
        last.annot.vectorize = false;
        self.line(depth, &format!("if ({})  /* a full block of lanes */", conds.join(" && ")));
        self.line(depth, "{");
        self.part(l, full, body, depth + 1)?;
        self.line(depth, "}");
        self.line(depth, "else  /* the last, partial block: one lane at a time */");
        self.line(depth, "{");
        self.part(l, last, body, depth + 1)?;
        self.line(depth, "}");
        Ok(())
    }

    /// The conditions of `gs` not known to hold here: `(g1 >= 0 && ..)`, or `None`.
    fn test(&mut self, gs: &[Expr]) -> Option<String> {
        let open: Vec<String> = gs
            .iter()
            .filter(|g| !self.known.contains(g))
            .map(|g| format!("{} >= 0", c_expr(g, self.helpers, false)))
            .collect();
        (!open.is_empty()).then(|| format!("if ({})", open.join(" && ")))
    }

    /// A loop marked `pack`: each packed tensor's block copied into a buffer before it (row by
    /// row, up to the tensor's edge; element by element where the layout reorders the block),
    /// the loop reading the buffer, the buffer freed after it.
    fn packed_loop(
        &mut self,
        l: &Arc<Loop>,
        body: &[GNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        self.helpers.packs = true;
        let mut bufs: Vec<Packed> = Vec::new();
        self.line(depth, "{");
        for t in &l.annot.pack {
            if self.laid.contains_key(t) {
                return Err(format!("cannot pack `{t}`: it has a layout of its own for the whole kernel"));
            }
            let outer: Vec<Name> = self.outer.iter().map(|o| o.iter.clone()).collect();
            let fp = crate::analysis::packing::footprint(&outer, l, t)?;
            let layout = l.annot.pack_layout.get(t).cloned().unwrap_or_default();
            let rank = fp.extent.len();
            let order = layout.order(rank);
            let tc = self.helpers.names.tensor(t).to_string();
            let buf = format!("teml_{tc}_pack");
            let ty = fp.dtype.c_name();
            let dims = self
                .params
                .iter()
                .find(|p| p.accessed() == t)
                .map(|p| p.dims.clone())
                .ok_or_else(|| format!("cannot pack `{t}`: not a tensor of the kernel"))?;
            let ext: Vec<String> = fp.extent.iter().map(|e| c_expr(e, self.helpers, false)).collect();
            // The buffer's extents: the block's, in the layout's order, the last rounded up.
            let mut shape: Vec<String> = order.iter().map(|d| ext[*d].clone()).collect();
            if layout.pad > 1 {
                let p = layout.pad;
                let last = fp.extent[order[rank - 1]].clone();
                shape[rank - 1] = match last.as_const() {
                    Some(n) => ((n + p as i64 - 1) / p as i64 * p as i64).to_string(),
                    None => format!("(({} + {}) / {p} * {p})", ext[order[rank - 1]], p - 1),
                };
            }
            let from: Vec<String> =
                fp.lo.iter().map(|e| format!("[{}]", c_expr(e, self.helpers, false))).collect();
            let how =
                if layout.is_plain() { String::new() } else { format!(", laid out {}", layout.describe()) };
            self.line(
                depth + 1,
                &format!(
                    "/* `{tc}` packed for loop `{}`: the {} block from {tc}{}{how} */",
                    self.helpers.names.var(&l.iter),
                    ext.join(" x "),
                    from.join("")
                ),
            );
            let tail: String = shape[1..].iter().map(|e| format!("[{e}]")).collect();
            let decl = if rank == 1 {
                format!("{ty} *restrict {buf}")
            } else {
                format!("{ty} (*restrict {buf}){tail}")
            };
            let bytes: String = shape.iter().map(|e| format!("[{e}]")).collect();
            self.line(depth + 1, &format!("{decl} = malloc(sizeof({ty}{bytes}));"));
            self.line(
                depth + 1,
                &format!(
                    "if (!{buf}) {{ fputs(\"teml: out of memory packing `{tc}`\\n\", stderr); abort(); }}"
                ),
            );
            // One loop per buffer dimension, up to the block's extent and the tensor's edge (a
            // strip-mined tail's block reaches past it); the last, a row copy where the block's
            // last dimension stays last.
            self.helpers.min = true;
            let keeps_rows = order[rank - 1] == rank - 1;
            let loops = if keeps_rows { rank - 1 } else { rank };
            let mut d2 = depth + 1;
            let mut src_idx: Vec<String> = vec![String::new(); rank];
            let mut idx: Vec<String> = Vec::new();
            for (k, d) in order.iter().enumerate().take(loops) {
                let p = format!("teml_p{k}");
                let edge = c_expr(&dims[*d].add_int(-1).sub(&fp.lo[*d]), self.helpers, false);
                let last = c_expr(&fp.extent[*d].add_int(-1), self.helpers, true);
                self.line(d2, &format!("for (int {p} = 0; {p} <= teml_min({last}, {edge}); {p}++)"));
                idx.push(format!("[{p}]"));
                src_idx[*d] = format!("[{} + {p}]", c_expr(&fp.lo[*d], self.helpers, true));
                d2 += 1;
            }
            if keeps_rows {
                let lo_last = c_expr(&fp.lo[rank - 1], self.helpers, false);
                let edge = c_expr(&dims[rank - 1].sub(&fp.lo[rank - 1]), self.helpers, false);
                let dst = if rank == 1 { buf.clone() } else { format!("&{buf}{}[0]", idx.join("")) };
                let src = format!("&{tc}{}[{lo_last}]", src_idx[..rank - 1].join(""));
                self.line(
                    d2,
                    &format!("memcpy({dst}, {src}, sizeof({ty}) * teml_min({}, {edge}));", ext[rank - 1]),
                );
            } else {
                self.line(d2, &format!("{buf}{} = {tc}{};", idx.join(""), src_idx.join("")));
            }
            bufs.push(Packed { tensor: t.clone(), buf, lo: fp.lo, order, rank });
        }
        let n = bufs.len();
        self.packed.extend(bufs.iter().cloned());
        let mut inner = (**l).clone();
        inner.annot.pack.clear();
        inner.annot.pack_layout.clear();
        let r = self.part(l, inner, body, depth + 1);
        self.packed.truncate(self.packed.len() - n);
        r?;
        for p in &bufs {
            self.line(depth + 1, &format!("free({});", p.buf));
        }
        self.line(depth, "}");
        Ok(())
    }

    /// A loop marked `registers`: its variables declared and loaded before it, stored after.
    /// Where its lanes are strip-mined blocks that are full but for the last (a tail), the
    /// registers are kept for the full blocks, and the last runs without them.
    fn band(&mut self, l: &Arc<Loop>, body: &[GNode], depth: usize) -> std::result::Result<(), String> {
        let outer: Vec<&Loop> = self.outer.iter().collect();
        for t in &l.annot.registers {
            crate::analysis::registers::units(&outer, l, t, self.buffers)?;
        }
        // Copies of a partial block's end, tested at each statement: their elements may not
        // exist, so none is loaded before the loop.
        let mut conds = Vec::new();
        body.iter().for_each(|g| g.conditions(&mut conds));
        if conds.iter().any(|g| !self.known.contains(g)) {
            self.line(depth, "/* the last, partial block of rows: no registers */");
            self.outer.push(Loop { body: Vec::new(), ..(**l).clone() });
            let r = self.marked_loop(l, body, depth);
            self.outer.pop();
            return r;
        }
        let mut tails: Vec<Tail> = Vec::new();
        let mut inner = vec![l.iter.clone()];
        body.iter().for_each(|g| g.iters(&mut inner));
        partial_lanes(body, &inner, &mut tails);
        if !tails.is_empty() {
            let mut conds: Vec<String> = Vec::new();
            for t in &tails {
                for (a, u) in &t.block.full_when {
                    let c = format!("{} <= {}", c_expr(a, self.helpers, true), c_expr(u, self.helpers, true));
                    if !conds.contains(&c) {
                        conds.push(c);
                    }
                }
            }
            let n = self.parts.len();
            let full: Vec<GNode> = full_blocks(body, &tails, &mut self.parts);
            self.line(depth, &format!("if ({})  /* full blocks of lanes */", conds.join(" && ")));
            self.line(depth, "{");
            let r = self.kept(l, &full, depth + 1);
            self.parts.truncate(n);
            r?;
            self.line(depth, "}");
            self.line(depth, "else  /* the last, partial block: no registers */");
            self.line(depth, "{");
            self.outer.push(Loop { body: Vec::new(), ..(**l).clone() });
            let r = self.marked_loop(l, body, depth + 1);
            self.outer.pop();
            r?;
            self.line(depth, "}");
            return Ok(());
        }
        self.kept(l, body, depth)
    }

    /// The band `l` with its variables (every block of lanes inside it full).
    fn kept(&mut self, l: &Arc<Loop>, body: &[GNode], depth: usize) -> std::result::Result<(), String> {
        let mut inner = vec![l.iter.clone()];
        for x in &l.body {
            x.loop_iters(&mut inner);
        }
        self.bands.push(Band { tensors: l.annot.registers.clone(), inner, regs: Vec::new() });
        let saved = std::mem::take(&mut self.out);
        self.outer.push(Loop { body: Vec::new(), ..(**l).clone() });
        let r = self.marked_loop(l, body, depth + 1);
        self.outer.pop();
        let printed = std::mem::replace(&mut self.out, saved);
        let band = self.bands.pop();
        r?;
        let Some(band) = band else { return Ok(()) };
        // An empty loop must not touch elements it would never have accessed.
        let runs = vector::constant_trip(l).is_some_and(|n| n >= 1);
        let open = if runs {
            "{".to_string()
        } else {
            format!("if ({} <= {}) {{", c_expr(&l.lb, self.helpers, true), c_expr(&l.ub, self.helpers, true))
        };
        let ts: Vec<&str> = band.tensors.iter().map(|t| self.helpers.names.tensor(t)).collect();
        let ts = ts.join(", ");
        self.line(
            depth,
            &format!("{open} /* {ts} in registers across `{}` */", self.helpers.names.var(&l.iter)),
        );
        let mut loaded: Vec<&str> = Vec::new();
        for r in &band.regs {
            // A sum's first variable starts from the element (lane 0), the others from 0.
            let init = match r.summed {
                None => r.mem.clone(),
                Some(_) if loaded.contains(&r.mem.as_str()) => {
                    if r.ty.starts_with("teml_") {
                        format!("({}){{0}}", r.ty)
                    } else {
                        "0".into()
                    }
                }
                Some(_) => {
                    loaded.push(&r.mem);
                    if r.ty.starts_with("teml_") { format!("({}){{{}}}", r.ty, r.mem) } else { r.mem.clone() }
                }
            };
            self.line(depth + 1, &format!("{} {} = {init};", r.ty, r.var));
        }
        self.out.push_str(&printed);
        let mut stored: Vec<&str> = Vec::new();
        for r in band.regs.iter().filter(|r| r.written) {
            if r.summed.is_none() {
                self.line(depth + 1, &format!("{} = {};", r.mem, r.var));
                continue;
            }
            if stored.contains(&r.mem.as_str()) {
                continue;
            }
            stored.push(&r.mem);
            let parts: Vec<String> = band
                .regs
                .iter()
                .filter(|q| q.mem == r.mem)
                .map(|q| match q.summed {
                    Some((_, w)) if w > 1 => format!("teml_hsum_{}({})", q.ty, q.var),
                    _ => q.var.clone(),
                })
                .collect();
            self.line(
                depth + 1,
                &format!("{} = {};  /* the lanes' partial sums */", r.mem, parts.join(" + ")),
            );
        }
        self.line(depth, "}");
        Ok(())
    }

    fn marked_loop(
        &mut self,
        l: &Arc<Loop>,
        body: &[GNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        // An inner loop of a collapsed band: the band's one pragma covers it.
        let in_band = self.collapsed > 0;
        if in_band {
            self.collapsed -= 1;
        }
        let orig = stands_for(&self.parts, l);
        // A part printed without its loop's marks (one lane at a time) needs no plan.
        let unmarked = !(l.annot.parallel || l.annot.vectorize);
        let plan =
            if in_band || unmarked { None } else { kernel::realise(self.state, self.nest, &orig, body)? };
        let mut simd_note = None;
        // Lanes that sum into elements a band keeps: the band holds the partial sums.
        let summed = match &plan {
            Some(Plan::Reduction(ts)) => ts.iter().all(|t| {
                t.op == Update::Add
                    && t.leaf.id().is_some_and(|n| self.bands.iter().any(|b| b.tensors.contains(n)))
            }),
            _ => false,
        };
        if l.annot.vectorize && !l.annot.parallel && (plan == Some(Plan::Independent) || summed) {
            match self.explicit_lanes(l, body) {
                Ok(lanes) => return self.vector_loop(l, body, &lanes, depth),
                Err(why) => simd_note = Some(why),
            }
        }
        if let Some(t) = l.annot.stream.first()
            && self.target.vector_bits > 0
        {
            let why = simd_note.as_deref().unwrap_or("the loop is not printed with explicit vectors");
            self.line(depth, &format!("/* `{t}` not streamed: {} */", why.replace("*/", "* /")));
        }
        let header = self.header(l);
        let mut pragma = match (l.annot.parallel && !in_band, l.annot.vectorize) {
            (true, true) => Some("#pragma omp parallel for simd".to_string()),
            (true, false) => Some("#pragma omp parallel for".to_string()),
            (false, true) => Some("#pragma omp simd".to_string()),
            _ => None,
        };
        // A triangle (loops inside whose bounds move with this one): the iterations differ in
        // work, so they are dealt round-robin instead of in one block per thread.
        if l.annot.parallel
            && l.annot.collapse <= 1
            && let Some(p) = pragma.as_mut()
            && body.iter().any(|x| bounds_move_with(x, &mut vec![l.iter.clone()]))
        {
            p.push_str(" schedule(static, 1)");
        }
        if l.annot.collapse > 1
            && let Some(p) = pragma.as_mut()
        {
            p.push_str(&format!(" collapse({})", l.annot.collapse));
            self.collapsed = l.annot.collapse - 1;
        }
        let mut reduction_vars: Vec<(String, Arc<TNode>, Option<String>, Update)> = Vec::new();
        let mut depth = depth;
        if let Some(Plan::Reduction(targets)) = &plan {
            self.line(depth, "{");
            depth += 1;
            for t in targets {
                let var = format!("teml_acc{}", *self.acc_count);
                *self.acc_count += 1;
                let ty = t.leaf.dtype.c_name();
                // A sum starts at 0; a max or a min at what the element (or the enclosing
                // accumulator) holds.
                let init = match (t.op, self.accs.get(&t.access)) {
                    (Update::Max | Update::Min, Some(o)) => o.clone(),
                    (Update::Max | Update::Min, None) => self.mem(&t.leaf, None, false)?.0,
                    _ => "0".to_string(),
                };
                self.line(depth, &format!("{ty} {var} = {init};"));
                let outer = self.accs.insert(t.access.clone(), var.clone());
                reduction_vars.push((var, t.leaf.clone(), outer, t.op));
            }
            if let Some(p) = pragma.as_mut() {
                for op in ["+", "max", "min"] {
                    let vars: Vec<&str> =
                        reduction_vars.iter().filter(|r| r.3.omp() == op).map(|r| r.0.as_str()).collect();
                    if !vars.is_empty() {
                        p.push_str(&format!(" reduction({op}: {})", vars.join(", ")));
                    }
                }
            }
        }
        if let (Some(p), Some(why)) = (&pragma, &simd_note)
            && self.target.vector_bits > 0
        {
            let p = format!("{p}  /* compiler-vectorized: {} */", why.replace("*/", "* /"));
            self.line(depth, &p);
        } else if let Some(p) = &pragma {
            // pragmas start at column 0 in many codebases; indenting them reads better here
            self.line(depth, p);
        }
        self.line(depth, &header);
        // One C statement: a statement, or a loop that is not printed as blocks of lanes.
        let locals = self.locals(l)?;
        let single = locals.is_empty()
            && match body {
                [GNode::Stmt(_)] => true,
                [GNode::Loop(c, b)] => {
                    !(c.annot.vectorize && !c.annot.parallel && self.explicit_lanes(c, b).is_ok())
                        && self.split_point(c, b).is_none()
                }
                _ => false,
            };
        if single {
            self.node(&body[0], depth + 1)?;
        } else {
            self.line(depth, "{");
            for (decl, _) in &locals {
                self.line(depth + 1, decl);
            }
            let n = self.packed.len();
            self.packed.extend(locals.into_iter().map(|(_, p)| p));
            let r = body.iter().try_for_each(|c| self.node(c, depth + 1));
            self.packed.truncate(n);
            r?;
            self.line(depth, "}");
        }
        if !reduction_vars.is_empty() {
            for (var, leaf, outer, op) in reduction_vars {
                // Combine the partial result with the enclosing accumulator, or with the element
                // itself (a max or a min started from its value).
                let target = match &outer {
                    Some(o) => o.clone(),
                    None => self.mem(&leaf, None, true)?.0,
                };
                let combine = match (op, &outer) {
                    (Update::Max | Update::Min, _) => "=",
                    (Update::Sub, None) => "-=",
                    _ => "+=",
                };
                self.line(depth, &format!("{target} {combine} {var};"));
                match outer {
                    Some(o) => self.accs.insert(leaf.access(), o),
                    None => self.accs.remove(&leaf.access()),
                };
            }
            self.line(depth - 1, "}");
        }
        Ok(())
    }

    /// The buffers of the tensors loop `l` stores per iteration (`store_at`): their declarations,
    /// at the start of its body, and how accesses find them.
    fn locals(&mut self, l: &Loop) -> std::result::Result<Vec<(String, Packed)>, String> {
        if l.annot.store_at.is_empty() {
            return Ok(Vec::new());
        }
        // The loops around `l` (its own header is the last of `outer` while it prints).
        let mut outer: Vec<Name> = self.outer.iter().map(|o| o.iter.clone()).collect();
        if outer.last() == Some(&l.iter) {
            outer.pop();
        }
        let mut out = Vec::new();
        for t in &l.annot.store_at {
            let fp = storage::block(&outer, l, t)?;
            let tc = self.helpers.names.tensor(t).to_string();
            let buf = format!("teml_{tc}_local");
            let ext: Vec<String> = fp.extent.iter().map(|e| c_expr(e, self.helpers, false)).collect();
            let from: String =
                fp.lo.iter().map(|e| format!("[{}]", c_expr(e, self.helpers, false))).collect();
            // A dimension the iteration fixes (extent 1) is left out of the buffer.
            let order: Vec<usize> =
                (0..fp.extent.len()).filter(|d| fp.extent[*d].as_const() != Some(1)).collect();
            let dims: String = order.iter().map(|d| format!("[{}]", ext[*d])).collect();
            let who = if self.auto.contains(t) {
                " (by code generation: no iteration reads what another wrote)"
            } else {
                ""
            };
            let decl = format!(
                "{} {buf}{dims};  /* `{tc}` stored per iteration of `{}`{who}: the {} block from {tc}{from} */",
                fp.dtype.c_name(),
                self.helpers.names.var(&l.iter),
                ext.join(" x ")
            );
            let rank = fp.extent.len();
            out.push((decl, Packed { tensor: t.clone(), buf, lo: fp.lo, order, rank }));
        }
        Ok(out)
    }

    /// The lanes of a vectorized loop that carries no dependence, printed with explicit
    /// vectors, or why it keeps its pragma.
    fn explicit_lanes(&self, l: &Loop, body: &[GNode]) -> std::result::Result<Lanes, String> {
        let mut conds = Vec::new();
        body.iter().for_each(|g| g.conditions(&mut conds));
        if let Some(g) = conds.iter().find(|g| g.mentions(&l.iter) && !self.known.contains(g)) {
            return Err(format!("a statement runs only where {g} >= 0, which depends on `{}`", l.iter));
        }
        // A packed buffer whose rows are not the tensor's: its lanes are not adjacent there.
        for p in self.packed.iter().filter(|p| p.order.last().is_some_and(|d| *d + 1 != p.rank)) {
            let mut acc = Vec::new();
            body.iter().for_each(|g| g.accesses(&p.tensor, &mut acc));
            if let Some((text, _)) = acc.iter().find(|(_, index)| index.iter().any(|x| x.mentions(&l.iter))) {
                return Err(format!(
                    "`{}` is packed with its dimensions reordered: the lanes of {text} are not adjacent in the buffer",
                    p.tensor
                ));
            }
        }
        // A regrouped tensor: its lanes are adjacent only where its rows stay rows (a tensor
        // whose dimensions are only reordered is asked where its buffer is contiguous:
        // `vector::lane_access`).
        for (t, (_, lay)) in self.laid.iter().filter(|(_, (_, lay))| lay.regroup.is_some()) {
            let mut acc = Vec::new();
            body.iter().for_each(|g| g.accesses(t, &mut acc));
            if let Some((text, index)) =
                acc.iter().find(|(_, index)| index.iter().any(|x| x.mentions(&l.iter)))
                && !lay.keeps_rows(index.len())
            {
                return Err(format!(
                    "`{t}` has the layout {}: the lanes of {text} are not adjacent in its buffer",
                    lay.describe(index.len())
                ));
            }
        }
        for g in body {
            match g {
                GNode::Stmt(_) => {}
                GNode::Zero(z) if z.loops.is_empty() && z.guard.iter().all(|g| !g.mentions(&l.iter)) => {}
                GNode::Zero(_) => {
                    return Err(format!("an accumulator is zeroed by a loop inside `{}`", l.iter));
                }
                GNode::Loop(..) => return Err(format!("loop `{}` has a loop inside", l.iter)),
            }
        }
        // A scalar function (`sqrt`, `exp`, ...) has no vector form in C's vector extensions:
        // the compiler vectorizes it under the pragma (with the vector math library it has).
        // `fmax` and `fmin` have one (`extreme_helper`), except as a reduction across the lanes
        // (its partial results would be summed).
        for g in body {
            let GNode::Stmt(s) = g else { continue };
            if let Some(f) = s.value().and_then(|v| {
                let mut found = None;
                v.visit(&mut |n| {
                    if let Op::Call(f) = n.op
                        && !matches!(f, Func::Max | Func::Min)
                    {
                        found = found.or(Some(f));
                    }
                });
                found
            }) {
                return Err(format!("`{}` has no explicit vector form", f.name()));
            }
            if let Some(lw) = lower(s)
                && matches!(lw.update, Update::Max | Update::Min)
                && !lw.target.index_list().unwrap_or(&[]).iter().any(|x| x.mentions(&l.iter))
            {
                return Err(format!(
                    "the `{}` reduction across the lanes has no explicit vector form",
                    if lw.update == Update::Max { "max" } else { "min" }
                ));
            }
        }
        let sums: Vec<Name> = self.bands.iter().flat_map(|b| b.tensors.iter().cloned()).collect();
        let target = match l.annot.vector_bits {
            0 => self.target,
            bits => Target { vector_bits: bits.min(self.target.vector_bits) },
        };
        vector::lanes(l, &target, !self.bands.is_empty(), &sums, self.buffers)
    }

    /// A vectorized loop with explicit vectors: blocks of lanes, or a loop of whole vectors
    /// and a scalar remainder.
    fn vector_loop(
        &mut self,
        l: &Loop,
        body: &[GNode],
        lanes: &Lanes,
        depth: usize,
    ) -> std::result::Result<(), String> {
        let i = self.helpers.names.var(&l.iter).to_string();
        match lanes {
            Lanes::Unrolled { dtype, blocks } => {
                let widths: Vec<String> = blocks.iter().map(|(_, w)| w.to_string()).collect();
                if let Some(t) = l.annot.stream.first() {
                    self.line(
                        depth,
                        &format!(
                            "/* `{t}` not streamed: {i}'s few lanes are unrolled, with no aligned start */"
                        ),
                    );
                }
                self.line(depth, &format!("/* {i} in {}: lanes {} */", l.range(), widths.join(" + ")));
                for (off, w) in blocks {
                    let lane =
                        Lane { iter: l.iter.clone(), base: l.lb.add_int(*off), width: *w, dtype: *dtype };
                    self.lanes_body(body, &lane, depth)?;
                }
            }
            Lanes::Strided { dtype, width } => {
                let whole = vector::constant_trip(l).is_some_and(|n| n % *width as i64 == 0);
                let lb = c_expr(&l.lb, self.helpers, false);
                let last = c_expr(&l.ub.add_int(-(*width as i64 - 1)), self.helpers, true);
                let lane = Lane {
                    iter: l.iter.clone(),
                    base: Expr::var_name(&l.iter),
                    width: *width,
                    dtype: *dtype,
                };
                let streamed = match self.streamed(l, body) {
                    Ok(t) => t,
                    Err(why) => {
                        self.line(depth, &format!("/* {} */", why.replace("*/", "* /")));
                        None
                    }
                };
                if whole && streamed.is_none() {
                    self.line(depth, &format!("for (int {i} = {lb}; {i} <= {last}; {i} += {width})"));
                    self.line(depth, "{");
                    self.lanes_body(body, &lane, depth + 1)?;
                    self.line(depth, "}");
                } else {
                    // Whole vectors and a scalar remainder; streaming (`stream`): first scalar
                    // iterations until the streamed access starts an aligned vector, and a fence
                    // after.
                    let ub = c_expr(&l.ub, self.helpers, true);
                    self.line(depth, "{");
                    self.line(depth + 1, &format!("int {i} = {lb};"));
                    let mut note = String::new();
                    if let Some(target) = &streamed {
                        let bytes = *width * target.dtype.size();
                        self.helpers.streams.insert((*dtype, *width));
                        let element = self.c_leaf(target);
                        let peel = format!(
                            "for (; {i} <= {ub} && (uintptr_t)&{element} % {bytes} != 0; {i}++)  /* until {element} starts a {bytes}-byte line */"
                        );
                        self.scalar_loop(&peel, body, depth + 1)?;
                        let t = target.id().cloned().unwrap_or_default();
                        note = format!(
                            "  /* `{}` streamed: stored without reading its lines */",
                            self.helpers.names.tensor(&t)
                        );
                        self.stream = Some((t, target.index_list().unwrap_or(&[]).to_vec()));
                    }
                    self.line(depth + 1, &format!("for (; {i} <= {last}; {i} += {width}){note}"));
                    self.line(depth + 1, "{");
                    let r = self.lanes_body(body, &lane, depth + 2);
                    self.stream = None;
                    r?;
                    self.line(depth + 1, "}");
                    self.scalar_loop(
                        &format!("for (; {i} <= {ub}; {i}++)  /* the remainder */"),
                        body,
                        depth + 1,
                    )?;
                    if streamed.is_some() {
                        self.line(
                            depth + 1,
                            "teml_stream_fence();  /* the streamed stores, in order before what follows */",
                        );
                    }
                    self.line(depth, "}");
                }
            }
        }
        Ok(())
    }

    /// `header { body }`, the body printed one iteration at a time (a peel or a remainder).
    fn scalar_loop(&mut self, header: &str, body: &[GNode], depth: usize) -> std::result::Result<(), String> {
        self.line(depth, header);
        self.line(depth, "{");
        for g in body {
            self.node(g, depth + 1)?;
        }
        self.line(depth, "}");
        Ok(())
    }

    /// The store that streaming loop `l` (`stream`) aligns to: the first statement's target
    /// that sets its streamed tensor along `l`; none where `l` streams nothing; why, where its
    /// stores stay plain.
    fn streamed(&self, l: &Loop, body: &[GNode]) -> std::result::Result<Option<crate::ir::TExpr>, String> {
        let Some(t) = l.annot.stream.first() else { return Ok(None) };
        if self.bands.iter().any(|b| b.tensors.contains(t)) {
            return Err(format!("`{t}` not streamed: it is kept in registers around `{}`", l.iter));
        }
        let target = body.iter().find_map(|g| match g {
            GNode::Stmt(s) => {
                lower(s).filter(|lw| lw.update == Update::Set).map(|lw| lw.target).filter(|x| {
                    x.id() == Some(t)
                        && x.index_list().and_then(|xs| xs.last()).is_some_and(|x| x.mentions(&l.iter))
                })
            }
            _ => None,
        });
        match target {
            Some(x) => Ok(Some(x)),
            None => Err(format!("`{t}` not streamed: no statement of `{}` sets it along its rows", l.iter)),
        }
    }

    fn lanes_body(&mut self, body: &[GNode], lane: &Lane, depth: usize) -> std::result::Result<(), String> {
        for g in body {
            match g {
                GNode::Stmt(s) => {
                    let Some(lw) = lower(s) else { return Err(format!("not an assignment: {s}")) };
                    self.stmt(&lw, Some(lane), depth)?;
                }
                GNode::Zero(z) => self.zero(z, Some(lane), depth)?,
                GNode::Loop(..) => return Err("a loop inside explicit vector lanes".into()),
            }
        }
        Ok(())
    }

    /// The C text of an access (an lvalue): the element, a vector of lanes, or the variable a
    /// `registers` band keeps it in; and whether it is a vector.
    fn mem(
        &mut self,
        leaf: &TNode,
        lane: Option<&Lane>,
        write: bool,
    ) -> std::result::Result<(String, bool), String> {
        let (leaf, width, dtype) = match lane {
            Some(ln) if leaf.index_list().is_some_and(|xs| xs.iter().any(|x| x.mentions(&ln.iter))) => {
                let xs: Vec<Expr> =
                    leaf.index_list().unwrap_or(&[]).iter().map(|x| x.subst(&ln.iter, &ln.base)).collect();
                (TNode { iters: Iters::List(xs), ..leaf.clone() }, ln.width, ln.dtype)
            }
            _ => (leaf.clone(), 1, leaf.dtype),
        };
        let element = self.c_leaf(&leaf);
        let memory = if width > 1 {
            self.helpers.vtypes.insert((dtype, width));
            format!("*({} *)&{element}", vtype(dtype, width))
        } else {
            element
        };
        let Some(tensor) = leaf.id().cloned() else { return Ok((memory, width > 1)) };
        let Some(b) = self.bands.iter().rposition(|b| b.tensors.contains(&tensor)) else {
            return Ok((memory, width > 1));
        };
        let moving = self.bands[b]
            .inner
            .iter()
            .find(|v| leaf.index_list().unwrap_or(&[]).iter().any(|x| x.mentions(v)))
            .cloned();
        if let Some(v) = moving {
            return Err(format!(
                "cannot keep `{tensor}` in registers: {} varies with `{v}` as printed (is a vectorized loop \
                 inside the band compiler-vectorized?)",
                leaf.access()
            ));
        }
        // One element every lane adds to: a vector of partial sums per block of lanes.
        let summed = match lane {
            Some(ln)
                if write
                    && width == 1
                    && !leaf.index_list().unwrap_or(&[]).iter().any(|x| x.mentions(&ln.iter)) =>
            {
                Some((ln.dtype, ln.width, c_expr(&ln.base, self.helpers, false)))
            }
            _ => None,
        };
        let key = match &summed {
            Some((_, w, base)) => format!("{memory} lanes {base}..+{w}"),
            None => memory.clone(),
        };
        if summed.is_none()
            && let Some(r) = self.bands[b].regs.iter().find(|r| r.mem == memory && r.summed.is_some())
        {
            // one lane at a time (a partial block): into the first lane of the first sum
            let var =
                if r.summed.is_some_and(|(_, w)| w > 1) { format!("{}[0]", r.var) } else { r.var.clone() };
            return Ok((var, false));
        }
        let band = &mut self.bands[b];
        if let Some(r) = band.regs.iter_mut().find(|r| r.key == key) {
            r.written |= write;
            let vector = r.summed.map_or(width > 1, |(_, w)| w > 1);
            return Ok((r.var.clone(), vector));
        }
        if band.regs.iter().any(|r| r.mem == memory && r.summed.is_some() != summed.is_some()) {
            return Err(format!(
                "cannot keep `{tensor}` in registers: {} is both summed across lanes and accessed otherwise",
                leaf.access()
            ));
        }
        let k = band
            .regs
            .iter()
            .filter(|r| r.var.starts_with(&format!("teml_{}", self.helpers.names.tensor(&tensor))))
            .count();
        let var = format!("teml_{}{k}", self.helpers.names.tensor(&tensor));
        let (ty, vector, summed) = match summed {
            Some((dtype, w, _)) if w > 1 => {
                self.helpers.vtypes.insert((dtype, w));
                self.helpers.hsums.insert((dtype, w));
                (vtype(dtype, w), true, Some((dtype, w)))
            }
            Some((dtype, w, _)) => (dtype.c_name().to_string(), false, Some((dtype, w))),
            None if width > 1 => (vtype(dtype, width), true, None),
            None => (dtype.c_name().to_string(), false, None),
        };
        let band = &mut self.bands[b];
        band.regs.push(Reg { mem: memory, key, var: var.clone(), ty, written: write, summed });
        Ok((var, vector))
    }

    fn c_leaf(&mut self, t: &TNode) -> String {
        match (&t.op, t.index_list()) {
            (Op::Lit(x), _) => crate::ir::texpr::fmt_lit(*x),
            (Op::Id(n), Some(xs)) if !xs.is_empty() && self.packed.iter().any(|p| &p.tensor == n) => {
                let p = self.packed.iter().rev().find(|p| &p.tensor == n).cloned();
                let Some(p) = p else { return t.access() };
                let mut s = p.buf;
                for d in &p.order {
                    let (Some(x), Some(l)) = (xs.get(*d), p.lo.get(*d)) else { continue };
                    s.push_str(&format!("[{}]", c_expr(&x.sub(l), self.helpers, false)));
                }
                s
            }
            (Op::Id(n), Some(xs)) if !xs.is_empty() && self.laid.contains_key(n) => {
                let Some((buf, lay)) = self.laid.get(n) else { return t.access() };
                let mut s = buf.clone();
                for x in lay.map(xs) {
                    s.push_str(&format!("[{}]", c_expr(&x, self.helpers, false)));
                }
                s
            }
            (Op::Id(n), Some(xs)) if !xs.is_empty() => {
                let mut s = self.helpers.names.tensor(n).to_string();
                for x in xs {
                    s.push_str(&format!("[{}]", c_expr(x, self.helpers, false)));
                }
                s
            }
            (Op::Id(n), _) => format!("(*{})", self.helpers.names.tensor(n)),
            _ => t.access(),
        }
    }

    /// An arithmetic expression; `vector` is set where a block of lanes reads a vector.
    fn c_value(
        &mut self,
        t: &TNode,
        lane: Option<&Lane>,
        vector: &mut bool,
    ) -> std::result::Result<String, String> {
        let prec = |t: &TNode| match t.op {
            Op::Add | Op::Sub => 1,
            Op::Mul | Op::Div => 2,
            _ => 3,
        };
        Ok(match t.op {
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                let p = prec(t);
                let (l, r) = (&t.children[0], &t.children[1]);
                let ls = self.c_value(l, lane, vector)?;
                let rs = self.c_value(r, lane, vector)?;
                // A literal in a float computation is a float literal, as in a float program
                // (PolyBench's float build): `(1.0f - alpha * alpha) * beta` stays in float.
                let float_lit = |c: &TNode, s: String| {
                    if t.dtype == DType::Float && matches!(c.op, Op::Lit(_)) && !s.ends_with('f') {
                        format!("{s}f")
                    } else {
                        s
                    }
                };
                let (ls, rs) = (float_lit(l, ls), float_lit(r, rs));
                let ls = if prec(l) < p { format!("({ls})") } else { ls };
                let rp = prec(r) < p || (prec(r) == p && matches!(t.op, Op::Sub | Op::Div));
                let rs = if rp { format!("({rs})") } else { rs };
                format!("{ls} {} {rs}", t.op.symbol())
            }
            Op::Call(f @ (Func::Max | Func::Min))
                if let Some(ln) = lane.filter(|ln| ln.width > 1 && t.children.len() == 2) =>
            {
                let mut parts = Vec::new();
                for c in &t.children {
                    let mut v = false;
                    let text = self.c_value(c, lane, &mut v)?;
                    parts.push((text, v));
                }
                let [(a, va), (b, vb)] = [&parts[0], &parts[1]];
                if !va && !vb {
                    self.helpers.math = true;
                    format!("{}({a}, {b})", f.c_name(t.dtype))
                } else {
                    *vector = true;
                    self.extreme(ln, f == Func::Max, (a, *va), (b, *vb))
                }
            }
            Op::Call(f) => {
                if lane.is_some_and(|ln| ln.width > 1) {
                    return Err(format!("`{}` in explicit vector lanes", f.name()));
                }
                let args = t
                    .children
                    .iter()
                    .map(|c| self.c_value(c, lane, vector))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                match (f.operator(), args.as_slice()) {
                    (Some(o), [a, b]) => format!("({a} {o} {b})"),
                    (None, [c, a, b]) if f == crate::ir::Func::Select => format!("({c} != 0 ? {a} : {b})"),
                    _ => {
                        self.helpers.math = true;
                        format!("{}({})", f.c_name(t.dtype), args.join(", "))
                    }
                }
            }
            Op::Lit(x) => {
                let s = crate::ir::texpr::fmt_lit(x);
                // A double literal beside float vectors would be a narrowing conversion.
                if lane.is_some_and(|ln| ln.dtype == DType::Float && ln.width > 1) {
                    format!("{s}f")
                } else {
                    s
                }
            }
            _ if t.is_tensor_leaf() => {
                let (text, is_vec) = self.mem(t, lane, false)?;
                *vector |= is_vec;
                text
            }
            _ => self.c_leaf(t),
        })
    }
}

/// True where the iterations of the loop of `outer` (the first of `outer`) differ in work: a
/// loop of `x` (or below) has an affine trip count in one of the loops around it up to that
/// one (a triangle `j in [i+1, M-1]`, in a block of rows or not). A block's own loop
/// (`i in [8*io, min(8*io+7, M-2)]`) runs the same count each time but the last.
fn bounds_move_with(x: &GNode, outer: &mut Vec<Name>) -> bool {
    match x {
        GNode::Loop(l, body) => {
            let trip = l.ub.sub(&l.lb);
            if trip.is_affine() && outer.iter().any(|o| trip.mentions(o)) {
                return true;
            }
            outer.push(l.iter.clone());
            let r = body.iter().any(|c| bounds_move_with(c, outer));
            outer.pop();
            r
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_expressions() {
        let mut h = Helpers::default();
        assert_eq!(c_expr(&Expr::var("N").add_int(-1), &mut h, true), "(N-1)");
        assert_eq!(c_expr(&Expr::int(249), &mut h, true), "249");
        assert_eq!(c_expr(&Expr::var("i"), &mut h, true), "i");
        let m = Expr::min(&Expr::var("o").scale(4).add_int(3), &Expr::int(9));
        assert_eq!(c_expr(&m, &mut h, true), "teml_min(4*o+3, 9)");
        assert!(h.min);
        let f = Expr::var("N").add_int(-1).floordiv(8);
        assert_eq!(c_expr(&f, &mut h, true), "teml_floordiv(N-1, 8)");
    }
}
