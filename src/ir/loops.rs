//! Loop-nest trees (Sec. 3.1, eq. 2-3).
//!
//! Inner nodes are loops: an iterator, an inclusive range `[lb, ub]` (step 1) whose bounds may
//! be affine in outer iterators (or use `min`/`floor` after strip-mining), and marks
//! ([`super::marks::Annotations`]).
//! Leaves are assignment statements. A [`Nest`] is either a loop (eq. 2) or the top-level
//! sequence `⟨•, [x1, …, xk]⟩` of eq. 3.

use super::expr::{Expr, Name};
use super::marks::{Annotations, Carried, Mark, Refusal};
use super::texpr::TExpr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

/// A loop `for iter in [lb, ub] { body }` (bounds inclusive, as in eq. 19).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Loop {
    /// Iterator name.
    pub iter: Name,
    /// Lower bound (inclusive).
    pub lb: Expr,
    /// Upper bound (inclusive).
    pub ub: Expr,
    /// Marks.
    #[serde(default)]
    pub annot: Annotations,
    /// Children: loops and statements, in order.
    pub body: Vec<LNode>,
}

impl Loop {
    /// A copy with another body (the rest shared).
    pub fn with_body(&self, body: Vec<LNode>) -> Arc<Loop> {
        Arc::new(Loop { body, ..self.clone() })
    }

    /// `[lb, ub]` as text.
    pub fn range(&self) -> String {
        format!("[{}, {}]", self.lb, self.ub)
    }

    /// True if the bounds use iterator `iter` (the loop cannot move outside that loop, nor be
    /// collapsed with it).
    pub fn bounds_mention(&self, iter: &str) -> bool {
        self.lb.mentions(iter) || self.ub.mentions(iter)
    }

    /// True if both loops iterate over the same range (iterator names may differ).
    pub fn same_range(&self, other: &Loop) -> bool {
        self.lb == other.lb && self.ub == other.ub
    }

    /// `iter [lb, ub]` as a short description.
    pub fn header(&self) -> String {
        format!("{} in {}", self.iter, self.range())
    }
}

/// A child of a loop: a loop or a statement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LNode {
    /// A nested loop.
    Loop(Arc<Loop>),
    /// An assignment `(=, •, •)`.
    Stmt(TExpr),
}

impl LNode {
    /// The loop, if this is one.
    pub fn as_loop(&self) -> Option<&Arc<Loop>> {
        match self {
            LNode::Loop(l) => Some(l),
            LNode::Stmt(_) => None,
        }
    }

    /// Short description for error messages.
    pub fn describe(&self) -> String {
        match self {
            LNode::Loop(l) => format!("loop {}", l.header()),
            LNode::Stmt(s) => format!("statement `{s}`"),
        }
    }

    /// Calls `f` on every loop of the tree, outermost first.
    pub fn visit_loops(&self, f: &mut dyn FnMut(&Loop)) {
        if let LNode::Loop(l) = self {
            f(l);
            for c in &l.body {
                c.visit_loops(f);
            }
        }
    }

    /// Applies `f` to every statement, rebuilding the loops around them.
    pub fn map_stmts(&self, f: &dyn Fn(&TExpr) -> TExpr) -> LNode {
        match self {
            LNode::Stmt(s) => LNode::Stmt(f(s)),
            LNode::Loop(l) => LNode::Loop(l.with_body(l.body.iter().map(|c| c.map_stmts(f)).collect())),
        }
    }

    /// Substitutes iterators in statements and in the bounds of loops.
    pub fn subst(&self, f: &dyn Fn(&str) -> Option<Expr>) -> LNode {
        match self {
            LNode::Stmt(s) => LNode::Stmt(s.subst_iters(f)),
            LNode::Loop(l) => LNode::Loop(Arc::new(Loop {
                iter: l.iter.clone(),
                lb: l.lb.subst_with(f),
                ub: l.ub.subst_with(f),
                annot: l.annot.clone(),
                body: l.body.iter().map(|c| c.subst(f)).collect(),
            })),
        }
    }

