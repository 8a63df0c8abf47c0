//! Splitting a loop where the conditions of a partial block's copies start to fail: the main
//! part runs its statements untested, the rest tests them.

use super::*;

/// What the split loops around the one being printed make known or leave to test.
pub(super) struct Splits {
    /// Conditions `g >= 0` that hold here (the main part of a split loop): statements guarded
    /// by them print without a test.
    pub(super) known: Vec<Expr>,
    /// Conditions a loop around split on that do not hold everywhere here (its remainder):
    /// tested at each statement, not split on again.
    pub(super) tested: Vec<Expr>,
    /// Loops printed with other bounds or marks than the nest's (the parts of a split loop, a
    /// packed loop, full blocks of lanes), and the nest's loop each stands for: dependence
    /// analysis finds loops by identity.
    pub(super) parts: Vec<(Arc<Loop>, Arc<Loop>)>,
    /// Some statement of the nest is guarded (an unrolled partial block): only then can a loop
    /// split (the walk is skipped for every other nest).
    pub(super) guarded: bool,
}

/// The nest's loop that `l` stands for (itself unless it is one of `parts`).
pub(super) fn stands_for(parts: &[(Arc<Loop>, Arc<Loop>)], l: &Arc<Loop>) -> Arc<Loop> {
    parts.iter().find(|(c, _)| Arc::ptr_eq(c, l)).map_or_else(|| l.clone(), |(_, o)| o.clone())
}

impl NestPrinter<'_> {
    /// Where loop `l` splits so that the conditions of the copies of a partial block below it
    /// (`g >= 0`, affine, decreasing in `l`'s iterator, and not mentioning the loops below)
    /// hold in the first part: `l <= at`. `None` where nothing splits: no such conditions,
    /// or a loop that cannot be cut in two (vector lanes, a collapsed band: `collapsed` loops
    /// of one are still to print).
    pub(super) fn split_point(
        &self,
        l: &Loop,
        body: &[PlacedNode],
        collapsed: usize,
    ) -> Option<(Expr, Vec<Expr>)> {
        if !self.split.guarded || collapsed > 0 || l.annot.collapse > 1 || l.annot.vectorize {
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
            if self.split.known.contains(&g)
                || self.split.tested.contains(&g)
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
    pub(super) fn split(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
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
        let n = self.split.known.len();
        self.split.known.extend(conds.iter().cloned());
        let r = self.part(l, main, body, depth);
        self.split.known.truncate(n);
        r?;
        let n = self.split.tested.len();
        self.split.tested.extend(conds);
        let r = self.part(l, rest, body, depth);
        self.split.tested.truncate(n);
        r
    }

    /// Prints `part`, a copy of loop `l` with other bounds or marks (a part of a split loop, a
    /// packed loop without its mark), as standing for the nest's loop `l` stands for.
    pub(super) fn part(
        &mut self,
        l: &Arc<Loop>,
        part: Loop,
        body: &[PlacedNode],
        depth: usize,
    ) -> std::result::Result<(), String> {
        let part = Arc::new(part);
        let n = self.split.parts.len();
        self.split.parts.push((part.clone(), stands_for(&self.split.parts, l)));
        let r = self.loop_(&part, body, depth);
        self.split.parts.truncate(n);
        r
    }

    /// The conditions of `gs` not known to hold here: `(g1 >= 0 && ..)`, or `None`.
    pub(super) fn test(&mut self, gs: &[Expr]) -> Option<String> {
        let open: Vec<String> = gs
            .iter()
            .filter(|g| !self.split.known.contains(g))
            .map(|g| format!("{} >= 0", c_expr(g, self.helpers, false)))
            .collect();
        (!open.is_empty()).then(|| format!("if ({})", open.join(" && ")))
    }
}
