//! The walk over a nest's loops: statements, zeroings, loop headers with their pragmas,
//! private accumulators of reductions, and the choice of how each loop is printed.

use super::*;

/// Prints one nest of a kernel. The state of the walk, one part per concern: the split loops
/// ([`Splits`]), the register bands ([`Band`]), the packed and per-iteration buffers
/// ([`Packed`]), the accumulators of reductions ([`Accumulators`]), the streamed store.
pub(super) struct NestPrinter<'a> {
    pub(super) out: String,
    pub(super) helpers: &'a mut Helpers,
    /// The private accumulators of the reduction loops around.
    pub(super) accs: Accumulators<'a>,
    pub(super) params: &'a [Param],
    /// The named constants.
    pub(super) state: &'a State,
    /// The nest being printed (the legality analysis reads its statements' instances).
    pub(super) nest: &'a Nest,
    /// Loops still to print inside a collapsed band (they get no pragma of their own).
    pub(super) collapsed: usize,
    /// The vectors explicit vector loops use.
    pub(super) target: Target,
    /// The loops around the one being printed, outermost first.
    pub(super) outer: Vec<Loop>,
    /// The `registers` loops around the statement being printed, outermost first.
    pub(super) bands: Vec<Band>,
    /// The packed tensors of the loops around.
    pub(super) packed: Vec<Packed>,
    /// What the split loops around make known or leave to test.
    pub(super) split: Splits,
    /// The tensors code generation stores per iteration on its own (not the program's
    /// `store_at`).
    pub(super) auto: &'a [Name],
    /// Tensors stored in another layout: their buffer and layout.
    pub(super) laid: &'a BTreeMap<Name, (String, crate::ir::Layout)>,
    /// `laid`'s layouts, whichever nest set them: what lanes and registers are asked of, as
    /// every access prints through them.
    pub(super) buffers: &'a vector::Layouts,
    /// In the whole vectors of a streaming loop (`stream`): the tensor and the index whose
    /// stores are streamed (the access the loop was peeled to align).
    pub(super) stream: Option<(Name, Vec<Expr>)>,
    /// Inside the groups of a `dot` loop: its iterator and group.
    pub(super) dot: Option<DotGroup>,
}

/// The private accumulators of reduction loops (`reduction(+: ...)`).
pub(super) struct Accumulators<'a> {
    /// Target accesses summed in private accumulators: access text -> variable.
    pub(super) vars: BTreeMap<String, String>,
    /// Accumulators named so far in the kernel (`teml_acc0`, `teml_acc1`, ...).
    pub(super) count: &'a mut usize,
}