    /// Every statement below, in order.
    pub fn stmts(&self) -> Vec<TExpr> {
        let mut out = Vec::new();
        self.collect_stmts(&mut out);
        out
    }

    fn collect_stmts(&self, out: &mut Vec<TExpr>) {
        match self {
            LNode::Stmt(s) => out.push(s.clone()),
            LNode::Loop(l) => l.body.iter().for_each(|c| c.collect_stmts(out)),
        }
    }

    /// Every iterator a loop below (or this one) introduces.
    pub fn loop_iters(&self, out: &mut Vec<Name>) {
        if let LNode::Loop(l) = self {
            out.push(l.iter.clone());
            l.body.iter().for_each(|c| c.loop_iters(out));
        }
    }

    fn paper(&self) -> String {
        match self {
            LNode::Stmt(s) => s.paper(),
            LNode::Loop(l) => {
                let kids: Vec<String> = l.body.iter().map(|c| c.paper()).collect();
                format!("⟨{}, [{}]⟩", l.iter, kids.join(", "))
            }
        }
    }

    fn tree_into(&self, out: &mut String, indent: usize) {
        let pad = "  ".repeat(indent);
        match self {
            LNode::Stmt(s) if !s.guard().is_empty() => {
                let gs: Vec<String> = s.guard().iter().map(|g| format!("{g} >= 0")).collect();
                let _ = writeln!(out, "{pad}{s}  when {}", gs.join(" and "));
            }
            LNode::Stmt(s) => {
                let _ = writeln!(out, "{pad}{s}");
            }
            LNode::Loop(l) => {
                let words = l.annot.words();
                let marks = if words.is_empty() { String::new() } else { format!("  {}", words.join(" ")) };
                let _ = writeln!(out, "{pad}for {}{marks}", l.header());
                for c in &l.body {
                    c.tree_into(out, indent + 1);
                }
            }
        }
    }
}

/// How a tensor is stored in a kernel where that is not its declared shape (Rink 2018's
/// padding, Sinkarovs and Scholz 2013's layout types): element `x` of the tensor lives at `map(x)` of a buffer
/// of `extents(dims)`. The program's meaning, its inputs and outputs keep the declared shape;
/// the kernel converts at entry and back at exit (docs/semantics.md, "Layouts and padding").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// Seed 004's `I_k`: dimension `k` (0-based) of width `V` regrouped: `x_k` becomes
    /// `x_k div V` in its place and `x_k mod V` a new last dimension (AoS to SoA/AoSoA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regroup: Option<(usize, i64)>,
    /// Buffer dimension `d` is dimension `order[d]` of the (regrouped) index; empty: as is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<usize>,
    /// Per buffer dimension, `(multiple, extra)`: its extent rounded up to a multiple, then
    /// `extra` more (padding, never read by the program); empty or `(1, 0)`: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pad: Vec<(i64, i64)>,
}

impl Layout {
    /// Rank of the buffer for a tensor of rank `rank`.
    pub fn rank(&self, rank: usize) -> usize {
        rank + usize::from(self.regroup.is_some())
    }

    /// The buffer dimension order for a tensor of rank `rank`.
    pub fn order(&self, rank: usize) -> Vec<usize> {
        let r = self.rank(rank);
        if self.order.len() == r { self.order.clone() } else { (0..r).collect() }
    }

    /// Where element `index` lives in the buffer.
    pub fn map(&self, index: &[Expr]) -> Vec<Expr> {
        let mut x: Vec<Expr> = index.to_vec();
        if let Some((k, v)) = self.regroup
            && k < x.len()
        {
            let xk = x[k].clone();
            x[k] = xk.floordiv(v);
            x.push(xk.sub(&xk.floordiv(v).scale(v)));
        }
        self.order(index.len()).iter().map(|d| x[*d].clone()).collect()
    }

