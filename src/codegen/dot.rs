//! Dot-product groups (`dot`): a reduction loop printed in groups of its iterations, each
//! statement of a group one call that adds the group's products into its lanes: `vdpbf16ps`
//! or `vpdpbusd` where the compiler targets the instruction, `vpmaddwd` on widened 16-bit
//! pairs for bytes elsewhere on x86, plain C (converted, multiplied, summed in the
//! accumulation type, in order) otherwise; the helper's `#if` says which.

use super::*;
use crate::analysis::dot;
use crate::ir::TExpr;

/// The group loop being printed: its iterator and how many iterations a group sums.
#[derive(Clone, Debug)]
pub(super) struct DotGroup {
    pub(super) iter: Name,
    pub(super) group: usize,
    /// The loop's first iteration (its groups start there).
    pub(super) lb: Expr,
    /// In the last, partial group (operands packed in groups): the loop's last iteration,
    /// past which a group's elements are zeros.
    pub(super) last: Option<Expr>,
}

impl NestPrinter<'_> {
    /// Why loop `l` (marked `dot`) cannot print in groups here, if it cannot: it opens buffers
    /// of its own, a zeroing or a loop whose bounds move with it is inside.
    pub(super) fn no_groups(&self, l: &Loop, body: &[PlacedNode], locals: bool) -> Option<String> {
        if locals {
            return Some("it opens buffers of its own".into());
        }
        fn inside(g: &PlacedNode, k: &Name) -> Option<String> {
            match g {
                PlacedNode::Zero(_) => Some("an accumulator is zeroed inside it".into()),
                PlacedNode::Stmt(_) => None,
                PlacedNode::Loop(l, b) if l.lb.mentions(k) || l.ub.mentions(k) => {
                    Some(format!("the bounds of loop `{}` depend on it", l.iter))
                }
                PlacedNode::Loop(_, b) => b.iter().find_map(|g| inside(g, k)),
            }
        }
        body.iter().find_map(|g| inside(g, &l.iter))
    }

    /// Loop `l` in groups of `l.annot.dot` iterations, then one at a time for the last,
    /// partial group.
    pub(super) fn dot_loop(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        if l.annot.amx {
            self.amx_block(l, depth)?;
        }
        let g = l.annot.dot;
        let i = self.helpers.names.var(&l.iter).to_string();
        let lb = c_expr(&l.lb, self.helpers, false);
        let last = c_expr(&l.ub.add_int(-(g as i64 - 1)), self.helpers, true);
        let ub = c_expr(&l.ub, self.helpers, true);
        self.line(depth, "{");
        self.line(depth + 1, &format!("int {i} = {lb};"));
        self.line(
            depth + 1,
            &format!(
                "for (; {i} <= {last}; {i} += {g})  /* `{i}` in groups of {g}: one dot product a group */"
            ),
        );
        self.line(depth + 1, "{");
        let saved =
            self.dot.replace(DotGroup { iter: l.iter.clone(), group: g, lb: l.lb.clone(), last: None });
        let r = body.iter().try_for_each(|c| self.node(c, depth + 2));
        self.dot = saved;
        r?;
        self.line(depth + 1, "}");
        if self.reads_grouped(body, g) {
            // A buffer in groups holds the last group whole, zeros past the end: one more group.
            self.line(
                depth + 1,
                &format!(
                    "if ({i} <= {ub})  /* the last, partial group: its missing elements read as zeros */"
                ),
            );
            self.line(depth + 1, "{");
            let saved = self.dot.replace(DotGroup {
                iter: l.iter.clone(),
                group: g,
                lb: l.lb.clone(),
                last: Some(l.ub.clone()),
            });
            let r = body.iter().try_for_each(|c| self.node(c, depth + 2));
            self.dot = saved;
            r?;
            self.line(depth + 1, "}");
        } else {
            self.scalar_loop(
                &format!("for (; {i} <= {ub}; {i}++)  /* the last, partial group */"),
                body,
                depth + 1,
            )?;
        }
        self.line(depth, "}");
        Ok(())
    }

    /// Checks that the groups of loop `k` (first iteration `lb`) are those of buffer `p` (in
    /// groups of `g`): its first iteration a whole number of groups from the block's first
    /// element.
    pub(super) fn group_start(
        &self,
        p: &Packed,
        lb: &Expr,
        k: &Name,
        g: usize,
    ) -> std::result::Result<(), String> {
        let lo = p.lo.get(p.order[0]).cloned().unwrap_or_else(|| Expr::int(0));
        let from = lb.sub(&lo);
        let g = g as i64;
        let aligned = from.constant() % g == 0
            && from.affine_terms().is_some_and(|ts| ts.iter().all(|(_, c)| c % g == 0));
        if aligned {
            return Ok(());
        }
        Err(format!(
            "the groups of `{k}` start {} elements after the first of `{}`'s buffer in groups of {g}, \
             not a multiple of {g}: pack it inside `{k}`'s blocks, or make them a multiple of {g}",
            from, p.tensor
        ))
    }

    /// The buffer in groups of `g` that `leaf` reads, if it reads one.
    pub(super) fn grouped(&self, leaf: &TExpr, g: usize) -> Option<Packed> {
        let t = leaf.id()?;
        self.packed.iter().rev().find(|p| &p.tensor == t).filter(|p| p.group == g).cloned()
    }

    /// Whether a statement of `body` reads a buffer packed in groups of `g`.
    fn reads_grouped(&self, body: &[PlacedNode], g: usize) -> bool {
        body.iter().any(|x| match x {
            PlacedNode::Stmt(s) => lower(s).is_some_and(|lw| {
                let mut hit = false;
                lw.rhs.visit(&mut |n| {
                    hit |= n.is_tensor_leaf()
                        && self.packed.iter().any(|p| Some(&p.tensor) == n.id() && p.group == g)
                });
                hit
            }),
            PlacedNode::Loop(_, b) => self.reads_grouped(b, g),
            PlacedNode::Zero(_) => false,
        })
    }

    /// A statement inside a group: one call for a product whose lanes read one operand
    /// contiguously and broadcast the other, else the statement once per iteration of the
    /// group.
    pub(super) fn dot_stmt(
        &mut self,
        lw: &Lowered,
        lane: Option<&Lane>,
        d: &DotGroup,
        depth: usize,
    ) -> std::result::Result<(), String> {
        let k = &d.iter;
        let at = |x: &TExpr, t: usize| {
            x.subst_iters(&|v| (v == &**k).then(|| Expr::var_name(k).add_int(t as i64)))
        };
        if let Some((ln, bcast, vary)) = self.dot_operands(lw, lane, k) {
            let acc = bcast.dtype.compute();
            let lanes_at = |x: &TExpr| x.subst_iters(&|v| (v == &*ln.iter).then(|| ln.base.clone()));
            let grouped = self.grouped(&vary, d.group);
            let mut xs = Vec::new();
            for t in 0..d.group {
                let x = format!("&{}", self.c_leaf(&at(&bcast, t)));
                // Past the last iteration: a zero (its buffer's elements are zeros too).
                xs.push(match &d.last {
                    Some(last) if t > 0 => {
                        self.helpers.zeros.insert(bcast.dtype);
                        let kt = c_expr(&Expr::var_name(k).add_int(t as i64), self.helpers, false);
                        let end = c_expr(last, self.helpers, true);
                        format!("({kt} <= {end} ? {x} : &teml_zero_{})", bcast.dtype.name())
                    }
                    _ => x,
                });
            }
            let (ys, name) = match &grouped {
                Some(p) => {
                    self.group_start(p, &d.lb, k, d.group)?;
                    let y = lanes_at(&vary);
                    let at0 = self.packed_leaf(p, y.index_list().unwrap_or(&[]), true);
                    self.helpers.grouped_dots.insert((bcast.dtype, vary.dtype, ln.width));
                    (vec![format!("&{at0}")], grouped_dot_name(bcast.dtype, vary.dtype, ln.width))
                }
                None => {
                    let ys: Vec<String> =
                        (0..d.group).map(|t| format!("&{}", self.c_leaf(&at(&lanes_at(&vary), t)))).collect();
                    self.helpers.widens.insert((vary.dtype, acc, ln.width));
                    self.helpers.dots.insert((bcast.dtype, vary.dtype, ln.width));
                    (ys, dot_name(bcast.dtype, vary.dtype, ln.width))
                }
            };
            let lhs = self.mem(&lw.target, Some(ln), true)?.0;
            self.helpers.vtypes.insert((acc, ln.width));
            let text = format!("{lhs} = {name}({lhs}, {}, {});", xs.join(", "), ys.join(", "));
            match self.test(&lw.when) {
                Some(test) => {
                    self.line(depth, &test);
                    self.line(depth + 1, &text);
                }
                None => self.line(depth, &text),
            }
            return Ok(());
        }
        // Once per iteration of the group, in order.
        let saved = self.dot.take();
        let mut r = Ok(());
        for t in 0..d.group {
            let mut when: Vec<Expr> =
                lw.when.iter().map(|g| g.subst(k, &Expr::var_name(k).add_int(t as i64))).collect();
            if let Some(last) = &d.last
                && t > 0
            {
                when.push(last.sub(&Expr::var_name(k).add_int(t as i64)));
            }
            let copy = Lowered { target: at(&lw.target, t), rhs: at(&lw.rhs, t), when, ..lw.clone() };
            r = self.stmt(&copy, lane, depth);
            if r.is_err() {
                break;
            }
        }
        self.dot = saved;
        r
    }

    /// The lanes, the broadcast operand and the operand read along the lanes of a product a
    /// group sums in one call; none where the statement is not one.
    fn dot_operands<'l>(
        &self,
        lw: &Lowered,
        lane: Option<&'l Lane>,
        k: &Name,
    ) -> Option<(&'l Lane, TExpr, TExpr)> {
        let ln = lane.filter(|ln| ln.width > 1)?;
        let p = dot::product(lw, k).ok()?;
        let along = |x: &TExpr| x.index_list().unwrap_or(&[]).iter().any(|e| e.mentions(&ln.iter));
        let (bcast, vary) = match (along(&p.x), along(&p.y)) {
            (false, true) => (p.x, p.y),
            (true, false) => (p.y, p.x),
            _ => return None,
        };
        let kept = |x: &TExpr| x.id().is_some_and(|t| self.bands.iter().any(|b| b.tensors.contains(t)));
        if kept(&bcast) || kept(&vary) || ln.dtype != bcast.dtype.compute() {
            return None;
        }
        if crate::analysis::vector::lane_access(&vary, &ln.iter, false, &self.lane_layouts()).is_err() {
            return None;
        }
        // In the last group, rows past the end are read only from a buffer that holds zeros there.
        if let Some(d) = &self.dot
            && d.last.is_some()
            && self.grouped(&vary, d.group).is_none()
        {
            return None;
        }
        Some((ln, bcast, vary))
    }
}

