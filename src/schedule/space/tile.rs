//! The register_tile sketch (BLIS) of a matrix product, and of a product over a triangle
//! (`triangle`: square tiles, those off the diagonal given the register tile).

use super::*;

/// A matrix product's inner three loops: rows i, columns j (contiguous in the result), a
/// reduction k.
pub(super) struct Tile {
    pub(super) target: Name,
    /// Loops outside the three.
    pub(super) outer: usize,
    pub(super) i: Name,
    pub(super) j: Name,
    pub(super) k: Name,
    pub(super) k_extent: i64,
    pub(super) j_extent: i64,
    pub(super) i_extent: i64,
    /// The operand contiguous in j (packed as panels), and the one indexed by i and k.
    pub(super) b: Option<Name>,
    pub(super) a: Option<(Name, usize)>,
    /// The result's element type: the lanes and accumulators.
    pub(super) dtype: crate::ir::DType,
    /// Bytes of an element of the operands as stored, `b`'s and `a`'s (the result's where
    /// the operand is not known): what the cache blocks hold (bf16 operands, half a float's).
    pub(super) b_bytes: u64,
    pub(super) a_bytes: u64,
    /// A triangle's tiles off the diagonal ([`triangle_like`]): its row tiles on threads.
    pub(super) triangle: bool,
    /// The operands' element types (`a`'s, `b`'s) where their products sum in dot-product
    /// groups (bf16 pairs, byte quads: `analysis::dot`).
    pub(super) dot: Option<(crate::ir::DType, crate::ir::DType)>,
    /// `b`'s rank and the dimension of it the reduction indexes (its groups' dimension where
    /// it is packed in groups).
    pub(super) b_dims: (usize, usize),
}

/// The tile's side where a product over a triangle (`j` from `i`) is cut into square tiles:
/// three vectors of 16 lanes, or two of 24, or eight rows of 6.
pub(super) const TRIANGLE_TILE: i64 = 48;

/// A product over a triangle, `C[i][j] += A[k][i] B[k][j]` for `j` from `i` (or `i + 1`),
/// covariance's: square tiles of [`TRIANGLE_TILE`], those off the diagonal (`jo > io`)
/// rectangular, each a matrix product for the register tile (the tiles inside the focused
/// part, loops `io, jo` around it); the diagonal's tiles stay as written. Returns the tile and
/// the triangle's offset (0 or 1).
pub(super) fn triangle_like(w: &Workload, t: &Access) -> Option<(Tile, i64)> {
    let [li, lj, lk] = w.loops.as_slice() else { return None };
    let (u, c) = lj.after.as_ref()?;
    if *u != li.iter || !(0..=1).contains(c) || li.extent.is_none_or(|e| e < 4 * TRIANGLE_TILE) {
        return None;
    }
    // As the square around the triangle: a matrix product?
    let mut square = w.clone();
    square.loops[1].extent = li.extent;
    // A sum into the target over k, which a part of a distributed nest may read as carried
    // (covariance's `cov` is written again, in place, by the parts after it): the rewrite is
    // checked for legality like every step (isl), refused where it is not one.
    if lk.kind == Parallelism::Carried
        && w.updated.contains(&t.tensor)
        && !t.index.iter().any(|x| x.mentions(&lk.iter))
    {
        square.loops[2].kind = Parallelism::Reduction;
    }
    let mut tile = matmul_like(&square, t)?;
    tile.i_extent = TRIANGLE_TILE;
    tile.j_extent = TRIANGLE_TILE;
    tile.outer = 2;
    // `pack` copies the whole tensor's block at a level; inside a part of a distributed nest
    // the operands are read where they are.
    tile.a = None;
    tile.b = None;
    tile.triangle = true;
    tile.dot = None;
    Some((tile, *c))
}

pub(super) fn matmul_like(w: &Workload, t: &Access) -> Option<Tile> {
    matmul_why(w, t).ok()
}

