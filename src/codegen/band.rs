//! Register bands (`registers`): the variables a band keeps, loaded before it and stored after,
//! with full blocks of lanes split from a partial last one.

use super::*;

/// A vectorized loop whose upper bound is a strip-mined block's `min` (a tail).
#[derive(Debug)]
pub(super) struct Tail {
    /// Its iterator.
    pub(super) iter: Name,
    /// Its upper bound as written.
    pub(super) ub: Expr,
    /// Its full blocks.
    pub(super) block: vector::Block,
}

/// The vectorized loops below that are strip-mined blocks with a partial last one, whose
/// fullness does not change inside the band (none of the `inner` iterators decides it).
pub(super) fn partial_lanes(body: &[PlacedNode], inner: &[Name], out: &mut Vec<Tail>) {
    for g in body {
        if let PlacedNode::Loop(l, b) = g {
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
pub(super) fn full_blocks(
    body: &[PlacedNode],
    tails: &[Tail],
    parts: &mut Vec<(Arc<Loop>, Arc<Loop>)>,
) -> Vec<PlacedNode> {
    body.iter()
        .map(|g| match g {
            PlacedNode::Loop(l, b) => {
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
                PlacedNode::Loop(l2, full_blocks(b, tails, parts))
            }
            other => other.clone(),
        })
        .collect()
}

/// A loop marked `registers`, being printed: the variables its body has asked for so far.
pub(super) struct Band {
    /// The tensors it keeps.
    pub(super) tensors: Vec<Name>,
    /// Its iterator and those of the loops inside it.
    pub(super) inner: Vec<Name>,
    /// The variables, in order of first use.
    pub(super) regs: Vec<Reg>,
    /// The kept tensors some statement of the band sums non-integers into while they are
    /// integers (`u8 += float`): each update truncates to the element's own type, so their
    /// variables are of that type.
    pub(super) truncating: Vec<Name>,
}

/// The integer tensors the statements below `items` sum values that are not integers into
/// ([`crate::ir::Lowered::truncates`]).
fn truncating(items: &[crate::ir::LNode], out: &mut Vec<Name>) {
    use crate::ir::LNode;
    for x in items {
        match x {
            LNode::Loop(l) => truncating(&l.body, out),
            LNode::Stmt(s) => {
                if let Some(lw) = lower(s).filter(|lw| lw.truncates())
                    && let Some(t) = lw.target.id()
                    && !out.contains(t)
                {
                    out.push(t.clone());
                }
            }
        }
    }
}

/// One variable of a band: an element, or a block of lanes.
pub(super) struct Reg {
    /// The C text of the memory it stands for (an lvalue).
    pub(super) mem: String,
    /// The variable.
    pub(super) var: String,
    /// Its C type.
    pub(super) ty: String,
    /// The element type of the memory it stands for.
    pub(super) dtype: DType,
    /// What it is looked up by: the memory, and for a sum, the block of lanes.
    pub(super) key: String,
    /// Written in the band (stored back after it).
    pub(super) written: bool,
    /// A vector of partial sums of one element (every lane adds to it): loaded into lane 0
    /// of the first such variable, stored as the sum of all lanes of all of them.
    pub(super) summed: Option<(DType, usize)>,
    /// The elements of lanes that are not adjacent ([`vector::gathered`]), in lane order:
    /// loaded one by one into the vector, stored one by one from it (empty: `mem` itself).
    pub(super) gather: Vec<String>,
}

impl NestPrinter<'_> {
    /// A loop marked `registers`: its variables declared and loaded before it, stored after.
    /// Where its lanes are strip-mined blocks that are full but for the last (a tail), the
    /// registers are kept for the full blocks, and the last runs without them.
    pub(super) fn band(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
        plan: BandPlan,
        depth: usize,
    ) -> std::result::Result<(), String> {
        if let BandPlan::PartialRows = plan {
            self.line(depth, "/* the last, partial block of rows: no registers */");
            return self.marked_loop_inside(l, body, depth);
        }
        if let BandPlan::Tails(tails) = plan {
            let mut conds: Vec<String> = Vec::new();
            for t in &tails {
                for (a, u) in &t.block.full_when {
                    let c = format!("{} <= {}", c_expr(a, self.helpers, true), c_expr(u, self.helpers, true));
                    if !conds.contains(&c) {
                        conds.push(c);
                    }
                }
            }
            let n = self.split.parts.len();
            let full: Vec<PlacedNode> = full_blocks(body, &tails, &mut self.split.parts);
            self.line(depth, &format!("if ({})  /* full blocks of lanes */", conds.join(" && ")));
            self.line(depth, "{");
            let r = self.band_with_registers(l, &full, depth + 1);
            self.split.parts.truncate(n);
            r?;
            self.line(depth, "}");
            self.line(depth, "else  /* the last, partial block: no registers */");
            self.line(depth, "{");
            self.marked_loop_inside(l, body, depth + 1)?;
            self.line(depth, "}");
            return Ok(());
        }
        self.band_with_registers(l, body, depth)
    }

    /// The band `l` with its variables (every block of lanes inside it full).
    pub(super) fn band_with_registers(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        let mut inner = vec![l.iter.clone()];
        for x in &l.body {
            x.loop_iters(&mut inner);
        }
        let mut truncates = Vec::new();
        truncating(&l.body, &mut truncates);
        self.bands.push(Band {
            tensors: l.annot.registers.clone(),
            inner,
            regs: Vec::new(),
            truncating: truncates,
        });
        let saved = std::mem::take(&mut self.out);
        let r = self.marked_loop_inside(l, body, depth + 1);
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
                None if !r.gather.is_empty() => format!("({}){{{}}}", r.ty, r.gather.join(", ")),
                None => super::prelude::loaded(r.dtype, &r.mem),
                Some(_) if loaded.contains(&r.mem.as_str()) => {
                    if r.ty.starts_with("teml_") {
                        format!("({}){{0}}", r.ty)
                    } else {
                        "0".into()
                    }
                }
                Some(_) => {
                    loaded.push(&r.mem);
                    if r.ty.starts_with("teml_") {
                        format!("({}){{{}}}", r.ty, r.mem)
                    } else {
                        super::prelude::loaded(r.dtype, &r.mem)
                    }
                }
            };
            self.line(depth + 1, &format!("{} {} = {init};", r.ty, r.var));
        }
        self.out.push_str(&printed);
        let mut stored: Vec<&str> = Vec::new();
        for r in band.regs.iter().filter(|r| r.written) {
            if r.summed.is_none() && !r.gather.is_empty() {
                let lanes: Vec<String> =
                    r.gather.iter().enumerate().map(|(k, e)| format!("{e} = {}[{k}];", r.var)).collect();
                self.line(depth + 1, &lanes.join(" "));
                continue;
            }
            if r.summed.is_none() {
                self.line(depth + 1, &format!("{} = {};", r.mem, super::prelude::stored(r.dtype, &r.var)));
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
            let sum = super::prelude::stored(r.dtype, &parts.join(" + "));
            self.line(depth + 1, &format!("{} = {sum};  /* the lanes' partial sums */", r.mem));
        }
        self.line(depth, "}");
        Ok(())
    }

    /// The C text of an access (an lvalue): the element, a vector of lanes, or the variable a
    /// `registers` band keeps it in; and whether it is a vector.
    pub(super) fn mem(
        &mut self,
        leaf: &TNode,
        lane: Option<&Lane>,
        write: bool,
    ) -> std::result::Result<(String, bool), String> {
        let at = |leaf: &TNode, iter: &Name, base: &Expr| {
            let xs: Vec<Expr> =
                leaf.index_list().unwrap_or(&[]).iter().map(|x| x.subst(iter, base)).collect();
            TNode { iters: Iters::List(xs), ..leaf.clone() }
        };
        let mut gather: Vec<String> = Vec::new();
        let (leaf, width, dtype) = match lane {
            Some(ln) if leaf.index_list().is_some_and(|xs| xs.iter().any(|x| x.mentions(&ln.iter))) => {
                // Lanes that are not adjacent (a band keeps them): each lane's element.
                if ln.width > 1 && vector::lane_access(leaf, &ln.iter, write, &self.lane_layouts()).is_err() {
                    gather = (0..ln.width as i64)
                        .map(|k| self.c_leaf(&at(leaf, &ln.iter, &ln.base.add_int(k))))
                        .collect();
                }
                (at(leaf, &ln.iter, &ln.base), ln.width, ln.dtype)
            }
            _ => (leaf.clone(), 1, leaf.dtype),
        };
        if width > 1
            && let Some(p) = self.packed.iter().rev().find(|p| leaf.id() == Some(&p.tensor) && p.group > 1)
        {
            return Err(format!(
                "{} in lanes: `{}` is packed in groups of {}, its lanes {} elements apart (only a `dot` loop's groups read it)",
                leaf.access(),
                p.tensor,
                p.group,
                p.group
            ));
        }
        let element = self.c_leaf(&leaf);
        // Lanes of a narrower type than they are computed in (bf16 in float lanes, i8 and u8
        // in i32 lanes): read widened, never stored (`analysis::vector::lane_type`).
        let widened = width > 1 && leaf.dtype != dtype;
        if widened && (write || !gather.is_empty()) {
            return Err(format!(
                "{} in {dtype} lanes: explicit vectors widen {} elements where they are read contiguously",
                leaf.access(),
                leaf.dtype
            ));
        }
        let memory = if !gather.is_empty() {
            format!("{{{}}}", gather.join(", "))
        } else if widened {
            self.helpers.vtypes.insert((dtype, width));
            self.helpers.widens.insert((leaf.dtype, dtype, width));
            format!("{}(&{element})", super::prelude::widen_name(leaf.dtype, dtype, width))
        } else if width > 1 {
            self.helpers.vtypes.insert((dtype, width));
            format!("*({} *)&{element}", vtype(dtype, width))
        } else {
            element
        };
        let band = leaf.id().and_then(|t| self.bands.iter().rposition(|b| b.tensors.contains(t)));
        if widened && band.is_some() {
            return Err(format!(
                "cannot keep `{}` in registers: its {} elements are widened into {dtype} lanes as they are read",
                leaf.id().map(|t| t.to_string()).unwrap_or_default(),
                leaf.dtype
            ));
        }
        if !gather.is_empty() && band.is_none() {
            return Err(format!(
                "{} is not contiguous in the lanes of `{}`: expected a tensor a `registers` band keeps",
                leaf.access(),
                lane.map(|ln| ln.iter.to_string()).unwrap_or_default()
            ));
        }
        let Some(tensor) = leaf.id().cloned() else { return Ok((memory, width > 1)) };
        let Some(b) = band else {
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
        if band.truncating.contains(&tensor) && (width > 1 || summed.is_some()) {
            return Err(format!(
                "cannot keep `{tensor}` in registers across lanes: its {} elements sum values that are not \
                 integers, truncating at each update to {}, which lanes of {dtype} would not",
                leaf.dtype, leaf.dtype
            ));
        }
        let (ty, vector, summed) = match summed {
            Some((dtype, w, _)) if w > 1 => {
                self.helpers.vtypes.insert((dtype, w));
                self.helpers.hsums.insert((dtype, w));
                (vtype(dtype, w), true, Some((dtype, w)))
            }
            Some((dtype, w, _)) => (dtype.compute().c_name().to_string(), false, Some((dtype, w))),
            None if width > 1 => (vtype(dtype, width), true, None),
            // An integer element that truncates at each update: its own type, as in memory.
            None if band.truncating.contains(&tensor) => (leaf.dtype.c_name().to_string(), false, None),
            // A 16-bit float element is kept as a float (converted when loaded and stored).
            None => (dtype.compute().c_name().to_string(), false, None),
        };
        if !gather.is_empty() {
            self.helpers.vtypes.insert((dtype, width));
        }
        let band = &mut self.bands[b];
        let dtype = leaf.dtype;
        band.regs.push(Reg { mem: memory, key, var: var.clone(), ty, dtype, written: write, summed, gather });
        Ok((var, vector))
    }
}