/// The helper that adds a group of products of `x` (one element each, broadcast) and `y` (a
/// row of `w` lanes each) to `w` lanes of the accumulation type: `teml_dot_bf16_bf16_f16`.
pub(super) fn dot_name(x: DType, y: DType, w: usize) -> String {
    helper_name("teml_dot", x, y, w)
}

/// The helper that adds a group of products to `w` lanes from a buffer packed in groups (each
/// lane's group adjacent): `teml_dotg_u8_i8_i32x16`.
pub(super) fn grouped_dot_name(x: DType, y: DType, w: usize) -> String {
    helper_name("teml_dotg", x, y, w)
}

/// `<prefix>_<x>_<y>_<lanes of the accumulation type>`.
fn helper_name(prefix: &str, x: DType, y: DType, w: usize) -> String {
    format!("{prefix}_{}_{}_{}", x.name(), y.name(), vtype(x.compute(), w).trim_start_matches("teml_"))
}

/// x's bf16 pair as one 32-bit word (one load where the elements are adjacent, which the
/// compiler decides: the pointers differ by a constant).
const PAIR_OF_X: &str = "  uint32_t teml_pair = (uint32_t)*x1 << 16 | *x0;\n  \
                         if (x1 == x0 + 1) __builtin_memcpy(&teml_pair, x0, 4);\n";