    /// The buffer's extents for a tensor of extents `dims`.
    pub fn extents(&self, dims: &[Expr]) -> Vec<Expr> {
        let mut e: Vec<Expr> = dims.to_vec();
        if let Some((k, v)) = self.regroup
            && k < e.len()
        {
            e[k] = e[k].add_int(v - 1).floordiv(v);
            e.push(Expr::int(v));
        }
        let mut out: Vec<Expr> = self.order(dims.len()).iter().map(|d| e[*d].clone()).collect();
        for (d, (m, extra)) in self.pad.iter().enumerate() {
            if let Some(x) = out.get_mut(d) {
                let rounded = if *m > 1 { x.add_int(m - 1).floordiv(*m).scale(*m) } else { x.clone() };
                *x = rounded.add_int(*extra);
            }
        }
        out
    }

    /// True where the buffer is the tensor as declared.
    pub fn is_plain(&self, rank: usize) -> bool {
        self.regroup.is_none()
            && self.order(rank).iter().enumerate().all(|(k, d)| k == *d)
            && self.pad.iter().all(|(m, e)| *m <= 1 && *e == 0)
    }

    /// True where consecutive elements of the tensor's last dimension stay adjacent: the
    /// buffer's last dimension is that one (or, regrouped, its block `x div V` then its lanes
    /// `x mod V`, whose row-major offset is `x` again). Another dimension regrouped puts its
    /// lanes last, between consecutive elements of the rows.
    pub fn keeps_rows(&self, rank: usize) -> bool {
        let order = self.order(rank);
        match self.regroup {
            Some((k, _)) if k + 1 == rank => order.ends_with(&[rank - 1, rank]),
            _ => order.last() == Some(&(rank - 1)),
        }
    }

    /// E.g. `regroup(1, 8) [2, 1] pad [(8, 0)]`.
    pub fn describe(&self, rank: usize) -> String {
        let mut out = Vec::new();
        if let Some((k, v)) = self.regroup {
            out.push(format!("regroup({}, {v})", k + 1));
        }
        let order = self.order(rank);
        if !order.iter().enumerate().all(|(k, d)| k == *d) {
            let ds: Vec<String> = order.iter().map(|d| (d + 1).to_string()).collect();
            out.push(format!("[{}]", ds.join(", ")));
        }
        for (d, (m, e)) in self.pad.iter().enumerate() {
            if *m > 1 || *e > 0 {
                out.push(format!(
                    "pad({}, {m}{})",
                    d + 1,
                    if *e > 0 { format!(", {e}") } else { String::new() }
                ));
            }
        }
        out.join(" ")
    }
}

/// How `focus` names a loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoopAddr {
    /// The loop at this level (1-based) of the single path.
    Level(i64),
    /// The loop of this iterator; with `Some(k)`, the k-th such loop in program order.
    Iter(String, Option<usize>),
}

impl LoopAddr {
    /// `"k"` or `"k#2"`.
    pub fn parse(s: &str) -> Option<LoopAddr> {
        let (name, nth) = match s.split_once('#') {
            Some((n, k)) => (n.trim(), Some(k.trim().parse::<usize>().ok()?)),
            None => (s.trim(), None),
        };
        super::expr::is_c_ident(name).then(|| LoopAddr::Iter(name.to_string(), nth))
    }
}

/// A callback for each statement instance, with the values of the enclosing iterators.
pub type InstanceFn<'a> = dyn FnMut(&TExpr, &[(Name, i64)]) + 'a;

