//! Loop marks (Sec. 3.3.3): parallel, vector lanes, a collapsed parallel band.

use super::*;

/// `parallelize(l, r)` (Sec. 3.3.3): marks the loop at level `r` to run on several threads.
/// Refused inside a vectorized loop: OpenMP has no `parallel for` inside `simd`.
pub fn parallelize(nest: &Nest, level: i64) -> Result<Nest> {
    let b = "parallelize";
    let l = locate(nest, level, b, &level_arg(2))?;
    if let Some(outer) = nest.path().iter().take(level as usize - 1).find(|o| o.annot.vectorize) {
        return Err(simd_around_parallel(b, outer, &l));
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        l2.annot.parallel = true;
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// `vectorize(l, r)` (Sec. 3.3.3): marks the loop at level `r` to run in SIMD lanes.
/// Refused around a parallelized loop: OpenMP has no `parallel for` inside `simd`.
///
/// `bits` (128, 256 or 512; 0: the target's widest) asks for narrower vectors than the target's
/// widest (AVX2-width lanes on an AVX-512 machine, to compare, or to tune); a width the target
/// lacks is refused.
pub fn vectorize(nest: &Nest, level: i64, bits: u32) -> Result<Nest> {
    let b = "vectorize";
    let widest = crate::analysis::vector::Target::native().vector_bits;
    if bits != 0 && (![128, 256, 512].contains(&bits) || bits > widest) {
        return Err(Error::bad_argument(
            b,
            Arg::new(3, "bits"),
            if widest >= 128 {
                format!(
                    "a vector width this target has: {}",
                    [128, 256, 512]
                        .iter()
                        .filter(|w| **w <= widest)
                        .map(|w| w.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                "no width: this target has no explicit vectors (TEML_VECTOR_BITS=0 or no SIMD)".to_string()
            },
            bits.to_string(),
        ));
    }
    let l = locate(nest, level, b, &level_arg(2))?;
    if let Some(inner) = l.body.iter().find_map(parallel_loop) {
        return Err(simd_around_parallel(b, &l, &inner));
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        l2.annot.vectorize = true;
        l2.annot.vector_bits = bits;
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// `collapse(l, r, n)` (OpenMP `collapse(n)`): the `n` loops from level `r`, perfectly nested
/// on the nest's single path, run as one parallel iteration space, for parallel loops whose
/// outer trip count alone is too small to feed every thread. Every loop of the band is marked
/// parallel (so the registry checks that none carries a dependence) and the outermost says
/// how many it collapses. Refused where an inner loop's bounds depend on an outer loop of the
/// band (OpenMP's rectangular collapse), where a loop of the band is vectorized, or inside a
/// vectorized loop.
///
/// ```text
/// for i in [0, 3]                  for i in [0, 3]  parallel collapse(2)
///   for j in [0, N-1]      →         for j in [0, N-1]  parallel
///     S(i, j)                           S(i, j)
/// ```
pub fn collapse(nest: &Nest, level: i64, n: i64) -> Result<Nest> {
    let b = "collapse";
    let first = locate(nest, level, b, &level_arg(2))?;
    let depth = nest.path().len() as i64;
    if n < 2 || level + n - 1 > depth {
        return Err(Error::bad_argument(
            b,
            Arg::new(3, "count"),
            if depth - level + 1 >= 2 {
                format!(
                    "2..={} (the loops from level {level} on the single path of the nest)",
                    depth - level + 1
                )
            } else {
                format!(
                    "at least 2 loops from level {level} on the single path of the nest, which has {} there",
                    depth - level + 1
                )
            },
            n.to_string(),
        ));
    }
    let path = nest.path();
    let band: Vec<&Loop> = path[level as usize - 1..(level + n - 1) as usize].iter().map(|l| &**l).collect();
    if let Some(outer) = path.iter().take(level as usize - 1).find(|o| o.annot.vectorize) {
        return Err(simd_around_parallel(b, outer, &first));
    }
    if let Some((x, o)) = not_rectangular(&band) {
        return Err(Error::Illegal {
            builtin: b.into(),
            reason: format!(
                "the bounds of loop `{}` ({}) depend on `{}`: expected a rectangular band (OpenMP \
                 collapses loops whose bounds are independent)",
                x.iter,
                x.range(),
                o.iter
            ),
        });
    }
    for x in &band {
        if x.annot.vectorize {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: format!(
                    "loop `{}` is vectorized: expected a band of loops that run on threads only (vectorize \
                     the loop inside the band instead)",
                    x.iter
                ),
            });
        }
    }
    // Code between the loops of the band (a buffer per iteration, a packed block, registers)
    // would leave them not perfectly nested.
    let row = rule(Mark::Collapse, Mark::StoreAt, Scope::Around);
    for x in &band[..band.len() - 1] {
        let words: Vec<(Mark, String)> = x.annot.marks();
        let met: Vec<&str> =
            words.iter().filter(|(m, _)| row.others.contains(m)).map(|(_, w)| w.as_str()).collect();
        if !met.is_empty() {
            return Err(Error::Illegal {
                builtin: b.into(),
                reason: row.words(&[("loop", &x.iter), ("marks", &met.join(", "))]),
            });
        }
    }
    fn mark(l: &Arc<Loop>, k: usize, n: usize) -> Arc<Loop> {
        let mut l2 = (**l).clone();
        l2.annot.parallel = true;
        if k == 0 {
            l2.annot.collapse = n;
        }
        if k + 1 < n
            && let [LNode::Loop(inner)] = l.body.as_slice()
        {
            l2.body = vec![LNode::Loop(mark(inner, k + 1, n))];
        }
        Arc::new(l2)
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| Ok(vec![LNode::Loop(mark(l, 0, n as usize))]))
}

/// `dot(l, r [, isa])` (dot-product groups): the reduction loop at level `r` runs in groups of
/// consecutive iterations, 2 for bf16 pairs and 4 for byte quads (the products that fill one
/// 32-bit lane), each group's products added into a lane of the accumulation type by one
/// instruction where the compiler targets it (`vdpbf16ps` of AVX512-BF16, `vpdpbusd` of
/// AVX512-VNNI or AVX-VNNI), and by plain C of the same meaning otherwise (converted,
/// multiplied and summed in the accumulation type, in order); a last, partial group runs one
/// iteration at a time. Only the summation order changes, as in a vectorized reduction: a
/// group's float products are summed before they are added (bf16 products are exact in float;
/// integer sums are exact). Every statement below must add (`+=`) the product of two bf16 or
/// two 8-bit integer elements, both indexed by the loop's iterator, into an element of their
/// accumulation type the loop does not index (a register tile's `C[i][j] += A[i][k] * B[k][j]`);
/// the loop must not be parallel or vectorized, nor the bounds or guards below depend on it.
/// `isa` (`avx512_bf16`, `avx512_vnni`, `avx_vnni`) asks for the instruction: refused on a
/// machine that lacks it, naming the machine.
///
/// ```text
/// for k in [0, K-1]                     for k in [0, K-1]  dot(2)
///   for j in [16*jo, 16*jo+15] vector → for j in [16*jo, 16*jo+15] vector
///     C[i][j] += A[i][k] * B[k][j]          C[i][j] += A[i][k] * B[k][j]   (k, k+1: one vdpbf16ps)
/// ```
pub fn dot(nest: &Nest, level: i64, isa: Option<&str>) -> Result<Nest> {
    let b = "dot";
    let (group, types) = dot_group(&*locate(nest, level, b, &level_arg(2))?, b)?;
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    if let Some(isa) = isa {
        let m = crate::runtime::machine::Machine::current();
        if !crate::analysis::dot::FLAGS.contains(&isa) {
            return Err(Error::bad_argument(
                b,
                Arg::new(3, "instruction"),
                format!("one of {}", crate::analysis::dot::FLAGS.join(", ")),
                format!("\"{isa}\""),
            ));
        }
        for &(x, y) in &types {
            match crate::analysis::dot::instruction(x, y) {
                Some((insn, flags)) if flags.contains(&isa) => {
                    if !m.has_flag(isa) {
                        return Err(illegal(format!(
                            "{insn} needs {isa}, which this machine ({}) lacks: its CPU flags have no `{isa}` \
                             (dot without an instruction runs plain C there)",
                            m.host_line()
                        )));
                    }
                }
                Some((insn, flags)) => {
                    return Err(illegal(format!(
                        "{} x {} products are summed by {insn} ({}), not by {isa}",
                        x,
                        y,
                        flags.join(" or ")
                    )));
                }
                None => {
                    return Err(illegal(format!(
                        "{} x {} products have no dot-product instruction ({isa} sums an unsigned and a \
                         signed byte, or bf16 pairs): dot without an instruction runs them as plain C",
                        x, y
                    )));
                }
            }
        }
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        l2.annot.dot = group;
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// `amx(l, r)` (AMX tiles): the reduction loop at level r sums its block of the result in
/// Intel's tile registers where the host has them: `for k { for i { for j { C[i][j] += A[i][k] *
/// B[k][j] } } }` with `i` and `j` blocks of 16 or 32, the block's 16 x 16 tiles of C loaded
/// once, each 16 (bf16 pairs: 32 iterations of `k`) or 16 quads (bytes: 64) of `k` one tile
/// load of A's rows, one of B's columns (B packed in the groups `pack(.., group)` writes, the
/// layout the tile load reads) and one tile product per tile of C, the tiles stored once after.
/// A block that is not whole (rows, columns, or `k` not a multiple of the tile's), or a host
/// whose compiler or Linux kernel does not give the tiles, runs the loop as `dot` prints it:
/// the mark implies `dot`. Refused where `dot` is, where the loop is not that block (with the
/// reason), or on a machine whose flags lack `amx_tile` or the product's (`amx_bf16`,
/// `amx_int8`), naming the machine. Only the summation order changes, as with `dot`.
///
/// ```text
/// for k in [0, K-1]                     for k in [0, K-1]  dot(2) amx
///   for i in [32*io, 32*io+31]     →      for i in [32*io, 32*io+31]
///     for j in [32*jo, 32*jo+31]            for j in [32*jo, 32*jo+31]
///       C[i][j] += A[i][k] * B[k][j]           C[i][j] += ...   (4 tiles of C, 32 k a product)
/// ```
pub fn amx(nest: &Nest, level: i64) -> Result<Nest> {
    let b = "amx";
    let l = locate(nest, level, b, &level_arg(2))?;
    let (group, _) = dot_group(&l, b)?;
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    let shape = crate::analysis::amx::shape(&l)
        .map_err(|why| illegal(format!("loop `{}` is not a block of AMX tiles: {why}", l.iter)))?;
    let (x, y) = (shape.a.dtype, shape.b.dtype);
    let Some((insn, flag)) = crate::analysis::amx::instruction(x, y) else {
        return Err(illegal(format!("{x} x {y} products have no tile instruction")));
    };
    let m = crate::runtime::machine::Machine::current();
    if let Some(lacks) = ["amx_tile", flag].into_iter().find(|f| !m.has_flag(f)) {
        return Err(illegal(format!(
            "{insn} needs amx_tile and {flag}, which this machine ({}) lacks: its CPU flags have no `{lacks}` \
             (dot runs these products without tiles)",
            m.host_line()
        )));
    }
    rewrite_loop(nest, level, b, &level_arg(2), &mut |l| {
        let mut l2 = (**l).clone();
        l2.annot.dot = group;
        l2.annot.amx = true;
        Ok(vec![LNode::Loop(Arc::new(l2))])
    })
}

/// The group of reduction loop `l` (`dot`'s and `amx`'s validation, for builtin `b`) and each
/// statement's operand types.
fn dot_group(l: &Loop, b: &str) -> Result<(usize, Vec<(crate::ir::DType, crate::ir::DType)>)> {
    let illegal = |reason: String| Error::Illegal { builtin: b.into(), reason };
    if l.annot.parallel || l.annot.vectorize {
        return Err(illegal(format!(
            "loop `{}` is {}: expected a reduction loop that runs in order (a group sums into one lane)",
            l.iter,
            if l.annot.parallel { "parallel" } else { "vectorized" }
        )));
    }
    fn moving(items: &[LNode], k: &Name) -> Option<Name> {
        items.iter().filter_map(|x| x.as_loop()).find_map(|x| {
            if x.lb.mentions(k) || x.ub.mentions(k) { Some(x.iter.clone()) } else { moving(&x.body, k) }
        })
    }
    if let Some(inner) = moving(&l.body, &l.iter) {
        return Err(illegal(format!(
            "the bounds of loop `{inner}` depend on `{}`: expected loops inside a group that every \
             iteration of it runs alike",
            l.iter
        )));
    }
    let stmts: Vec<_> = l.body.iter().flat_map(|x| x.stmts()).collect();
    if stmts.is_empty() {
        return Err(illegal(format!("loop `{}` has no statement", l.iter)));
    }
    let mut group = 0;
    // Each statement's operand types (an instruction asked for must sum every one of them).
    let mut types: Vec<(crate::ir::DType, crate::ir::DType)> = Vec::new();
    for s in &stmts {
        if let Some(g) = s.guard().iter().find(|g| g.mentions(&l.iter)) {
            return Err(illegal(format!(
                "{} runs only where {g} >= 0, which depends on `{}`: expected statements every \
                 iteration of a group runs",
                s.target().map(|t| t.access()).unwrap_or_default(),
                l.iter
            )));
        }
        let Some(lw) = crate::ir::lower(s) else {
            return Err(illegal(format!("not an assignment: {s}")));
        };
        let p = crate::analysis::dot::product(&lw, &l.iter)
            .map_err(|why| illegal(format!("loop `{}` cannot sum in dot-product groups: {why}", l.iter)))?;
        if group != 0 && p.group != group {
            return Err(illegal(format!(
                "loop `{}` sums products in groups of {group} and of {}: expected one operand type",
                l.iter, p.group
            )));
        }
        group = p.group;
        if !types.contains(&(p.x.dtype, p.y.dtype)) {
            types.push((p.x.dtype, p.y.dtype));
        }
    }
    Ok((group, types))
}