/// x's byte quad as one 32-bit word, likewise.
const QUAD_OF_X: &str = "  uint32_t teml_quad = (uint32_t)(uint8_t)*x0 | (uint32_t)(uint8_t)*x1 << 8 | (uint32_t)(uint8_t)*x2 << 16 | (uint32_t)(uint8_t)*x3 << 24;\n  \
                         if (x1 == x0 + 1 && x2 == x0 + 2 && x3 == x0 + 3) __builtin_memcpy(&teml_quad, x0, 4);\n";

/// A helper's body: each form under its macro (`#if`, `#elif`), the plain C after `#else`; the
/// plain C alone where there is no form.
fn with_forms(c: &mut String, forms: &[(String, String, String)], plain: &str) {
    if forms.is_empty() {
        c.push_str("  /* no instruction for these types at this width: converted, multiplied and summed in order */\n");
        c.push_str(plain);
    } else {
        for (k, (cond, what, body)) in forms.iter().enumerate() {
            let _ = writeln!(c, "#{} {cond}  /* {what} */", if k == 0 { "if" } else { "elif" });
            c.push_str(body);
        }
        c.push_str("#else  /* plain C: converted, multiplied and summed in order */\n");
        c.push_str(plain);
        c.push_str("#endif\n");
    }
    c.push_str("}\n");
}

