//! How each loop prints, decided before any of it is printed: the second half of the plan
//! ([`super::plan`] plans the kernel as a whole). A loop is planned just before it prints, in
//! the context of the loops around it (what a split around it makes known, the register bands
//! and packed panels around it, the collapsed band it is in), so a split loop's two parts and
//! a band's full and partial blocks are each planned in their own context. The planner reads
//! the printer's state and changes none of it; the printer follows the plan.

use super::*;

/// How one loop prints.
#[derive(Debug)]
pub(super) enum LoopPlan {
    /// In two parts (the copies of a partial block below it are guarded): up to `at`, where
    /// the conditions `conds` hold and its statements run untested, then the rest, where they
    /// are tested.
    Split {
        /// The last iteration of the first part.
        at: Expr,
        /// The conditions that hold in the first part.
        conds: Vec<Expr>,
    },
    /// Its packed panels (`pack`) copied before it, the loop reading them.
    Packed(Vec<Panel>),
    /// A block of lanes that sum into an element a band keeps, partial at some iteration of
    /// the band: whole vectors where it is full, one lane at a time in the last block.
    SummingLanes(vector::Block),
    /// A `registers` band.
    Band(BandPlan),
    /// The loop with its marks ([`MarkedPlan`], planned as it prints).
    Marked,
}

/// One packed panel: the block of `tensor` a loop reads, and how it is laid out.
#[derive(Debug)]
pub(super) struct Panel {
    /// The packed tensor.
    pub(super) tensor: Name,
    /// The block one execution of the loop reads.
    pub(super) block: crate::analysis::packing::Footprint,
    /// Its layout in the panel (order, padding).
    pub(super) layout: crate::ir::PackLayout,
    /// The tensor's extents (the copy stops at its edge).
    pub(super) dims: Vec<Expr>,
}

/// How a `registers` band prints.
#[derive(Debug)]
pub(super) enum BandPlan {
    /// The last, partial block of rows (copies tested at each statement): no registers.
    PartialRows,
    /// Full blocks of lanes with the registers, the last, partial block without.
    Tails(Vec<Tail>),
    /// Every block full: the registers across the whole band.
    Whole,
}

/// How a loop with its marks prints.
#[derive(Debug)]
pub(super) struct MarkedPlan {
    /// An inner loop of a collapsed band: the band's one pragma covers it.
    pub(super) in_band: bool,
    /// How its marks are realized (`analysis::kernel::realise`): independent iterations, or
    /// private accumulators of a reduction; none for an unmarked loop.
    pub(super) realised: Option<Plan>,
    /// Explicit vector lanes, or how the loop prints otherwise.
    pub(super) form: MarkedForm,
}

/// A marked loop as explicit vectors, or as a loop with a pragma.
#[derive(Debug)]
pub(super) enum MarkedForm {
    /// Blocks of lanes, or whole vectors and a scalar remainder.
    Lanes(Lanes),
    /// A C loop.
    Scalar {
        /// Why the lanes are left to the compiler, where they are.
        simd_note: Option<String>,
        /// Its pragma before any reduction clause (`#pragma omp parallel for schedule(static,
        /// 1)`, `collapse(n)`).
        pragma: Option<String>,
        /// The loops of a collapsed band it opens, after it.
        collapses: Option<usize>,
        /// The blocks of the tensors it stores per iteration (`store_at`), or why one cannot
        /// be (raised where the buffers print, after the accumulators).
        locals: std::result::Result<Vec<(Name, crate::analysis::packing::Footprint)>, String>,
        /// Its body is one C statement (no braces).
        single: bool,
    },
}

