//! Explicit vector lanes: blocks of lanes, whole vectors with a scalar remainder, streaming
//! stores, and lanes that sum into a band's partial sums.

use super::*;

/// A block of lanes of an explicit vector loop: its iterator stands for `base`, `base+1`, ...,
/// `base+width-1`.
pub(super) struct Lane {
    pub(super) iter: Name,
    pub(super) base: Expr,
    pub(super) width: usize,
    pub(super) dtype: DType,
}

impl NestPrinter<'_> {
    /// A scalar expression broadcast to every lane.
    pub(super) fn splat(&mut self, ln: &Lane, x: &str) -> String {
        self.helpers.splats.insert((ln.dtype, ln.width));
        format!("teml_splat_{}({x})", vtype(ln.dtype, ln.width))
    }

    /// `fmax(a, b)` (or `fmin`) over lanes `ln` of two operands, each `(text, is a vector)`:
    /// a scalar one broadcast to every lane.
    pub(super) fn extreme(&mut self, ln: &Lane, max: bool, a: (&str, bool), b: (&str, bool)) -> String {
        let [a, b] = [a, b].map(|(x, v)| if v { x.to_string() } else { self.splat(ln, x) });
        self.helpers.vtypes.insert((ln.dtype, ln.width));
        self.helpers.extremes.insert((ln.dtype, ln.width, max));
        format!("{}({a}, {b})", extreme_name(ln.dtype, ln.width, max))
    }

    /// The block of a vectorized loop inside a band whose lanes sum into an element the band
    /// keeps, where the block is partial at some iteration of the band (a strip-mined
    /// reduction loop whose extent the factor does not divide).
    pub(super) fn summing_block(&self, l: &Loop, body: &[PlacedNode]) -> Option<vector::Block> {
        if !l.annot.vectorize || self.bands.is_empty() {
            return None;
        }
        let block = vector::block(l).filter(|b| !b.full_when.is_empty())?;
        let sums = body.iter().any(|g| match g {
            PlacedNode::Stmt(s) => lower(s).is_some_and(|lw| {
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
    pub(super) fn summing_lanes(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
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

    /// The lanes of a vectorized loop that carries no dependence, printed with explicit
    /// vectors, or why it keeps its pragma.
    pub(super) fn explicit_lanes(&self, l: &Loop, body: &[PlacedNode]) -> std::result::Result<Lanes, String> {
        let mut conds = Vec::new();
        body.iter().for_each(|g| g.conditions(&mut conds));
        if let Some(g) = conds.iter().find(|g| g.mentions(&l.iter) && !self.split.known.contains(g)) {
            return Err(format!("a statement runs only where {g} >= 0, which depends on `{}`", l.iter));
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
                PlacedNode::Stmt(_) => {}
                PlacedNode::Zero(z) if z.loops.is_empty() && z.guard.iter().all(|g| !g.mentions(&l.iter)) => {
                }
                PlacedNode::Zero(_) => {
                    return Err(format!("an accumulator is zeroed by a loop inside `{}`", l.iter));
                }
                PlacedNode::Loop(..) => return Err(format!("loop `{}` has a loop inside", l.iter)),
            }
        }
        // A scalar function (`sqrt`, `exp`, ...) has no vector form in C's vector extensions:
        // the compiler vectorizes it under the pragma (with the vector math library it has).
        // `fmax` and `fmin` have one (`extreme_helper`), except as a reduction across the lanes
        // (its partial results would be summed).
        for g in body {
            let PlacedNode::Stmt(s) = g else { continue };
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
        vector::lanes(l, &target, !self.bands.is_empty(), &sums, &self.lane_layouts())
    }

    /// The layouts lanes are asked of: the kernel's, and the buffers of the loops around whose
    /// dimensions are reordered (`pack` or `store_at` with an order: `Q[i][k]` in a buffer
    /// laid out `[k][i]` is a lane access of `i`). A dimension left out of a buffer per
    /// iteration is fixed there: it goes first.
    pub(super) fn lane_layouts(&self) -> std::borrow::Cow<'_, vector::Layouts> {
        let reordered: Vec<&Packed> =
            self.packed.iter().filter(|p| !p.order.iter().enumerate().all(|(k, d)| k == *d)).collect();
        if reordered.is_empty() {
            return std::borrow::Cow::Borrowed(self.buffers);
        }
        let mut all = self.buffers.clone();
        for p in reordered {
            let mut order: Vec<usize> = (0..p.rank).filter(|d| !p.order.contains(d)).collect();
            order.extend(&p.order);
            all.insert(p.tensor.clone(), crate::ir::Layout { order, ..Default::default() });
        }
        std::borrow::Cow::Owned(all)
    }

    /// A vectorized loop with explicit vectors: blocks of lanes, or a loop of whole vectors
    /// and a scalar remainder.
    pub(super) fn vector_loop(
        &mut self,
        l: &Loop,
        body: &[PlacedNode],
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
                let lanes: Vec<Lane> = blocks
                    .iter()
                    .map(|(off, w)| Lane {
                        iter: l.iter.clone(),
                        base: l.lb.add_int(*off),
                        width: *w,
                        dtype: *dtype,
                    })
                    .collect();
                // The order that keeps fewer values live, since the compiler keeps the order it
                // is given: each statement for every block at once where there are as many
                // statements as blocks (a register tile's rows: each row's broadcast is used by
                // its blocks at once, and only the blocks' vectors of the shared operand stay
                // live: 6 rows x 2 vectors take 12 + 2 + 1 registers, where block by block the 6
                // broadcasts stay live across the blocks and gcc spills accumulators of a 16-register
                // machine), block by block otherwise. Legal either way: a vectorized loop carries no
                // dependence, so its iterations run in any order.
                if body.len() >= lanes.len() {
                    for g in body {
                        for lane in &lanes {
                            self.lanes_body(std::slice::from_ref(g), lane, depth)?;
                        }
                    }
                } else {
                    for lane in &lanes {
                        self.lanes_body(body, lane, depth)?;
                    }
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
    pub(super) fn scalar_loop(
        &mut self,
        header: &str,
        body: &[PlacedNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
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
    pub(super) fn streamed(
        &self,
        l: &Loop,
        body: &[PlacedNode],
    ) -> std::result::Result<Option<crate::ir::TExpr>, String> {
        let Some(t) = l.annot.stream.first() else { return Ok(None) };
        if self.bands.iter().any(|b| b.tensors.contains(t)) {
            return Err(format!("`{t}` not streamed: it is kept in registers around `{}`", l.iter));
        }
        let target = body.iter().find_map(|g| match g {
            PlacedNode::Stmt(s) => {
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

    pub(super) fn lanes_body(
        &mut self,
        body: &[PlacedNode],
        lane: &Lane,
        depth: usize,
    ) -> std::result::Result<(), String> {
        for g in body {
            match g {
                PlacedNode::Stmt(s) => {
                    let Some(lw) = lower(s) else { return Err(format!("not an assignment: {s}")) };
                    self.stmt(&lw, Some(lane), depth)?;
                }
                PlacedNode::Zero(z) => self.zero(z, Some(lane), depth)?,
                PlacedNode::Loop(..) => return Err("a loop inside explicit vector lanes".into()),
            }
        }
        Ok(())
    }
}