/// The C of [`grouped_dot_name`]: one load of the lanes' groups and the instruction where the
/// compiler targets it, each lane's group summed in order in plain C otherwise.
pub(super) fn grouped_dot_helper(x: DType, y: DType, w: usize) -> String {
    let acc = x.compute();
    let g = dot::group(x, y).unwrap_or(1);
    let (vt, name) = (vtype(acc, w), grouped_dot_name(x, y, w));
    let xs: Vec<String> = (0..g).map(|t| format!("const {} *x{t}", x.c_name())).collect();
    let mut c = format!(
        "/* acc + x0 y[0] + ... + x{} y[{}] in each of {w} {acc} lanes, y holding each lane's group of {g} together (packed in groups) */\n",
        g - 1,
        g - 1
    );
    let _ =
        writeln!(c, "static inline {vt} {name}({vt} acc, {}, const {} *y)\n{{", xs.join(", "), y.c_name());
    let conv =
        |v: &str| if x == DType::Bf16 { format!("teml_bf16_to_float({v})") } else { format!("(int32_t){v}") };
    let mut plain = String::new();
    let _ = writeln!(plain, "  for (int l = 0; l < {w}; l++) {{");
    for t in 0..g {
        let _ = writeln!(
            plain,
            "    acc[l] += {} * {};",
            conv(&format!("*x{t}")),
            conv(&format!("y[{g} * l + {t}]"))
        );
    }
    plain.push_str("  }\n  return acc;\n");
    let bits = w * 4 * 8;
    let (load, m) = match bits {
        512 => ("_mm512_loadu_si512(y)".to_string(), "_mm512"),
        256 => ("_mm256_loadu_si256((const __m256i *)y)".to_string(), "_mm256"),
        _ => ("_mm_loadu_si128((const __m128i *)y)".to_string(), "_mm"),
    };
    let mut branches: Vec<(String, String, String)> = Vec::new();
    let vl = if bits == 512 { "" } else { " && defined(__AVX512VL__)" };
    if x == DType::Bf16 {
        branches.push((
            format!("defined(__AVX512BF16__){vl}"),
            "vdpbf16ps: a pair of bf16 products into each float lane".into(),
            format!(
                "{PAIR_OF_X}  return ({vt}){m}_dpbf16_ps((__m{bits})acc, (__m{bits}bh){m}_set1_epi32((int)teml_pair), (__m{bits}bh){load});\n"
            ),
        ));
    } else if let Some(xu) = match (x, y) {
        (DType::U8, DType::I8) => Some(true),
        (DType::I8, DType::U8) => Some(false),
        _ => None,
    } {
        let quad = format!("{QUAD_OF_X}  __m{bits}i q = {m}_set1_epi32((int)teml_quad), v = {load};\n");
        let args = if xu { "q, v" } else { "v, q" };
        branches.push((
            format!("defined(__AVX512VNNI__){vl}"),
            "vpdpbusd: four products of an unsigned and a signed byte into each i32 lane".into(),
            format!("{quad}  return ({vt}){m}_dpbusd_epi32((__m{bits}i)acc, {args});\n"),
        ));
        if bits == 256 {
            branches.push((
                "defined(__AVXVNNI__)".into(),
                "vpdpbusd (AVX-VNNI): four products of an unsigned and a signed byte into each i32 lane"
                    .into(),
                format!("{quad}  return ({vt})_mm256_dpbusd_avx_epi32((__m256i)acc, {args});\n"),
            ));
        }
    }
    with_forms(&mut c, &branches, &plain);
    c
}