/// [`matmul_like`], or why the inner three loops are no matrix product for a register tile.
pub(super) fn matmul_why(w: &Workload, t: &Access) -> Result<Tile, String> {
    let d = w.loops.len();
    if d < 3 {
        return Err(format!(
            "{}: a register tile needs rows, columns and a reduction innermost",
            plural(d, "loop")
        ));
    }
    let (li, lj, lk) = (&w.loops[d - 3], &w.loops[d - 2], &w.loops[d - 1]);
    let names = format!("{}, {}, {}", li.iter, lj.iter, lk.iter);
    let at_least = |l: &LoopInfo, n: i64| l.extent.is_some_and(|e| e >= n);
    let checks = [
        (
            li.kind == Parallelism::Independent && lj.kind == Parallelism::Independent,
            format!("the inner loops {names} are not two data-parallel loops then a reduction"),
        ),
        (lk.kind == Parallelism::Reduction, format!("the innermost loop {} is no reduction", lk.iter)),
        (t.contiguous_in(&lj.iter), format!("{} is not contiguous in the columns {}", t.tensor, lj.iter)),
        // Every operand that varies along the columns is loaded as vectors along them
        // (`registers` refuses a strided one: attention's `Q K^T` reads K[b][h][j][d]).
        (w.reads_in_lanes(&lj.iter), format!("an operand is strided along the columns {}", lj.iter)),
        (
            t.index.iter().any(|x| x.mentions(&li.iter)) && !t.index.iter().any(|x| x.mentions(&lk.iter)),
            format!("{} is not indexed by the rows {} without the reduction {}", t.tensor, li.iter, lk.iter),
        ),
        (
            at_least(lk, 64) && at_least(lj, 16) && at_least(li, 8),
            format!(
                "extents {} x {} x {}: a register tile needs at least 8 rows, 16 columns and 64 iterations of the reduction",
                li.extent.map_or("?".into(), |e| e.to_string()),
                lj.extent.map_or("?".into(), |e| e.to_string()),
                lk.extent.map_or("?".into(), |e| e.to_string())
            ),
        ),
    ];
    if let Some((_, why)) = checks.into_iter().find(|(ok, _)| !ok) {
        return Err(why);
    }
    let reads: Vec<&Access> = w.reads().filter(|a| a.tensor != t.tensor).collect();
    let mentions = |a: &Access, l: &LoopInfo| a.index.iter().any(|x| x.mentions(&l.iter));
    // The rows must be rows of an operand (one read along them and the reduction, not the
    // columns): otherwise every row of the tile broadcasts the same element, and the product
    // is over other loops (`C[a][b][c][d] = sum_k A[a][b][k] B[k][c][d]` has rows a and b,
    // not c: a tile over c, d, k read all of B per row of A, 2.8x slower than as written).
    if !reads.iter().any(|a| mentions(a, li) && mentions(a, lk) && !mentions(a, lj)) {
        return Err(format!(
            "no operand is read along the rows {} and the reduction {} alone",
            li.iter, lk.iter
        ));
    }
    // An operand packed must be read once (pack rewrites every access of the tensor: the
    // Gram matrix `X^T X` reads X as both operands).
    let once = |a: &&&Access| w.reads().filter(|b| b.tensor == a.tensor).count() == 1;
    let b = reads
        .iter()
        .filter(once)
        .find(|a| a.contiguous_in(&lj.iter) && a.index.iter().any(|x| x.mentions(&lk.iter)));
    let a = reads.iter().filter(once).find(|a| {
        !a.index.iter().any(|x| x.mentions(&lj.iter))
            && a.index.iter().any(|x| x.mentions(&li.iter))
            && a.contiguous_in(&lk.iter)
    });
    Ok(Tile {
        target: t.tensor.clone(),
        outer: d - 3,
        i: li.iter.clone(),
        j: lj.iter.clone(),
        k: lk.iter.clone(),
        k_extent: lk.extent.unwrap_or(0),
        j_extent: lj.extent.unwrap_or(0),
        i_extent: li.extent.unwrap_or(0),
        b: b.map(|a| a.tensor.clone()),
        a: a.map(|a| (a.tensor.clone(), a.index.len())),
        dtype: t.dtype,
        b_bytes: b.map_or(t.dtype.size(), |a| a.dtype.size()) as u64,
        a_bytes: a.map_or(t.dtype.size(), |a| a.dtype.size()) as u64,
        triangle: false,
        b_dims: b.map_or((0, 0), |b| {
            (b.index.len(), b.index.iter().position(|x| x.mentions(&lk.iter)).unwrap_or(0))
        }),
        dot: match (a, b) {
            (Some(a), Some(b)) if crate::analysis::dot::group(a.dtype, b.dtype).is_some() => {
                Some((a.dtype, b.dtype))
            }
            _ => None,
        },
    })
}