impl NestPrinter<'_> {
    /// How loop `l` prints, here.
    pub(super) fn plan_loop(
        &self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
    ) -> std::result::Result<LoopPlan, String> {
        if let Some((at, conds)) = self.split_point(l, body, self.collapsed) {
            return Ok(LoopPlan::Split { at, conds });
        }
        if !l.annot.pack.is_empty() {
            return self.plan_panels(l).map(LoopPlan::Packed);
        }
        if let Some(block) = self.summing_block(l, body) {
            return Ok(LoopPlan::SummingLanes(block));
        }
        if !l.annot.registers.is_empty() {
            return self.plan_band(l, body).map(LoopPlan::Band);
        }
        Ok(LoopPlan::Marked)
    }

    /// The panels loop `l` packs, in its order.
    fn plan_panels(&self, l: &Arc<Loop>) -> std::result::Result<Vec<Panel>, String> {
        let outer: Vec<Name> = self.outer.iter().map(|o| o.iter.clone()).collect();
        let mut panels = Vec::new();
        for t in &l.annot.pack {
            if self.laid.contains_key(t) {
                return Err(marks::rule(Mark::Pack, Mark::Layout, Scope::Kernel).words(&[("t", t)]));
            }
            let block = crate::analysis::packing::footprint(&outer, l, t)?;
            let layout = l.annot.pack_layout.get(t).cloned().unwrap_or_default();
            let dims = self
                .params
                .iter()
                .find(|p| p.accessed() == t)
                .map(|p| p.dims.clone())
                .ok_or_else(|| format!("cannot pack `{t}`: not a tensor of the kernel"))?;
            panels.push(Panel { tensor: t.clone(), block, layout, dims });
        }
        Ok(panels)
    }

    /// How the `registers` band `l` prints: every tensor it keeps checked first
    /// (`analysis::registers`).
    fn plan_band(&self, l: &Arc<Loop>, body: &[PlacedNode]) -> std::result::Result<BandPlan, String> {
        let outer: Vec<&Loop> = self.outer.iter().collect();
        for t in &l.annot.registers {
            crate::analysis::registers::units(&outer, l, t, &self.lane_layouts())?;
        }
        // Copies of a partial block's end, tested at each statement: their elements may not
        // exist, so none is loaded before the loop.
        let mut conds = Vec::new();
        body.iter().for_each(|g| g.conditions(&mut conds));
        if conds.iter().any(|g| !self.split.known.contains(g)) {
            return Ok(BandPlan::PartialRows);
        }
        let mut tails: Vec<Tail> = Vec::new();
        let mut inner = vec![l.iter.clone()];
        body.iter().for_each(|g| g.iters(&mut inner));
        partial_lanes(body, &inner, &mut tails);
        Ok(if tails.is_empty() { BandPlan::Whole } else { BandPlan::Tails(tails) })
    }

    /// How loop `l`, with its marks, prints here (its own header the last of the loops around).
    pub(super) fn plan_marked(
        &self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
    ) -> std::result::Result<MarkedPlan, String> {
        let in_band = self.collapsed > 0;
        let orig = stands_for(&self.split.parts, l);
        // A part printed without its loop's marks (one lane at a time) needs no plan.
        let unmarked = !(l.annot.parallel || l.annot.vectorize);
        let realised =
            if in_band || unmarked { None } else { kernel::realise(self.state, self.nest, &orig, body)? };
        let mut simd_note = None;
        // Lanes that sum into elements a band keeps: the band holds the partial sums.
        let summed = match &realised {
            Some(Plan::Reduction(ts)) => ts.iter().all(|t| {
                t.op == Update::Add
                    && t.leaf.id().is_some_and(|n| self.bands.iter().any(|b| b.tensors.contains(n)))
            }),
            _ => false,
        };
        if l.annot.vectorize && !l.annot.parallel && (realised == Some(Plan::Independent) || summed) {
            match self.explicit_lanes(l, body) {
                Ok(lanes) => return Ok(MarkedPlan { in_band, realised, form: MarkedForm::Lanes(lanes) }),
                Err(why) => simd_note = Some(why),
            }
        }
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
        let mut collapses = None;
        if l.annot.collapse > 1
            && let Some(p) = pragma.as_mut()
        {
            p.push_str(&format!(" collapse({})", l.annot.collapse));
            collapses = Some(l.annot.collapse - 1);
        }
        let locals = self.plan_locals(l);
        // One C statement: a statement, or a loop that is not printed as blocks of lanes (asked
        // as the loop inside will be: within the collapsed band this loop leaves).
        let collapsed = collapses.unwrap_or(if in_band { self.collapsed - 1 } else { self.collapsed });
        let single = locals.as_ref().is_ok_and(|ls| ls.is_empty())
            && match body {
                [PlacedNode::Stmt(_)] => true,
                [PlacedNode::Loop(c, b)] => {
                    !(c.annot.vectorize && !c.annot.parallel && self.explicit_lanes(c, b).is_ok())
                        && self.split_point(c, b, collapsed).is_none()
                }
                _ => false,
            };
        Ok(MarkedPlan {
            in_band,
            realised,
            form: MarkedForm::Scalar { simd_note, pragma, collapses, locals, single },
        })
    }

    /// The blocks of the tensors loop `l` stores per iteration (`store_at`).
    fn plan_locals(
        &self,
        l: &Loop,
    ) -> std::result::Result<Vec<(Name, crate::analysis::packing::Footprint)>, String> {
        // The loops around `l` (its own header is the last of `outer` while it prints).
        let mut outer: Vec<Name> = self.outer.iter().map(|o| o.iter.clone()).collect();
        if outer.last() == Some(&l.iter) {
            outer.pop();
        }
        let constants = |v: &str| self.state.constant(v);
        l.annot.store_at.iter().map(|t| Ok((t.clone(), storage::block(&outer, l, t, &constants)?))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Annotations, LNode};

    fn lp(iter: &str, lb: Expr, ub: Expr, annot: Annotations, body: Vec<LNode>) -> Arc<Loop> {
        Arc::new(Loop { iter: Name::from(iter), lb, ub, annot, body })
    }

    /// A printer over `nest` with nothing around.
    fn with_printer<R>(nest: &Nest, f: impl FnOnce(&NestPrinter<'_>) -> R) -> R {
        let state = State::new();
        let mut helpers = Helpers::default();
        let mut count = 0;
        let laid = BTreeMap::new();
        let buffers = vector::Layouts::default();
        let p = NestPrinter {
            out: String::new(),
            helpers: &mut helpers,
            accs: Accumulators { vars: BTreeMap::new(), count: &mut count },
            params: &[],
            state: &state,
            nest,
            collapsed: 0,
            target: Target { vector_bits: 512 },
            outer: Vec::new(),
            bands: Vec::new(),
            packed: Vec::new(),
            split: Splits { known: Vec::new(), tested: Vec::new(), parts: Vec::new(), guarded: true },
            auto: &[],
            laid: &laid,
            buffers: &buffers,
            stream: None,
            dot: None,
        };
        f(&p)
    }

    #[test]
    fn a_loop_over_guarded_copies_splits_where_they_start_to_fail() {
        // for i in [0, 9]: a copy guarded by 7 - i >= 0 (the last row of a partial block).
        let g = Expr::int(7).sub(&Expr::var("i"));
        let inner = lp("j", Expr::int(0), Expr::int(3), Annotations::default(), Vec::new());
        let l = lp("i", Expr::int(0), Expr::int(9), Annotations::default(), vec![LNode::Loop(inner.clone())]);
        let nest = Nest::new(vec![LNode::Loop(l.clone())], Vec::new());
        let zero = Zero {
            target: crate::ir::TNode::leaf(
                crate::ir::Op::Lit(0.0),
                crate::ir::Shape::Dims(vec![]),
                crate::ir::Iters::Bullet,
                crate::ir::DType::Double,
            ),
            loops: Vec::new(),
            guard: Vec::new(),
            when: vec![g.clone()],
        };
        let body = vec![PlacedNode::Zero(zero)];
        let plan = with_printer(&nest, |p| p.plan_loop(&l, &body)).unwrap();
        match plan {
            LoopPlan::Split { at, conds } => {
                assert_eq!(at, Expr::int(7));
                assert_eq!(conds, vec![g]);
            }
            other => panic!("expected a split, found {other:?}"),
        }
        // Inside a collapsed band, the loop cannot be cut in two.
        let plan = with_printer(&nest, |p| p.split_point(&l, &body, 1));
        assert!(plan.is_none());
    }

    #[test]
    fn an_unmarked_loop_prints_as_it_is() {
        let l = lp("i", Expr::int(0), Expr::int(9), Annotations::default(), Vec::new());
        let nest = Nest::new(vec![LNode::Loop(l.clone())], Vec::new());
        let plan = with_printer(&nest, |p| p.plan_loop(&l, &[])).unwrap();
        assert!(matches!(plan, LoopPlan::Marked));
        let marked = with_printer(&nest, |p| p.plan_marked(&l, &[])).unwrap();
        assert!(!marked.in_band && marked.realised.is_none());
        assert!(
            matches!(marked.form, MarkedForm::Scalar { pragma: None, collapses: None, single: false, .. }),
            "{marked:?}"
        );
    }
}