/// The C of [`dot_name`]: the instruction under the compiler's macro for it, plain C of the
/// same meaning after `#else`.
pub(super) fn dot_helper(x: DType, y: DType, w: usize) -> String {
    let acc = x.compute();
    let g = dot::group(x, y).unwrap_or(1);
    let (vt, name) = (vtype(acc, w), dot_name(x, y, w));
    let xs: Vec<String> = (0..g).map(|t| format!("const {} *x{t}", x.c_name())).collect();
    let ys: Vec<String> = (0..g).map(|t| format!("const {} *y{t}", y.c_name())).collect();
    let mut c = String::new();
    let _ = writeln!(
        c,
        "/* acc + x0 y0 + ... + x{} y{} over {w} {acc} lanes: x's elements broadcast, y's rows read along the lanes */",
        g - 1,
        g - 1
    );
    let _ = writeln!(c, "static inline {vt} {name}({vt} acc, {}, {})\n{{", xs.join(", "), ys.join(", "));
    let widen = widen_name(y, acc, w);
    let conv = |t: usize| {
        if x == DType::Bf16 { format!("teml_bf16_to_float(*x{t})") } else { format!("(int32_t)*x{t}") }
    };
    let mut plain = String::new();
    for t in 0..g {
        let _ = writeln!(plain, "  acc += {} * {widen}(y{t});", conv(t));
    }
    plain.push_str("  return acc;\n");
    let branches = if x == DType::Bf16 { bf16_branches(w, &vt) } else { byte_branches(x, y, w, &vt) };
    with_forms(&mut c, &branches, &plain);
    c
}

/// `vdpbf16ps` at `w` float lanes: each lane adds x0 y0[l] + x1 y1[l]; y's two rows
/// interleaved into pairs.
fn bf16_branches(w: usize, vt: &str) -> Vec<(String, String, String)> {
    let pair = "(int)teml_pair";
    let body = match w {
        16 => {
            let idx: Vec<String> =
                (0..32).map(|e| (if e % 2 == 0 { e / 2 } else { 16 + e / 2 }).to_string()).collect();
            format!(
                "  static const uint16_t pairs[32] = {{{}}};\n  \
                 __m512i y = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y0)), _mm256_loadu_si256((const __m256i *)y1), 1);\n  \
                 y = _mm512_permutexvar_epi16(_mm512_loadu_si512(pairs), y);\n  \
                 return ({vt})_mm512_dpbf16_ps((__m512)acc, (__m512bh)_mm512_set1_epi32({pair}), (__m512bh)y);\n",
                idx.join(", ")
            )
        }
        8 => format!(
            "  __m128i r0 = _mm_loadu_si128((const __m128i *)y0), r1 = _mm_loadu_si128((const __m128i *)y1);\n  \
             __m256i y = _mm256_set_m128i(_mm_unpackhi_epi16(r0, r1), _mm_unpacklo_epi16(r0, r1));\n  \
             return ({vt})_mm256_dpbf16_ps((__m256)acc, (__m256bh)_mm256_set1_epi32({pair}), (__m256bh)y);\n"
        ),
        4 => format!(
            "  __m128i y = _mm_unpacklo_epi16(_mm_loadl_epi64((const __m128i *)y0), _mm_loadl_epi64((const __m128i *)y1));\n  \
             return ({vt})_mm_dpbf16_ps((__m128)acc, (__m128bh)_mm_set1_epi32({pair}), (__m128bh)y);\n"
        ),
        _ => return Vec::new(),
    };
    let cond = if w == 16 {
        "defined(__AVX512BF16__) && defined(__AVX512BW__)".to_string()
    } else {
        "defined(__AVX512BF16__) && defined(__AVX512VL__)".to_string()
    };
    // x's pair in one 32-bit load where its elements are adjacent (decided at compile time).
    let body = format!("{PAIR_OF_X}{body}");
    vec![(cond, "vdpbf16ps: a pair of bf16 products into each float lane".into(), body)]
}