/// A loop-nest value: one loop (eq. 2) or a top-level sequence `⟨•, [x1, …, xk]⟩` (eq. 3) of
/// loops and statements not nested in any loop.
///
/// A nest also remembers its *origin*: the assignments `build` was called on, in program
/// order (fusion concatenates them). Running the origins' untransformed builds one after the
/// other is what the nest means; verification compares against exactly that.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Nest {
    /// The top-level items: one loop, or a sequence.
    pub items: Vec<LNode>,
    /// The assignments this nest computes, untransformed, in order.
    #[serde(default)]
    pub origin: Vec<TExpr>,
    /// How it was made (not saved, never compared).
    #[serde(skip)]
    pub history: super::history::History,
    /// Tensors stored in another layout than their declared shape in a kernel of this nest.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub layouts: BTreeMap<Name, Layout>,
    /// Results stored over an operand (`in_place(l, y, x)`, Ullrich 2018): `y ↦ x`. The nest's
    /// statements write `x` where they wrote `y`; the kernel's buffer for `y` holds `x` at entry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub over: BTreeMap<Name, Name>,
    /// The untransformed nest: what the nest means, the original order that legality keeps
    /// and the program verification runs. `build` makes it; fusion and `around` combine it.
    /// Empty in a state saved by an older teml: each origin's `build`, one after the other.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub program: Vec<LNode>,
    /// `focus(l, "k")`: the loop that levels count from, as child positions from the top
    /// (`[0, 1]`: the second item of the body of the first top-level loop); empty: the whole
    /// nest. Transformations of a focused nest rewrite that loop's sub-tree ([`Nest::view`])
    /// and splice it back ([`Nest::splice`]): loops below a branch are addressed this way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub focus: Vec<usize>,
    /// Algebraic rewrites (`lift`): assignments this nest computes through a sequence of its
    /// own. Verification runs their originals instead (docs/algebra.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rewrites: Vec<super::rewrite::Rewrite>,
    /// Tensors stored with one copy per iteration of a loop (`privatize`: scalar and array
    /// expansion), by the program's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub expanded: BTreeMap<Name, Expansion>,
}

/// A tensor `T` with one copy per iteration of a loop (`privatize`). The nest's statements
/// access `buffer[j - lb][x]` where the program accesses `T[x]`; legality reads the origins'
/// accesses as `T[j][x]`; the kernel holds `buffer` (no parameter, never compared), and `T`
/// itself is left as it was.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expansion {
    /// The original iterator (its name in the origins' instances) that indexes the copies.
    pub by: Name,
    /// The copies' buffer, as the nest's statements name it (`temp2_j`).
    pub buffer: Name,
}

impl Nest {
    /// The marks tensor `t` carries in this nest: its layout, then storage over another
    /// tensor, then the loops' marks for it, loop by loop in the order of the nest.
    pub fn carried(&self, t: &Name) -> Vec<Carried> {
        let mut out = Vec::new();
        let plain = |mark| Carried { mark, layout: String::new(), on_loop: String::new() };
        if let Some(lay) = self.layouts.get(t) {
            out.push(Carried { layout: lay.describe(self.rank_of(t).unwrap_or(0)), ..plain(Mark::Layout) });
        }
        if self.in_place(t) {
            out.push(plain(Mark::InPlace));
        }
        fn go(items: &[LNode], t: &Name, out: &mut Vec<Carried>) {
            for x in items {
                if let LNode::Loop(l) = x {
                    for mark in l.annot.marks_for(t) {
                        out.push(Carried { mark, layout: String::new(), on_loop: l.header() });
                    }
                    go(&l.body, t, out);
                }
            }
        }
        go(self.items(), t, &mut out);
        out
    }

    /// Why mark `new` cannot be set on tensor `t` of this nest, given the marks it carries
    /// ([`super::marks::RULES`]); `None` where they combine.
    pub fn refusal(&self, new: Mark, t: &Name) -> Option<Refusal> {
        super::marks::refusal(new, t, &self.carried(t))
    }

    /// The untransformed nest `items`, computing the assignments `origin`.
    pub fn new(items: Vec<LNode>, origin: Vec<TExpr>) -> Nest {
        Nest {
            program: items.clone(),
            items,
            origin,
            history: Default::default(),
            layouts: BTreeMap::new(),
            over: BTreeMap::new(),
            focus: Vec::new(),
            rewrites: Vec::new(),
            expanded: BTreeMap::new(),
        }
    }

    /// The temporaries of the nest's rewrites (`lift`), in order.
    pub fn temps(&self) -> impl Iterator<Item = &Name> {
        self.rewrites.iter().flat_map(|r| &r.temps)
    }