pub(super) fn register_tile(out: &mut Out, t: &Tile, m: &Machine) {
    // AMX tiles first where the machine has them: their own blocks, then the registers' in
    // the `else` branch.
    let tiles = amx_tiles(out, t, m);
    let lanes = m.lanes(t.dtype).max(1);
    let regs = m.registers.max(8);
    // nr: two or three vectors (or one); mr: the rows that fill the registers with the block.
    let mut nrs = vec![2 * lanes, 3 * lanes, lanes, 4 * lanes];
    nrs.retain(|&n| n as i64 <= t.j_extent.max(lanes as i64));
    let nr_reason = |n: usize| {
        let v = n.div_ceil(lanes);
        format!("{n} columns: {v} vector{} of {lanes} lanes a row", if v == 1 { "" } else { "s" })
    };
    out.param(
        "nr",
        "nr",
        &format!("columns ({}) of the register tile, in vector lanes", t.j),
        nrs.iter().map(|&n| choice(n, nr_reason(n))).collect(),
    );
    let v = (2 * lanes).div_ceil(lanes);
    let best_mr = ((regs - v - 1) / v).clamp(2, 8);
    let mrs = [best_mr, 4, 6, 8].into_iter().filter(|&r| r as i64 <= t.i_extent).collect::<Vec<_>>();
    out.param(
        "mr",
        "mr",
        &format!("rows ({}) of the register tile, unrolled and jammed", t.i),
        mrs.iter()
            .map(|&r| {
                choice(r, format!("{r} rows x {v} vectors = {} accumulators of {regs} registers", r * v))
            })
            .collect(),
    );
    // kc: the panel of B (kc x nr) stays in L1, A's mr x kc in L1 too, each at its operand's
    // element size.
    let elem = t.b_bytes;
    let l1 = m.caches[0].max(16 << 10);
    let fit = (l1 / 2 / (t.b_bytes * 2 * lanes as u64 + t.a_bytes * 8)).max(16) as i64;
    // Whole dot-product groups a block (`dot`: 2 bf16, 4 bytes), so only the last is partial.
    let g = t.dot.and_then(|(x, y)| crate::analysis::dot::group(x, y)).unwrap_or(1) as i64;
    let fit = (fit / g * g).max(g);
    let mut kcs: Vec<i64> = vec![fit.min(t.k_extent), 128, 256, t.k_extent];
    kcs.retain(|&k| k <= t.k_extent && k > 0);
    out.param(
        "kc",
        "kc",
        &format!("iterations of the reduction {} per cache block", t.k),
        kcs.iter()
            .map(|&k| {
                choice(
                    k,
                    if k == t.k_extent {
                        format!("the whole reduction ({k}): no cache block")
                    } else {
                        format!(
                            "{k}: an nr-column panel of {} across {k} iterations ({} KiB) keeps half the L1",
                            t.b.as_deref().unwrap_or("the operand"),
                            (k as u64 * elem * 2 * lanes as u64) >> 10
                        )
                    },
                )
            })
            .collect(),
    );
    let l2 = m.caches[1].max(256 << 10);
    // Never more blocks than the columns fill (a 48-wide tile is 3 blocks of 16, not 4).
    let blocks = ((t.j_extent + 2 * lanes as i64 - 1) / (2 * lanes as i64)).max(1);
    // (Fewer columns than four blocks, 24 of them in 16-lane blocks: every column block.)
    let mut ncs: Vec<i64> = Vec::new();
    for nc in [4, 8, 15, 30].map(|nc| nc.min(blocks)) {
        if !ncs.contains(&nc) {
            ncs.push(nc);
        }
    }
    let nc_reason = |nc: i64| {
        let bytes = nc as u64 * 2 * lanes as u64 * elem * fit as u64;
        format!(
            "{nc} column blocks: B's block of kc x {} is {} KiB ({} the L2)",
            nc * 2 * lanes as i64,
            bytes >> 10,
            if bytes <= l2 / 2 { "within half" } else { "beyond half" }
        )
    };
    out.param(
        "nc",
        "nc",
        "column blocks per cache block of B",
        ncs.iter().map(|&n| choice(n, nc_reason(n))).collect(),
    );
    out.stmt(step(
        "register_tile",
        vec![value(&t.target), local("mr"), local("nr"), local("kc"), local("nc")],
    ));
    if tiles.is_some() {
        out.end();
    }
    let o = t.outer;
    let mut par = vec![choice(o + 3, format!("the row blocks of {} on threads", t.i))];
    par.push(choice(o + 1, "the column cache blocks on threads"));
    if t.triangle {
        // Row io of the triangle has one tile fewer than row io - 1: its rows on threads leave
        // one thread most of the work (covariance: 28.8-31.6 ms against 23.1-27.8 ms with the
        // tiles of each row on threads; Zen 5, 2 threads).
        par.insert(0, choice(1, format!("the triangle's rows of tiles ({}) on threads", t.i)));
        par.insert(
            0,
            choice(2, format!("each row's tiles ({}) on threads: the rows have one tile fewer each", t.j)),
        );
    } else if o > 0 {
        par.insert(0, choice(1, "the outermost (batch) loop on threads"));
    }
    out.param("parallel", "parallel", "the loop on threads", par);
    out.stmt(step("parallelize", vec![local("parallel")]));
    // B's block with the reduction's dimension first, in groups of g.
    let in_groups = |b: &Name, g: usize| {
        let (rank, kd) = t.b_dims;
        let mut order = vec![kd as i64 + 1];
        order.extend((0..rank).filter(|d| *d != kd).map(|d| d as i64 + 1));
        step("pack", vec![int(o + 3), value(b), ints(&order), int(1), int(g as i64)])
    };
    if let (Some(g), Some(b)) = (tiles, &t.b) {
        // The tiles load B's columns from its groups, A's rows where they are.
        out.begin_if(local("tiles").eq(text("amx")));
        out.stmt(in_groups(b, g));
        out.else_();
    }
    let mut packs = vec![choice("\"none\"", "operands read where they are")];
    if let Some(b) = &t.b {
        packs.insert(
            0,
            choice(
                "\"B\"",
                format!(
                    "{b}'s kc x nc block copied into contiguous panels (read with the row stride otherwise)"
                ),
            ),
        );
    }
    if let Some((a, 2)) = &t.a {
        packs.push(choice(
            "\"A^T\"",
            format!("{a}'s mr x kc block transposed: the rows' broadcasts contiguous"),
        ));
        if t.b.is_some() {
            packs.push(choice("\"both\"", "both operands packed"));
        }
    }
    out.param("pack", "pack", "operands copied into contiguous blocks", packs);
    // The groups before the packs: B packed in the groups the instruction reads.
    let grouped = t.dot.and_then(|(x, y)| tile_groups(out, t, m, x, y));
    if let Some(b) = &t.b {
        let when = local("pack").eq(text("B")).or(local("pack").eq(text("both")));
        let plain = step("pack", vec![int(o + 3), value(b)]);
        match grouped {
            Some(g) => out.stmt(S::If(
                when,
                vec![S::Chain(vec![(local("dot").eq(text("dot")), vec![in_groups(b, g)])], vec![plain])],
            )),
            None => out.stmt(S::If(when, vec![plain])),
        }
    }
    if let Some((a, 2)) = &t.a {
        let when = local("pack").eq(text("A^T")).or(local("pack").eq(text("both")));
        out.stmt(S::If(when, vec![step("pack", vec![int(o + 4), value(a), ints(&[2, 1])])]));
    }
    if tiles.is_some() {
        out.end();
    }
}