/// Byte quads at `w` i32 lanes: `vpdpbusd` for an unsigned and a signed operand (AVX512-VNNI,
/// AVX-VNNI), `vpmaddwd` on pairs widened to 16 bits for any two byte types (exact: no
/// saturation).
fn byte_branches(x: DType, y: DType, w: usize, vt: &str) -> Vec<(String, String, String)> {
    // x's quad in one 32-bit load where its elements are adjacent (decided at compile time).
    let quad_of = QUAD_OF_X;
    let quad = "(int)teml_quad";
    // y's four rows of w bytes interleaved into quads: byte 4l+t is row t's lane l.
    let rows = |load: &str| {
        format!(
            "  __m128i r0 = {load}((const __m128i *)y0), r1 = {load}((const __m128i *)y1), r2 = {load}((const __m128i *)y2), r3 = {load}((const __m128i *)y3);\n  \
             __m128i a = _mm_unpacklo_epi8(r0, r1), c = _mm_unpacklo_epi8(r2, r3);\n"
        )
    };
    let mut out = Vec::new();
    let unsigned_first = match (x, y) {
        (DType::U8, DType::I8) => Some(true),
        (DType::I8, DType::U8) => Some(false),
        _ => None,
    };
    if let Some(xu) = unsigned_first {
        let args = |xq: &str, yq: &str| if xu { format!("{xq}, {yq}") } else { format!("{yq}, {xq}") };
        match w {
            16 => {
                let body = format!(
                    "{quad_of}{}  __m128i b = _mm_unpackhi_epi8(r0, r1), d = _mm_unpackhi_epi8(r2, r3);\n  \
                     __m512i y = _mm512_castsi128_si512(_mm_unpacklo_epi16(a, c));\n  \
                     y = _mm512_inserti32x4(y, _mm_unpackhi_epi16(a, c), 1);\n  \
                     y = _mm512_inserti32x4(y, _mm_unpacklo_epi16(b, d), 2);\n  \
                     y = _mm512_inserti32x4(y, _mm_unpackhi_epi16(b, d), 3);\n  \
                     return ({vt})_mm512_dpbusd_epi32((__m512i)acc, {});\n",
                    rows("_mm_loadu_si128"),
                    args(&format!("_mm512_set1_epi32({quad})"), "y")
                );
                // With AVX512-VBMI the rows are interleaved by one vpermb instead of eight unpacks.
                let idx: Vec<String> = (0..64).map(|e| (16 * (e % 4) + e / 4).to_string()).collect();
                let vbmi = format!(
                    "{quad_of}  static const uint8_t quads[64] = {{{}}};\n  \
                     __m512i y = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)y0));\n  \
                     y = _mm512_inserti32x4(y, _mm_loadu_si128((const __m128i *)y1), 1);\n  \
                     y = _mm512_inserti32x4(y, _mm_loadu_si128((const __m128i *)y2), 2);\n  \
                     y = _mm512_inserti32x4(y, _mm_loadu_si128((const __m128i *)y3), 3);\n  \
                     y = _mm512_permutexvar_epi8(_mm512_loadu_si512(quads), y);\n  \
                     return ({vt})_mm512_dpbusd_epi32((__m512i)acc, {});\n",
                    idx.join(", "),
                    args(&format!("_mm512_set1_epi32({quad})"), "y")
                );
                out.push((
                    "defined(__AVX512VNNI__) && defined(__AVX512VBMI__)".to_string(),
                    "vpdpbusd: four products of an unsigned and a signed byte into each i32 lane".to_string(),
                    vbmi,
                ));
                out.push((
                    "defined(__AVX512VNNI__)".to_string(),
                    "vpdpbusd: four products of an unsigned and a signed byte into each i32 lane".to_string(),
                    body,
                ));
            }
            8 => {
                let y8 = format!(
                    "{quad_of}{}  __m256i y = _mm256_set_m128i(_mm_unpackhi_epi16(a, c), _mm_unpacklo_epi16(a, c));\n",
                    rows("_mm_loadl_epi64")
                );
                let q = format!("_mm256_set1_epi32({quad})");
                out.push((
                    "defined(__AVX512VNNI__) && defined(__AVX512VL__)".to_string(),
                    "vpdpbusd: four products of an unsigned and a signed byte into each i32 lane".to_string(),
                    format!("{y8}  return ({vt})_mm256_dpbusd_epi32((__m256i)acc, {});\n", args(&q, "y")),
                ));
                out.push((
                    "defined(__AVXVNNI__)".to_string(),
                    "vpdpbusd (AVX-VNNI): four products of an unsigned and a signed byte into each i32 lane"
                        .to_string(),
                    format!("{y8}  return ({vt})_mm256_dpbusd_avx_epi32((__m256i)acc, {});\n", args(&q, "y")),
                ));
            }
            _ => {}
        }
    }
    // vpmaddwd: x's pairs and y's rows widened to 16 bits, two pairs a lane summed exactly.
    let cvt = |d: DType| if d == DType::U8 { "cvtepu8_epi16" } else { "cvtepi8_epi16" };
    let xpair = |a: usize, b: usize| {
        format!("(int)((uint32_t)(uint16_t)(int16_t)*x{b} << 16 | (uint16_t)(int16_t)*x{a})")
    };
    match w {
        8 => {
            let body = format!(
                "  __m128i w0 = _mm_{c}(_mm_loadl_epi64((const __m128i *)y0)), w1 = _mm_{c}(_mm_loadl_epi64((const __m128i *)y1));\n  \
                 __m128i w2 = _mm_{c}(_mm_loadl_epi64((const __m128i *)y2)), w3 = _mm_{c}(_mm_loadl_epi64((const __m128i *)y3));\n  \
                 __m256i p01 = _mm256_set_m128i(_mm_unpackhi_epi16(w0, w1), _mm_unpacklo_epi16(w0, w1));\n  \
                 __m256i p23 = _mm256_set_m128i(_mm_unpackhi_epi16(w2, w3), _mm_unpacklo_epi16(w2, w3));\n  \
                 __m256i s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_set1_epi32({}), p01), _mm256_madd_epi16(_mm256_set1_epi32({}), p23));\n  \
                 return ({vt})_mm256_add_epi32((__m256i)acc, s);\n",
                xpair(0, 1),
                xpair(2, 3),
                c = cvt(y)
            );
            out.push((
                "defined(__AVX2__)".to_string(),
                "vpmaddwd: bytes widened to 16 bits, two products into each i32 lane twice".to_string(),
                body,
            ));
        }
        16 => {
            let body = format!(
                "  __m256i w0 = _mm256_{c}(_mm_loadu_si128((const __m128i *)y0)), w1 = _mm256_{c}(_mm_loadu_si128((const __m128i *)y1));\n  \
                 __m256i w2 = _mm256_{c}(_mm_loadu_si128((const __m128i *)y2)), w3 = _mm256_{c}(_mm_loadu_si128((const __m128i *)y3));\n  \
                 __m256i l01 = _mm256_unpacklo_epi16(w0, w1), h01 = _mm256_unpackhi_epi16(w0, w1);\n  \
                 __m256i l23 = _mm256_unpacklo_epi16(w2, w3), h23 = _mm256_unpackhi_epi16(w2, w3);\n  \
                 __m512i p01 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(l01, h01, 0x20)), _mm256_permute2x128_si256(l01, h01, 0x31), 1);\n  \
                 __m512i p23 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_permute2x128_si256(l23, h23, 0x20)), _mm256_permute2x128_si256(l23, h23, 0x31), 1);\n  \
                 __m512i s = _mm512_add_epi32(_mm512_madd_epi16(_mm512_set1_epi32({}), p01), _mm512_madd_epi16(_mm512_set1_epi32({}), p23));\n  \
                 return ({vt})_mm512_add_epi32((__m512i)acc, s);\n",
                xpair(0, 1),
                xpair(2, 3),
                c = cvt(y)
            );
            out.push((
                "defined(__AVX512BW__)".to_string(),
                "vpmaddwd: bytes widened to 16 bits, two products into each i32 lane twice".to_string(),
                body,
            ));
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_name_their_instruction_and_keep_a_plain_form() {
        let c = dot_helper(DType::Bf16, DType::Bf16, 16);
        assert!(
            c.contains("teml_dot_bf16_bf16_f16(teml_f16 acc, const teml_bf16 *x0, const teml_bf16 *x1"),
            "{c}"
        );
        assert!(c.contains("#if defined(__AVX512BF16__)") && c.contains("_mm512_dpbf16_ps"), "{c}");
        assert!(c.contains("#else") && c.contains("teml_widen_bf16_f16(y1)"), "{c}");
        let c = dot_helper(DType::U8, DType::I8, 8);
        assert!(c.contains("_mm256_dpbusd_avx_epi32") && c.contains("_mm256_madd_epi16"), "{c}");
        let c = dot_helper(DType::I8, DType::I8, 16);
        assert!(!c.contains("dpbusd") && c.contains("_mm512_madd_epi16"), "{c}");
        let c = dot_helper(DType::U8, DType::I8, 4);
        assert!(c.contains("no instruction") && !c.contains("#if"), "{c}");
    }
}