    /// The assignment that defines `name`, a temporary of one of the nest's rewrites (`lift`).
    pub fn temporary(&self, name: &str) -> Option<TExpr> {
        if !self.temps().any(|t| &**t == name) {
            return None;
        }
        self.origin.iter().find(|o| o.target().and_then(|x| x.id()).is_some_and(|t| &**t == name)).cloned()
    }

    /// The real tensor `tensor` as the first access to it in the nest shows it (shape, type).
    pub fn leaf(&self, tensor: &str) -> Option<TExpr> {
        let mut leaf = None;
        for s in self.stmts() {
            s.visit(&mut |n| {
                if leaf.is_none() && n.id().is_some_and(|x| &**x == tensor) {
                    leaf = Some(super::texpr::real_leaf(&Arc::new(n.clone())));
                }
            });
        }
        leaf
    }

    /// The same origin with other items (what every transformation returns).
    pub fn with_items(&self, items: Vec<LNode>) -> Nest {
        Nest {
            items,
            origin: self.origin.clone(),
            history: Default::default(),
            layouts: self.layouts.clone(),
            over: self.over.clone(),
            program: self.program.clone(),
            focus: Vec::new(),
            rewrites: self.rewrites.clone(),
            expanded: self.expanded.clone(),
        }
    }

    /// The loops along `focus`, outermost first, the focused loop last (empty: no focus).
    fn focus_chain(&self) -> Vec<&Arc<Loop>> {
        let mut out = Vec::new();
        let mut items: &[LNode] = &self.items;
        for k in &self.focus {
            let Some(l) = items.get(*k).and_then(|x| x.as_loop()) else { return Vec::new() };
            out.push(l);
            items = &l.body;
        }
        out
    }

    /// The loop `focus` points to, if any.
    pub fn focused(&self) -> Option<&Arc<Loop>> {
        self.focus_chain().last().copied()
    }

    /// The focused loop's sub-tree as a nest of its own (the same program, layouts and
    /// history): what transformations of a focused nest rewrite. The whole nest where there
    /// is no focus.
    pub fn view(&self) -> Nest {
        match self.focused() {
            None => Nest { focus: Vec::new(), ..self.clone() },
            Some(l) => Nest { items: vec![LNode::Loop(l.clone())], focus: Vec::new(), ..self.clone() },
        }
    }

    /// The iterators of the loops around the focused loop, outermost first.
    pub fn outer_iters(&self) -> Vec<Name> {
        let chain = self.focus_chain();
        chain.iter().take(chain.len().saturating_sub(1)).map(|l| l.iter.clone()).collect()
    }

    /// This nest with its focused loop replaced by the items of `sub` (a rewrite of
    /// [`Nest::view`]), taking `sub`'s layouts and stored-over tensors. The focus stays on the
    /// rewritten loop where it is still one loop, else moves to the loop around it.
    pub fn splice(&self, sub: Nest) -> Nest {
        let Some((last, above)) = self.focus.split_last() else { return sub };
        fn go(items: &[LNode], above: &[usize], last: usize, new: &[LNode]) -> Vec<LNode> {
            match above.split_first() {
                None => {
                    let mut out = items[..last].to_vec();
                    out.extend(new.iter().cloned());
                    out.extend(items[last + 1..].iter().cloned());
                    out
                }
                Some((k, rest)) => {
                    let mut out = items.to_vec();
                    if let Some(LNode::Loop(l)) = items.get(*k) {
                        out[*k] = LNode::Loop(l.with_body(go(&l.body, rest, last, new)));
                    }
                    out
                }
            }
        }
        let single = matches!(sub.items.as_slice(), [LNode::Loop(_)]);
        Nest {
            items: go(&self.items, above, *last, &sub.items),
            focus: if single { self.focus.clone() } else { above.to_vec() },
            ..sub
        }
    }