/// AMX tiles for the register tile (`amx_tile`), where the machine has them for its operand
/// types and the tile is at least a block of 32 x 32 with a whole tile of the reduction:
/// parameter `tiles` (first "amx"), then `if tiles == "amx" {` its parameters `tile_kc` and
/// `nc` and the `amx_tile` step, `} else {`: the caller writes the registers' branch and closes
/// it. Returns the group B is packed in.
fn amx_tiles(out: &mut Out, t: &Tile, m: &Machine) -> Option<usize> {
    let (x, y) = t.dot?;
    let (insn, flag) = crate::analysis::amx::instruction(x, y)?;
    let g = crate::analysis::dot::group(x, y)?;
    let kt = crate::analysis::amx::TILE * g as i64;
    let big = t.i_extent >= 32 && t.j_extent >= 32 && t.k_extent >= kt && t.b.is_some() && t.a.is_some();
    if !big || !m.has_flag("amx_tile") || !m.has_flag(flag) {
        return None;
    }
    out.param(
        "tiles",
        "tiles",
        &format!("where the register tile of {} sums", t.target),
        vec![
            choice(
                "\"amx\"",
                format!(
                    "32 x 32 blocks in four AMX tiles, {insn} adding 16 x 16 x {kt} products a tile (this machine has amx_tile and {flag})"
                ),
            ),
            choice("\"registers\"", "mr x nr blocks in vector registers"),
        ],
    );
    // A k block: B's 32-column panel across it in 32 KiB (16 tile loads of 1 KiB), whole tiles.
    let whole = |k: i64| (k / kt * kt).max(kt);
    // (A repeated choice is listed once: `Out::param`.)
    let kcs = [16 * kt, 8 * kt, 32 * kt].map(|k| whole(k.min(t.k_extent)));
    // Column blocks of 32 per cache block of B: B's kc x nc*32 block within half the L2.
    let l2 = m.caches[1].max(256 << 10);
    let blocks = ((t.j_extent + 31) / 32).max(1);
    let ncs = [4, 8, 16].map(|nc: i64| nc.min(blocks));
    out.begin_if(local("tiles").eq(text("amx")));
    out.param(
        "tile_kc",
        "tile_kc",
        &format!("iterations of the reduction {} per cache block of the tiles", t.k),
        kcs.iter()
            .map(|&k| {
                choice(
                    k,
                    format!(
                        "{k}: B's 32-column panel across it is {} KiB, {} tile products a block",
                        (k * 32 * (y.size() as i64)) >> 10,
                        k / kt
                    ),
                )
            })
            .collect(),
    );
    out.param(
        "nc",
        "nc",
        "32-column blocks per cache block of B",
        ncs.iter()
            .map(|&nc| {
                let bytes = (nc * 32) as u64 * kcs[0] as u64 * y.size() as u64;
                choice(
                    nc,
                    format!(
                        "{nc} blocks: B's block of tile_kc x {} is {} KiB ({} the L2)",
                        nc * 32,
                        bytes >> 10,
                        if bytes <= l2 / 2 { "within half" } else { "beyond half" }
                    ),
                )
            })
            .collect(),
    );
    out.stmt(step("amx_tile", vec![value(&t.target), local("tile_kc"), local("nc")]));
    out.else_();
    Some(g)
}