/// True where the iterations of the loop of `outer` (the first of `outer`) differ in work: a
/// loop of `x` (or below) has an affine trip count in one of the loops around it up to that
/// one (a triangle `j in [i+1, M-1]`, in a block of rows or not). A block's own loop
/// (`i in [8*io, min(8*io+7, M-2)]`) runs the same count each time but the last.
pub(super) fn bounds_move_with(x: &PlacedNode, outer: &mut Vec<Name>) -> bool {
    match x {
        PlacedNode::Loop(l, body) => {
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

impl NestPrinter<'_> {
    pub(super) fn line(&mut self, depth: usize, s: &str) {
        let _ = writeln!(self.out, "{}{s}", "  ".repeat(depth));
    }

    pub(super) fn node(&mut self, x: &PlacedNode, depth: usize) -> std::result::Result<(), String> {
        match x {
            PlacedNode::Zero(z) => self.zero(z, None, depth),
            PlacedNode::Stmt(s) => {
                let Some(lw) = lower(s) else { return Err(format!("not an assignment: {s}")) };
                self.stmt(&lw, None, depth)
            }
            PlacedNode::Loop(l, body) => self.loop_(l, body, depth),
        }
    }

    /// `target (=|+=) rhs;`, scalar or for one block of lanes.
    pub(super) fn stmt(
        &mut self,
        lw: &Lowered,
        lane: Option<&Lane>,
        depth: usize,
    ) -> std::result::Result<(), String> {
        if let Some(d) = self.dot.clone() {
            return self.dot_stmt(lw, lane, &d, depth);
        }
        let mut vector = false;
        let rhs = self.c_value(&lw.rhs, lane, &mut vector)?;
        let target = lw.target.access();
        // A private accumulator of a reduction loop: `-=` sums what is subtracted.
        let acc = self.accs.vars.get(&target).filter(|_| lw.update.accumulates() && lane.is_none()).cloned();
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
                let old = self.value_of(&lw.target, &lhs);
                format!("{}({old}, {rhs})", f.c_name(lw.target.dtype.compute()))
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
        let text = streamed.unwrap_or_else(|| self.update_text(&lw.target, &lhs, op, &rhs));
        match self.test(&lw.when) {
            Some(test) => {
                self.line(depth, &test);
                self.line(depth + 1, &text);
            }
            None => self.line(depth, &text),
        }
        Ok(())
    }

    /// `C[i][j] = 0.0;`, inside its loops and under its guard (for one block of lanes).
    pub(super) fn zero(
        &mut self,
        z: &Zero,
        lane: Option<&Lane>,
        depth: usize,
    ) -> std::result::Result<(), String> {
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

    /// Whether `text` is a variable the printer keeps an element in (a band's register, a
    /// reduction's private accumulator): it holds the element's value in its compute type.
    pub(super) fn is_variable(&self, text: &str) -> bool {
        self.bands.iter().any(|b| b.regs.iter().any(|r| r.var == text))
            || self.accs.vars.values().any(|v| v == text)
    }

    /// The value `text` holds: an element of `leaf`'s tensor as stored is converted to its
    /// compute type ([`loaded`]); a variable already holds it.
    pub(super) fn value_of(&self, leaf: &TNode, text: &str) -> String {
        if self.is_variable(text) { text.to_string() } else { loaded(leaf.dtype, text) }
    }

    /// `lhs op rhs;` where `lhs` stands for an element of `target`'s tensor: into a 16-bit
    /// float element, the update computes in float and rounds once, as stored.
    pub(super) fn update_text(&self, target: &TNode, lhs: &str, op: &str, rhs: &str) -> String {
        let dtype = target.dtype;
        if !matches!(dtype, DType::Bf16 | DType::F16) || self.is_variable(lhs) {
            return format!("{lhs} {op} {rhs};");
        }
        let value = match op.strip_suffix('=').filter(|o| !o.is_empty()) {
            Some(o) => format!("{} {o} ({rhs})", loaded(dtype, lhs)),
            None => rhs.to_string(),
        };
        format!("{lhs} = {};", stored(dtype, &value))
    }

    pub(super) fn header(&mut self, l: &Loop) -> String {
        format!(
            "for (int {i} = {lb}; {i} <= {ub}; {i}{step})",
            i = self.helpers.names.clone().var(&l.iter),
            lb = c_expr(&l.lb, self.helpers, false),
            ub = c_expr(&l.ub, self.helpers, true),
            step = "++"
        )
    }

    pub(super) fn loop_(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        match self.plan_loop(l, body)? {
            LoopPlan::Split { at, conds } => self.split(l, body, &at, conds, depth),
            LoopPlan::Packed(panels) => self.packed_loop(l, body, &panels, depth),
            LoopPlan::SummingLanes(block) => self.summing_lanes(l, body, &block, depth),
            LoopPlan::Band(plan) => self.band(l, body, plan, depth),
            LoopPlan::Marked => self.marked_loop_inside(l, body, depth),
        }
    }

    /// [`Self::marked_loop`] with `l`'s header among the loops around while its body prints.
    pub(super) fn marked_loop_inside(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        self.outer.push(Loop { body: Vec::new(), ..(**l).clone() });
        let r = self.marked_loop(l, body, depth);
        self.outer.pop();
        r
    }

    pub(super) fn marked_loop(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        let planned = self.plan_marked(l, body)?;
        // An inner loop of a collapsed band: the band's one pragma covers it.
        if planned.in_band {
            self.collapsed -= 1;
        }
        let plan = planned.realised;
        let (simd_note, mut pragma, collapses, locals, single) = match planned.form {
            MarkedForm::Lanes(lanes) => return self.vector_loop(l, body, &lanes, depth),
            MarkedForm::Scalar { simd_note, pragma, collapses, locals, single } => {
                (simd_note, pragma, collapses, locals, single)
            }
        };
        if let Some(t) = l.annot.stream.first()
            && self.target.vector_bits > 0
        {
            let why = simd_note.as_deref().unwrap_or("the loop is not printed with explicit vectors");
            self.line(depth, &format!("/* `{t}` not streamed: {} */", why.replace("*/", "* /")));
        }
        if l.annot.dot > 0 && pragma.is_none() && plan.is_none() {
            let own = locals.as_ref().map_or(true, |ls| !ls.is_empty());
            match self.no_groups(l, body, own) {
                None => return self.dot_loop(l, body, depth),
                Some(why) => {
                    let i = self.helpers.names.var(&l.iter).to_string();
                    self.line(depth, &format!("/* `{i}` not in dot-product groups: {why} */"));
                }
            }
        }
        let header = self.header(l);
        if let Some(n) = collapses {
            self.collapsed = n;
        }
        let mut reduction_vars: Vec<(String, Arc<TNode>, Option<String>, Update)> = Vec::new();
        let mut depth = depth;
        if let Some(Plan::Reduction(targets)) = &plan {
            self.line(depth, "{");
            depth += 1;
            for t in targets {
                let var = format!("teml_acc{}", *self.accs.count);
                *self.accs.count += 1;
                // In the type the element's values are computed in (float for a bf16 one).
                let ty = t.leaf.dtype.compute().c_name();
                // A sum starts at 0; a max or a min at what the element (or the enclosing
                // accumulator) holds.
                let init = match (t.op, self.accs.vars.get(&t.access)) {
                    (Update::Max | Update::Min, Some(o)) => o.clone(),
                    (Update::Max | Update::Min, None) => {
                        let m = self.mem(&t.leaf, None, false)?.0;
                        self.value_of(&t.leaf, &m)
                    }
                    _ => "0".to_string(),
                };
                self.line(depth, &format!("{ty} {var} = {init};"));
                let outer = self.accs.vars.insert(t.access.clone(), var.clone());
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
        let locals = self.locals(l, locals?);
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
                let text = self.update_text(&leaf, &target, combine, &var);
                self.line(depth, &text);
                match outer {
                    Some(o) => self.accs.vars.insert(leaf.access(), o),
                    None => self.accs.vars.remove(&leaf.access()),
                };
            }
            self.line(depth - 1, "}");
        }
        Ok(())
    }
}

/// Prints the kernel `plan` describes: its own buffers and layouts at entry, each nest in
/// order, the buffers released at exit, then the prelude and the entry points around them.
pub(super) fn kernel(state: &State, name: &str, plan: &KernelPlan, target: &Target) -> Result<CKernel> {
    let names = &plan.names;
    let mut body = String::new();
    let mut helpers = Helpers { names: names.clone(), ..Helpers::default() };
    helpers.types = plan.params.iter().map(|p| p.dtype).collect();
    let mut acc_count = 0;
    // Each laid-out tensor: its buffer, filled from the tensor at entry.
    let mut laid: BTreeMap<Name, (String, crate::ir::Layout)> = BTreeMap::new();
    let mut epilogue = String::new();
    for (t, lay) in &plan.layouts {
        let Some(p) = plan.params.iter().find(|p| &p.name == t) else { continue };
        helpers.packs = true;
        let (buf, prologue, back) = convert(p, lay, &mut helpers, !plan.internal.contains(t));
        body.push_str(&prologue);
        epilogue.push_str(&back);
        laid.insert(t.clone(), (buf, lay.clone()));
    }
    for p in
        plan.params.iter().filter(|p| plan.internal.contains(&p.name) && !plan.layouts.contains_key(&p.name))
    {
        helpers.packs = true;
        let what = if plan.expanded.contains(&p.name) {
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
    for (k, (nname, n)) in plan.nests.iter().enumerate() {
        if k > 0 {
            body.push('\n');
        }
        let _ = writeln!(body, "  /* {nname} */");
        let mut printer = NestPrinter {
            out: String::new(),
            helpers: &mut helpers,
            accs: Accumulators { vars: BTreeMap::new(), count: &mut acc_count },
            params: &plan.params,
            state,
            nest: n,
            collapsed: 0,
            target: *target,
            outer: Vec::new(),
            bands: Vec::new(),
            packed: Vec::new(),
            split: Splits {
                known: Vec::new(),
                tested: Vec::new(),
                parts: Vec::new(),
                guarded: n.stmts().iter().any(|s| !s.guard().is_empty()),
            },
            auto: &plan.auto[k],
            laid: &laid,
            buffers: &buffers,
            stream: None,
            dot: None,
        };
        for g in &zeroing::place(n.items()) {
            printer.node(g, 1).map_err(unrealizable)?;
        }
        body.push_str(&printer.out);
    }
    body.push_str(&epilogue);

    // Extents may use the helpers too (an inferred `min(N-2, 2)`): the parameters need them.
    for p in &plan.params {
        p.dims.iter().for_each(|d| {
            c_expr(d, &mut helpers, false);
        });
    }
    let params = plan.taken();
    let nest_names: Vec<&str> = plan.nests.iter().map(|(n, _)| &**n).collect();
    let mut src = format!(
        "/* Generated by teml {}: kernel `{name}` runs {} in order. */\n\n",
        env!("CARGO_PKG_VERSION"),
        nest_names.join(", ")
    );
    src.push_str(&prelude(&helpers, state, &plan.consts, names));
    for p in params.iter().filter(|p| p.holds.is_some()) {
        let x = p.holds.as_ref().map_or("", |x| &**x);
        let _ = writeln!(src, "/* in place: `{x}` holds {x} at entry and {} at exit */", p.name);
    }
    let decls: Vec<String> = params.iter().map(|p| param_decl(p, names)).collect();
    let _ = writeln!(src, "void {name}({})\n{{\n{body}}}\n", decls.join(", "));
    let cast_types: Vec<String> = params.iter().map(|p| param_cast(p, names)).collect();
    let casts: Vec<String> = cast_types.iter().enumerate().map(|(k, c)| format!("({c})args[{k}]")).collect();
    let _ = writeln!(src, "void {ENTRY}(void **args)\n{{\n  {name}({});\n}}", casts.join(", "));
    let const_c_names = plan.consts.iter().map(|c| names.var(c).to_string()).collect();
    Ok(CKernel {
        source: src,
        name: name.to_string(),
        params,
        consts: plan.consts.clone(),
        const_c_names,
        casts: cast_types,
    })
}