    /// Every loop of the tree with its position (child indices from the top), outermost first.
    pub fn loops_with_positions(&self) -> Vec<(Vec<usize>, Arc<Loop>)> {
        fn go(items: &[LNode], at: &mut Vec<usize>, out: &mut Vec<(Vec<usize>, Arc<Loop>)>) {
            for (k, x) in items.iter().enumerate() {
                if let LNode::Loop(l) = x {
                    at.push(k);
                    out.push((at.clone(), l.clone()));
                    go(&l.body, at, out);
                    at.pop();
                }
            }
        }
        let mut out = Vec::new();
        go(&self.items, &mut Vec::new(), &mut out);
        out
    }

    /// `focus(l, "k")`, `focus(l, "k#2")`: the nest focused on the loop of iterator `k` (the
    /// second such loop in program order) of the whole nest; `focus(l, r)`: on the loop at
    /// level r of the current view's single path (from the current focus). An address that
    /// names no loop, or several, is an error `(expected, found)` whose expected part lists the
    /// loops and their addresses.
    pub fn focus_on(&self, addr: &LoopAddr) -> Result<Nest, (String, String)> {
        let relative = matches!(addr, LoopAddr::Level(_)) && self.focused().is_some();
        let base = if relative { self.focus.clone() } else { Vec::new() };
        let view = if relative { self.view() } else { Nest { focus: Vec::new(), ..self.clone() } };
        let loops = view.loops_with_positions();
        let listing = || {
            let mut seen: BTreeMap<Name, usize> = BTreeMap::new();
            let names: Vec<String> = loops
                .iter()
                .map(|(_, l)| {
                    let n = seen.entry(l.iter.clone()).or_insert(0);
                    *n += 1;
                    let many = loops.iter().filter(|(_, m)| m.iter == l.iter).count() > 1;
                    if many {
                        format!("\"{}#{n}\" ({})", l.iter, l.header())
                    } else {
                        format!("\"{}\" ({})", l.iter, l.header())
                    }
                })
                .collect();
            names.join(", ")
        };
        let local: Vec<usize> = match addr {
            LoopAddr::Level(r) => {
                let path = view.path();
                if *r < 1 || *r as usize > path.len() {
                    return Err((
                        format!(
                            "a level 1..={} on the single path from the root, or a loop's address: {}",
                            path.len(),
                            listing()
                        ),
                        r.to_string(),
                    ));
                }
                vec![0; *r as usize]
            }
            LoopAddr::Iter(name, nth) => {
                let hits: Vec<&Vec<usize>> =
                    loops.iter().filter(|(_, l)| &*l.iter == name.as_str()).map(|(p, _)| p).collect();
                match (hits.len(), nth) {
                    (0, _) => {
                        return Err((
                            format!("a loop of the nest: {}", listing()),
                            format!("no loop `{name}`"),
                        ));
                    }
                    (1, None) => hits[0].clone(),
                    (n, None) => {
                        return Err((
                            format!(
                                "a single loop: `{name}` names {n} loops, address one as \"{name}#1\" to \"{name}#{n}\" (program order): {}",
                                listing()
                            ),
                            format!("\"{name}\""),
                        ));
                    }
                    (n, Some(k)) if *k >= 1 && *k <= n => hits[k - 1].clone(),
                    (1, Some(k)) => {
                        return Err((
                            format!("\"{name}\" (a single loop): {}", listing()),
                            format!("`{name}#{k}`"),
                        ));
                    }
                    (n, Some(k)) => {
                        return Err((
                            format!("`{name}#1` to `{name}#{n}`: {}", listing()),
                            format!("`{name}#{k}`"),
                        ));
                    }
                }
            }
        };
        // The view's top item is the focused loop itself (position 0 there).
        let focus =
            if base.is_empty() { local } else { base.into_iter().chain(local.into_iter().skip(1)).collect() };
        Ok(Nest { focus, ..self.clone() })
    }

    /// The top-level items.
    pub fn items(&self) -> &[LNode] {
        &self.items
    }

    /// True for a top-level sequence (eq. 3), false for a single outermost loop.
    pub fn is_seq(&self) -> bool {
        !matches!(self.items.as_slice(), [LNode::Loop(_)])
    }