/// The register tile's reduction in dot-product groups ([`dot_groups`] at its `k`).
fn tile_groups(
    out: &mut Out,
    t: &Tile,
    m: &Machine,
    x: crate::ir::DType,
    y: crate::ir::DType,
) -> Option<usize> {
    dot_groups(out, &t.k, t.outer + 5, m, x, y)
}

/// A reduction `k` (at `level` once the block is made) summed in dot-product groups (`dot`):
/// the groups first where the machine has the instruction that sums one (or, for bytes, AVX2's
/// `vpmaddwd`), after the plain form where it has not. Returns the group where the machine has
/// the instruction (B is then packed in its groups).
pub(super) fn dot_groups(
    out: &mut Out,
    k: &Name,
    level: usize,
    m: &Machine,
    x: crate::ir::DType,
    y: crate::ir::DType,
) -> Option<usize> {
    let g = crate::analysis::dot::group(x, y).unwrap_or(1);
    let acc = x.compute();
    // (first, with B packed in groups, why): the instruction where the machine has it; for
    // bytes without it, `vpmaddwd` on 16-bit pairs where it has AVX2 (rows interleaved in
    // registers: 2.8-3.5x the i32 tile at 256 bits, on a Xeon built for AVX2).
    let bytes = x.is_integer() && y.is_integer();
    let insn = crate::analysis::dot::instruction(x, y);
    let has = insn.and_then(|(i, flags)| flags.iter().find(|f| m.has_flag(f)).map(|f| (i, *f)));
    let groups = match (has, insn) {
        (Some((i, f)), _) => (
            true,
            true,
            format!(
                "{k} in groups of {g}: {i} adds {g} {x} x {y} products into each {acc} lane (this machine has {f})"
            ),
        ),
        (None, _) if bytes && m.has_flag("avx2") => (
            true,
            false,
            format!(
                "{k} in groups of {g}: vpmaddwd adds pairs of {x} x {y} products, widened to 16 bits, into each {acc} lane (this machine has avx2{})",
                insn.map_or(String::new(), |(i, _)| format!(", not the flags {i} needs"))
            ),
        ),
        (None, Some((i, flags))) => (
            false,
            false,
            format!(
                "{k} in groups of {g}: {i} needs {}, which this machine lacks (plain C there)",
                flags.join(" or ")
            ),
        ),
        (None, None) => (
            false,
            false,
            format!("{k} in groups of {g}: no instruction sums {x} x {y} products here (plain C)"),
        ),
    };
    let one =
        choice("\"none\"", format!("one iteration of {k} at a time: a multiply-add of widened lanes each"));
    let dot = choice("\"dot\"", groups.2);
    out.param(
        "dot",
        "dot",
        &format!("the reduction {k} in dot-product groups"),
        if groups.0 { vec![dot, one] } else { vec![one, dot] },
    );
    out.stmt(S::If(local("dot").eq(text("dot")), vec![step("dot", vec![int(level)])]));
    groups.1.then_some(g)
}