    /// True if `tensor` is a result stored over its operand here (`in_place`), or that operand.
    pub fn in_place(&self, tensor: &str) -> bool {
        self.over.iter().any(|(y, x)| &**y == tensor || &**x == tensor)
    }

    /// The rank with which the statements access `tensor` (the first access's), if any does.
    pub fn rank_of(&self, tensor: &str) -> Option<usize> {
        let mut rank = None;
        for s in self.stmts() {
            s.visit(&mut |n| {
                if n.id().is_some_and(|x| &**x == tensor) {
                    rank = rank.or(n.index_list().map(|xs| xs.len()));
                }
            });
        }
        rank
    }

    /// Every statement, in program order.
    pub fn stmts(&self) -> Vec<TExpr> {
        self.items().iter().flat_map(|x| x.stmts()).collect()
    }

    /// The loops along the single path from the root, outermost first, stopping at the first
    /// level with zero or several children.
    pub fn path(&self) -> Vec<Arc<Loop>> {
        let mut out = Vec::new();
        let mut items: &[LNode] = &self.items;
        while let [LNode::Loop(l)] = items {
            out.push(l.clone());
            items = &l.body;
        }
        out
    }

    /// The paper's notation, e.g. `⟨i1, [⟨i2, [⟨(=, •, •), […]⟩]⟩]⟩`.
    pub fn paper(&self) -> String {
        match self.items.as_slice() {
            [x @ LNode::Loop(_)] => x.paper(),
            xs => {
                let kids: Vec<String> = xs.iter().map(|c| c.paper()).collect();
                format!("⟨•, [{}]⟩", kids.join(", "))
            }
        }
    }

    /// An indented listing: one loop or statement per line, with ranges and marks.
    pub fn tree(&self) -> String {
        let mut out = String::new();
        match self.items.as_slice() {
            [x @ LNode::Loop(_)] => x.tree_into(&mut out, 0),
            xs => {
                out.push_str("seq\n");
                for x in xs {
                    x.tree_into(&mut out, 1);
                }
            }
        }
        for (t, l) in &self.layouts {
            let rank = self.rank_of(t).unwrap_or(0);
            let _ = writeln!(out, "layout {t}: {}", l.describe(rank));
        }
        for (y, x) in &self.over {
            let _ = writeln!(out, "in place: {y} is stored over {x}");
        }
        if let Some(l) = self.focused() {
            let _ = writeln!(out, "focus: for {} (levels count from it)", l.header());
        }
        for r in &self.rewrites {
            let _ = writeln!(out, "{}", r.describe());
        }
        out
    }

    /// Runs the nest's iteration space: calls `f` for every statement instance with the
    /// values of the enclosing iterators (named constants come from `consts`). Returns an
    /// error naming a bound that mentions an unbound variable.
    pub fn for_each_instance(
        &self,
        consts: &dyn Fn(&str) -> Option<i64>,
        f: &mut InstanceFn<'_>,
    ) -> Result<(), String> {
        let mut env: Vec<(Name, i64)> = Vec::new();
        for x in &self.items {
            run(x, consts, &mut env, f)?;
        }
        Ok(())
    }
}

/// An iterator's value in `env` (innermost first), else a named constant's.
fn look(v: &str, env: &[(Name, i64)], consts: &dyn Fn(&str) -> Option<i64>) -> Option<i64> {
    env.iter().rev().find(|(n, _)| &**n == v).map(|(_, x)| *x).or_else(|| consts(v))
}

fn run(
    x: &LNode,
    consts: &dyn Fn(&str) -> Option<i64>,
    env: &mut Vec<(Name, i64)>,
    f: &mut InstanceFn<'_>,
) -> Result<(), String> {
    match x {
        LNode::Stmt(s) => {
            for g in s.guard() {
                let v = g
                    .eval(&|v| look(v, env, consts))
                    .map_err(|v| format!("unbound `{v}` in the guard of `{s}`"))?;
                if v < 0 {
                    return Ok(());
                }
            }
            f(s, env);
            Ok(())
        }
        LNode::Loop(l) => {
            let lb =
                l.lb.eval(&|v| look(v, env, consts))
                    .map_err(|v| format!("unbound `{v}` in {}", l.header()))?;
            let ub =
                l.ub.eval(&|v| look(v, env, consts))
                    .map_err(|v| format!("unbound `{v}` in {}", l.header()))?;
            let mut i = lb;
            while i <= ub {
                env.push((l.iter.clone(), i));
                for c in &l.body {
                    run(c, consts, env, f)?;
                }
                env.pop();
                let Some(next) = i.checked_add(1) else { break };
                i = next;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lp(iter: &str, body: Vec<LNode>) -> LNode {
        LNode::Loop(Arc::new(Loop {
            iter: Name::from(iter),
            lb: Expr::int(0),
            ub: Expr::var("N"),
            annot: Annotations::default(),
            body,
        }))
    }

    /// `i [j [k]; j; m]`
    fn branchy() -> Nest {
        Nest::new(
            vec![lp("i", vec![lp("j", vec![lp("k", vec![])]), lp("j", vec![]), lp("m", vec![])])],
            vec![],
        )
    }

    #[test]
    fn focus_views_and_splices_a_loop_below_a_branch() {
        let n = branchy();
        assert_eq!(n.path().len(), 1);
        let f = n.focus_on(&LoopAddr::Iter("k".into(), None)).unwrap();
        assert_eq!(f.focus, vec![0, 0, 0]);
        assert_eq!(f.view().path().iter().map(|l| l.iter.to_string()).collect::<Vec<_>>(), ["k"]);
        assert_eq!(f.outer_iters(), vec![Name::from("i"), Name::from("j")]);
        // "j#2", then a level relative to it, then the whole nest again
        let j2 = n.focus_on(&LoopAddr::Iter("j".into(), Some(2))).unwrap();
        assert_eq!(j2.focus, vec![0, 1]);
        assert!(n.focus_on(&LoopAddr::Iter("j".into(), None)).unwrap_err().0.contains("names 2 loops"));
        assert!(n.focus_on(&LoopAddr::Iter("j".into(), Some(3))).is_err());
        let j1 = n.focus_on(&LoopAddr::Iter("j".into(), Some(1))).unwrap();
        assert_eq!(j1.focus_on(&LoopAddr::Level(2)).unwrap().focus, vec![0, 0, 0]);
        assert!(j1.focus_on(&LoopAddr::Level(3)).is_err());
        // one loop back: the focus stays; several items back: it moves to the loop around
        let one = j2.splice(Nest::new(vec![lp("q", vec![])], vec![]));
        assert_eq!(one.focus, vec![0, 1]);
        assert_eq!(one.focused().map(|l| l.iter.to_string()), Some("q".into()));
        let two = j2.splice(Nest::new(vec![lp("q", vec![]), lp("r", vec![])], vec![]));
        assert_eq!(two.focus, vec![0]);
        let top: Vec<String> = two.items[0].as_loop().unwrap().body.iter().map(|x| x.describe()).collect();
        assert_eq!(top, ["loop j in [0, N]", "loop q in [0, N]", "loop r in [0, N]", "loop m in [0, N]"]);
        assert!(two.tree().ends_with("focus: for i in [0, N] (levels count from it)\n"));
        // the untouched sub-trees are shared, not copied
        let (a, b) = (n.items[0].as_loop().unwrap(), two.items[0].as_loop().unwrap());
        assert!(matches!((&a.body[0], &b.body[0]), (LNode::Loop(x), LNode::Loop(y)) if Arc::ptr_eq(x, y)));
    }

    #[test]
    fn addresses_parse() {
        assert_eq!(LoopAddr::parse("k"), Some(LoopAddr::Iter("k".into(), None)));
        assert_eq!(LoopAddr::parse("j#2"), Some(LoopAddr::Iter("j".into(), Some(2))));
        assert_eq!(LoopAddr::parse("j#"), None);
        assert_eq!(LoopAddr::parse("1j"), None);
    }
}
