//! Lifting nested contractions (TeIL Sec. 5, "lifting"): an assignment whose value is one
//! product of several tensors summed over some iterators (an `einsum` of several operands,
//! nested `vcontract`s, a chain of `vmul`s onto an accumulator) becomes a sequence of single
//! contractions through fresh temporaries, in the order that costs the fewest operations at
//! the program's sizes, as opt_einsum chooses it: exhaustively (dynamic programming over the
//! subsets of operands) for up to [`EXHAUSTIVE`] operands, greedily beyond.
//!
//! Cost model (one count for the original and the sequence): a step over the iterators `U` of
//! its two operands runs `Π_{u ∈ U} extent(u)` instances, each one multiplication, plus one
//! addition where it sums (an iterator of `U` is needed by no later step nor the result); the
//! original runs the whole product (`p - 1` multiplications, plus the addition) at every point
//! of all its iterators. An iterator that one operand alone carries, and the result does not, is
//! summed within that operand first (one addition per point of the operand): TeIL Sec. 3.6's
//! eq. 5, `red_+ i (expa i n e) = n e`, with the distributive law, which makes that operand's
//! partners constant along it (`Σ_l X[k] Y[k][l] = X[k] Σ_l Y[k][l]`). It never costs more (the
//! step that would have summed it runs a factor of its extent fewer points), and it makes a
//! product of two operands liftable. Validation first (the form, the extents), then the rewrite,
//! then the check: the sequence and the original are both run by the expression oracle on
//! random data at a small size (`ops::equivalence::agrees_on_small_data`) before the nest is returned.

use super::tensor::{self, Arith};
use crate::error::{Arg, Error, Result};
use crate::ir::{
    AssignMode, DType, Dim, Expr, Iters, Name, Nest, Op, Rewrite, State, TExpr, Value, real_leaf,
};
use std::collections::{BTreeMap, BTreeSet};

/// Up to this many operands the order is searched exhaustively.
pub const EXHAUSTIVE: usize = 10;

/// Up to this many operands `contraction_orders` lists every order.
pub const ENUMERABLE: usize = 6;

/// How many orders `contraction_orders` returns at most (the cheapest).
pub const MAX_ORDERS: usize = 64;

/// How the original writes its result.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Final {
    /// `x = product` (sums only inside `vcontract`), or an accumulator zeroed first: the last
    /// step defines `x` alone.
    Define,
    /// `x = x + product` in a plain assignment: onto what `x` held.
    Onto,
}

/// One operand: a real tensor and the iterators that index it.
#[derive(Clone, Debug)]
struct Term {
    tensor: TExpr,
    idx: Vec<Name>,
}

/// An assignment read as one product: `target[out] (=|+=) scale * Π terms`, summed over every
/// iterator of the terms that is not in `out`.
#[derive(Clone, Debug)]
pub struct Product {
    terms: Vec<Term>,
    scale: f64,
    out: Vec<Name>,
    result: Name,
    fin: Final,
    /// Every iterator: its extent at the program's sizes, and as an expression.
    extents: BTreeMap<Name, (i64, Expr)>,
    /// The iterators in order of first appearance (the result's first).
    order: Vec<Name>,
    dtype: DType,
    original: TExpr,
}

fn refuse(pos: usize, role: &str, expected: &str, found: String) -> Error {
    Error::bad_argument("lift", Arg::new(pos, role), expected, found)
}

const FORM: &str = "an assignment whose value is a product of three or more tensors summed over some \
                    iterators (einsum, nested vcontract, vmul onto an accumulator), or of two where one \
                    carries a summed iterator the other does not";

/// Reads `t` as a product (validation of `lift` and `contraction_orders`).
pub fn analyze(state: &State, t: &TExpr) -> Result<Product> {
    let bad = |found: String| refuse(1, "expression", FORM, found);
    let Op::Assign(mode) = &t.op else {
        return Err(bad(crate::ir::state::describe_tensor(t)));
    };
    let (Some(x), Some(y)) = (t.target(), t.value()) else { return Err(bad(format!("`{t}`"))) };
    let Some(result) = x.id().cloned() else { return Err(bad(format!("`{t}` without a named target"))) };
    let out = plain_iters(x).ok_or_else(|| {
        bad(format!("the result `{x}`, indexed by other than distinct iterators (lift needs plain ones)"))
    })?;
    // `x = x + P` (an accumulation) or `x = P`.
    let (fin, value) = match (&y.op, y.children.as_slice()) {
        (Op::Add, [a, p]) if a.id() == Some(&result) && plain_iters(a).as_ref() == Some(&out) => {
            (if *mode == AssignMode::Accumulator { Final::Define } else { Final::Onto }, p.clone())
        }
        _ => (Final::Define, y.clone()),
    };
    let sums_everything = *mode == AssignMode::Accumulator || fin == Final::Onto;
    let mut terms = Vec::new();
    let mut scale = 1.0;
    let mut contracted = Vec::new();
    flatten(&value, &mut terms, &mut scale, &mut contracted).map_err(bad)?;
    let one_contraction = |n: usize| {
        bad(format!(
            "`{t}`, a product of {n} tensor{}: one contraction already, nothing to lift",
            if n == 1 { "" } else { "s" }
        ))
    };
    if terms.len() < 2 {
        return Err(one_contraction(terms.len()));
    }
    if terms.len() > 60 {
        return Err(refuse(
            1,
            "expression",
            "at most 60 operands",
            format!("a product of {} tensors", terms.len()),
        ));
    }
    // A contraction's iterators belong to it: none may appear outside it.
    for (ks, range) in &contracted {
        for k in ks {
            let outside = out.contains(k)
                || terms.iter().enumerate().any(|(n, term)| !range.contains(&n) && term.idx.contains(k));
            if outside {
                return Err(bad(format!(
                    "the iterator `{k}`, summed by a vcontract and also used outside it (rename one of them)"
                )));
            }
        }
    }
    let mut order: Vec<Name> = out.clone();
    for term in &terms {
        for i in &term.idx {
            if !order.contains(i) {
                order.push(i.clone());
            }
        }
    }
    if let Some(i) = out.iter().find(|i| !terms.iter().any(|t| t.idx.contains(i))) {
        return Err(bad(format!("the result iterator `{i}`, which indexes no operand")));
    }
    // In a plain assignment an iterator left free (outside any vcontract) is not summed: the
    // last instance wins (eq. 14), which no sequence of contractions computes.
    if !sums_everything {
        let summed: BTreeSet<&Name> = contracted.iter().flat_map(|(ks, _)| ks).collect();
        if let Some(i) = order.iter().find(|i| !out.contains(i) && !summed.contains(i)) {
            return Err(bad(format!(
                "`{t}`, a plain assignment whose value keeps `{i}` free (the last instance wins, not a sum): \
                 an einsum, a vcontract or an accumulator sums it"
            )));
        }
    }
    let consts = |v: &str| state.constant(v);
    let mut extents: BTreeMap<Name, (i64, Expr)> = BTreeMap::new();
    let leaves = std::iter::once((x.clone(), out.clone()))
        .chain(terms.iter().map(|t| (t.tensor.clone(), t.idx.clone())));
    for (leaf, idx) in leaves {
        let dims = leaf.shape.dims().unwrap_or(&[]).to_vec();
        for (i, d) in idx.iter().zip(dims) {
            let Dim::Known(e) = d else {
                return Err(bad(format!("`{}`, whose extent along `{i}` is not known", name_of(&leaf))));
            };
            let v = e.eval(&consts).map_err(|c| {
                refuse(
                    1,
                    "expression",
                    "extents in bound named constants",
                    format!("`{c}` unbound (give -D {c}=INT)"),
                )
            })?;
            match extents.get(i) {
                Some((w, we)) if *w != v => {
                    return Err(bad(format!(
                        "the iterator `{i}` over {we} = {w} in one operand and over {e} = {v} in `{}`",
                        name_of(&leaf)
                    )));
                }
                Some(_) => {}
                None => {
                    extents.insert(i.clone(), (v, e));
                }
            }
        }
    }
    if terms.len() == 2 && own_sums(&terms, &out, &extents).iter().all(Vec::is_empty) {
        return Err(one_contraction(2));
    }
    Ok(Product { terms, scale, out, result, fin, extents, order, dtype: x.dtype, original: t.clone() })
}

/// For each operand, the iterators it alone carries that the result does not: summed within it
/// before any contraction (eq. 5 with the distributive law; the module's doc), where they span
/// more than one point (a sum over one point saves nothing).
fn own_sums(terms: &[Term], out: &[Name], extents: &BTreeMap<Name, (i64, Expr)>) -> Vec<Vec<Name>> {
    terms
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let mut own: Vec<Name> = Vec::new();
            for i in &t.idx {
                let elsewhere =
                    out.contains(i) || terms.iter().enumerate().any(|(j, u)| j != k && u.idx.contains(i));
                if !elsewhere && !own.contains(i) {
                    own.push(i.clone());
                }
            }
            let points: i64 = own.iter().map(|i| extents.get(i).map_or(1, |e| e.0)).product();
            if points > 1 { own } else { Vec::new() }
        })
        .collect()
}

/// The operands' iterators once each is summed over what it alone carries (`None`: nothing to
/// sum), and what those sums cost (one addition per point of a reduced operand).
fn reduced(p: &Product) -> (Vec<Option<Vec<Name>>>, f64) {
    let mut cost = 0.0;
    let idx = p
        .terms
        .iter()
        .zip(own_sums(&p.terms, &p.out, &p.extents))
        .map(|(t, own)| {
            if own.is_empty() {
                return None;
            }
            let distinct: BTreeSet<&Name> = t.idx.iter().collect();
            cost += distinct.iter().map(|i| p.extents.get(*i).map_or(1.0, |e| e.0 as f64)).product::<f64>();
            Some(t.idx.iter().filter(|i| !own.contains(i)).cloned().collect())
        })
        .collect();
    (idx, cost)
}

fn name_of(t: &TExpr) -> String {
    t.id().map_or_else(|| t.to_string(), |n| n.to_string())
}

/// The iterators of a leaf indexed by distinct plain iterators.
fn plain_iters(t: &TExpr) -> Option<Vec<Name>> {
    match &t.iters {
        Iters::List(xs) => {
            let vs: Vec<Name> = xs.iter().map(|x| x.as_var().cloned()).collect::<Option<_>>()?;
            let distinct: BTreeSet<&Name> = vs.iter().collect();
            (distinct.len() == vs.len()).then_some(vs)
        }
        Iters::Bullet if t.shape.rank() == 0 => Some(Vec::new()),
        _ => None,
    }
}

type Contracted = Vec<(Vec<Name>, std::ops::Range<usize>)>;

/// Collects the factors of a product; `Err` names the first node that is not one.
fn flatten(
    t: &TExpr,
    terms: &mut Vec<Term>,
    scale: &mut f64,
    contracted: &mut Contracted,
) -> std::result::Result<(), String> {
    match &t.op {
        Op::Mul => t.children.iter().try_for_each(|c| flatten(c, terms, scale, contracted)),
        Op::Contract(ks) => {
            let start = terms.len();
            t.children.iter().try_for_each(|c| flatten(c, terms, scale, contracted))?;
            contracted.push((ks.clone(), start..terms.len()));
            Ok(())
        }
        Op::Lit(x) => {
            *scale *= x;
            Ok(())
        }
        Op::Id(_) if t.is_tensor_leaf() => match &t.iters {
            Iters::List(xs) => {
                let idx: Option<Vec<Name>> = xs.iter().map(|x| x.as_var().cloned()).collect();
                let idx = idx.ok_or_else(|| {
                    format!("the operand `{t}`, indexed by an affine expression (lift needs plain iterators)")
                })?;
                terms.push(Term { tensor: real_leaf(t), idx });
                Ok(())
            }
            _ => {
                terms.push(Term { tensor: real_leaf(t), idx: Vec::new() });
                Ok(())
            }
        },
        _ => Err(format!("`{t}`, whose `{}` is not a product of tensors", t.op.symbol())),
    }
}

/// The products summed into each element of the result of `t` at `state`'s sizes.
pub fn terms(state: &State, t: &TExpr) -> Result<f64> {
    let p = analyze(state, t)?;
    let s = Sets::of(&p)?;
    Ok(s.points(s.union((1u64 << p.terms.len()) - 1) & !s.out))
}

// ---------------------------------------------------------------------------------------------
// Orders

/// The iterators of each operand and of the result as bit sets, with their extents.
struct Sets {
    terms: Vec<u64>,
    out: u64,
    ext: Vec<f64>,
}

impl Sets {
    /// The product as written.
    fn of(p: &Product) -> Result<Sets> {
        Sets::with(p, &vec![None; p.terms.len()])
    }

    /// The product with operand `k` indexed by `idx[k]` where given (after its own sums:
    /// [`reduced`]), else by its own iterators.
    fn with(p: &Product, idx: &[Option<Vec<Name>>]) -> Result<Sets> {
        if p.order.len() > 64 {
            return Err(refuse(1, "expression", "at most 64 iterators", format!("{}", p.order.len())));
        }
        let bit = |i: &Name| 1u64 << p.order.iter().position(|o| o == i).unwrap_or(0);
        Ok(Sets {
            terms: p
                .terms
                .iter()
                .zip(idx)
                .map(|(t, r)| r.as_ref().unwrap_or(&t.idx).iter().fold(0, |m, i| m | bit(i)))
                .collect(),
            out: p.out.iter().fold(0, |m, i| m | bit(i)),
            ext: p.order.iter().map(|i| p.extents.get(i).map_or(1.0, |e| e.0 as f64)).collect(),
        })
    }

    fn union(&self, ops: u64) -> u64 {
        (0..self.terms.len()).filter(|k| ops >> k & 1 == 1).fold(0, |m, k| m | self.terms[k])
    }

    /// The iterators the contraction of operand set `ops` keeps: those the result or an
    /// operand outside `ops` needs.
    fn kept(&self, ops: u64) -> u64 {
        let all = (1u64 << self.terms.len()) - 1;
        self.union(ops) & (self.out | self.union(all & !ops))
    }

    fn points(&self, iters: u64) -> f64 {
        (0..self.ext.len()).filter(|k| iters >> k & 1 == 1).map(|k| self.ext[k]).product()
    }

    /// One step: the union of its operands' iterators, one multiplication per point, plus an
    /// addition where it sums.
    fn step(&self, a: u64, b: u64) -> f64 {
        let (ia, ib) = (self.kept_or_leaf(a), self.kept_or_leaf(b));
        let u = ia | ib;
        let sums = u & !self.kept(a | b) != 0;
        self.points(u) * if sums { 2.0 } else { 1.0 }
    }

    /// A single operand's own iterators; an intermediate's kept ones.
    fn kept_or_leaf(&self, ops: u64) -> u64 {
        if ops.count_ones() == 1 { self.terms[ops.trailing_zeros() as usize] } else { self.kept(ops) }
    }

    /// The original: `p - 1` multiplications and an addition (where it sums) at every point.
    fn original(&self) -> f64 {
        let all = self.union((1u64 << self.terms.len()) - 1);
        let sums = all & !self.out != 0;
        self.points(all) * ((self.terms.len() - 1) as f64 + if sums { 1.0 } else { 0.0 })
    }
}

/// opt_einsum's path: each step's two positions in the current list of operands.
pub type Path = Vec<(usize, usize)>;

/// A contraction tree: a leaf operand, or two subtrees.
#[derive(Clone, Debug)]
enum Tree {
    Leaf(usize),
    Node(Box<Tree>, Box<Tree>),
}

impl Tree {
    fn ops(&self) -> u64 {
        match self {
            Tree::Leaf(k) => 1 << k,
            Tree::Node(a, b) => a.ops() | b.ops(),
        }
    }

    /// The steps in the order they run (children first): the operand sets each contracts.
    fn steps(&self) -> Vec<(u64, u64)> {
        fn go(t: &Tree, out: &mut Vec<(u64, u64)>) {
            if let Tree::Node(a, b) = t {
                go(a, out);
                go(b, out);
                out.push((a.ops(), b.ops()));
            }
        }
        let mut pairs = Vec::new();
        go(self, &mut pairs);
        pairs
    }

    fn cost(&self, s: &Sets) -> f64 {
        match self {
            Tree::Leaf(_) => 0.0,
            Tree::Node(a, b) => a.cost(s) + b.cost(s) + s.step(a.ops(), b.ops()),
        }
    }

    /// opt_einsum's path: each step's two positions in the current list of operands, the
    /// result appended.
    fn path(&self, n: usize) -> Vec<(usize, usize)> {
        let mut list: Vec<u64> = (0..n).map(|k| 1 << k).collect();
        let mut path = Vec::new();
        for (a, b) in self.steps() {
            let pa = list.iter().position(|x| *x == a).unwrap_or(0);
            let pb = list.iter().position(|x| *x == b).unwrap_or(0);
            path.push((pa.min(pb), pa.max(pb)));
            list.retain(|x| *x != a && *x != b);
            list.push(a | b);
        }
        path
    }
}

/// The cheapest tree: dynamic programming over subsets (`n <= EXHAUSTIVE`), else greedy (the
/// cheapest next step first).
fn best_tree(s: &Sets) -> Tree {
    let n = s.terms.len();
    if n > EXHAUSTIVE {
        return greedy(s);
    }
    // Up to ENUMERABLE operands, every tree: among equally cheap ones the first path in
    // lexicographic order, which contracts the operands in the order written where that costs
    // nothing (interp: A[a][d] with u, then A[b][f], then A[c][g], as examples/interp.teml).
    if n <= ENUMERABLE {
        let mut all: Vec<(f64, Path, Tree)> =
            all_trees((1u64 << n) - 1).into_iter().map(|t| (t.cost(s), t.path(n), t)).collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        if let Some((_, _, t)) = all.into_iter().next() {
            return t;
        }
    }
    let full = (1usize << n) - 1;
    let mut best: Vec<(f64, usize)> = vec![(f64::INFINITY, 0); full + 1];
    for k in 0..n {
        best[1 << k] = (0.0, 0);
    }
    let mut sets: Vec<usize> = (1..=full).filter(|m| m.count_ones() >= 2).collect();
    sets.sort_by_key(|m| m.count_ones());
    for m in sets {
        let low = m & m.wrapping_neg();
        // Submasks containing the lowest operand: each split once.
        let mut a = (m - 1) & m;
        while a > 0 {
            if a & low != 0 {
                let b = m & !a;
                let c = best[a].0 + best[b].0 + s.step(a as u64, b as u64);
                if c < best[m].0 {
                    best[m] = (c, a);
                }
            }
            a = (a - 1) & m;
        }
    }
    fn tree(best: &[(f64, usize)], m: usize) -> Tree {
        if m.count_ones() == 1 {
            return Tree::Leaf(m.trailing_zeros() as usize);
        }
        let a = best[m].1;
        Tree::Node(Box::new(tree(best, a)), Box::new(tree(best, m & !a)))
    }
    tree(&best, full)
}

fn greedy(s: &Sets) -> Tree {
    let mut list: Vec<Tree> = (0..s.terms.len()).map(Tree::Leaf).collect();
    while list.len() > 1 {
        let mut pick = (f64::INFINITY, 0, 1);
        for a in 0..list.len() {
            for b in a + 1..list.len() {
                let c = s.step(list[a].ops(), list[b].ops());
                if c < pick.0 {
                    pick = (c, a, b);
                }
            }
        }
        let b = list.remove(pick.2);
        let a = list.remove(pick.1);
        list.push(Tree::Node(Box::new(a), Box::new(b)));
    }
    list.pop().unwrap_or(Tree::Leaf(0))
}

/// Every tree over the operand set `m` (unordered children).
fn all_trees(m: u64) -> Vec<Tree> {
    if m.count_ones() == 1 {
        return vec![Tree::Leaf(m.trailing_zeros() as usize)];
    }
    let low = m & m.wrapping_neg();
    let mut out = Vec::new();
    let mut a = (m - 1) & m;
    while a > 0 {
        if a & low != 0 {
            for x in all_trees(a) {
                for y in all_trees(m & !a) {
                    out.push(Tree::Node(Box::new(x.clone()), Box::new(y)));
                }
            }
        }
        a = (a - 1) & m;
    }
    out
}

/// The tree of a path given by the user, with the step that makes it invalid.
fn tree_of_path(n: usize, path: &[(i64, i64)]) -> std::result::Result<Tree, String> {
    if path.len() != n - 1 {
        return Err(format!("{} steps (one per contraction of {n} operands: {})", path.len(), n - 1));
    }
    let mut list: Vec<Tree> = (0..n).map(Tree::Leaf).collect();
    for (k, &(a, b)) in path.iter().enumerate() {
        let len = list.len() as i64;
        let inside = |x: i64| (0..len).contains(&x);
        if !inside(a) || !inside(b) || a == b {
            return Err(format!(
                "step {} [{a}, {b}]: {} operands remain (positions 0 to {}), and the two must differ",
                k + 1,
                len,
                len - 1
            ));
        }
        let (lo, hi) = (a.min(b) as usize, a.max(b) as usize);
        let y = list.remove(hi);
        let x = list.remove(lo);
        list.push(Tree::Node(Box::new(x), Box::new(y)));
    }
    Ok(list.pop().unwrap_or(Tree::Leaf(0)))
}

/// The orders of `t`'s product, cheapest first, each with its operation count: every order
/// for up to [`ENUMERABLE`] operands (at most [`MAX_ORDERS`]), else the best and the greedy.
pub fn orders(state: &State, t: &TExpr) -> Result<Vec<(Path, f64)>> {
    let p = analyze(state, t)?;
    let (idx, pre) = reduced(&p);
    let s = Sets::with(&p, &idx)?;
    let n = p.terms.len();
    let trees = if n <= ENUMERABLE { all_trees((1u64 << n) - 1) } else { vec![best_tree(&s), greedy(&s)] };
    let mut out: Vec<(Path, f64)> = trees.iter().map(|t| (t.path(n), pre + t.cost(&s))).collect();
    out.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    out.dedup_by(|a, b| a.0 == b.0);
    out.truncate(MAX_ORDERS);
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The rewrite

/// What `lift` computed, for the REPL and reports.
pub struct Lifted {
    /// The sequence as one nest (its statements built by `build`, in order).
    pub nest: Nest,
    /// The sequence's assignments.
    pub stmts: Vec<TExpr>,
}

/// How `lift` lays out its temporaries' dimensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TempLayout {
    /// The result's iterators first, then the others by first appearance in the product: the
    /// loops `build` makes run along the temporaries (outer loops, such as interp's element
    /// loop, stay outermost for fusion and storage contraction).
    #[default]
    ResultFirst,
    /// The iterators the step that reads a temporary sums over first, those it keeps last: the
    /// temporary is contiguous along that step's result, as a register block wants (mttkrp's
    /// Khatri-Rao product laid out `[k][l][j]` for the matrix product that follows).
    SummedFirst,
}

impl TempLayout {
    /// The names `lift`'s third argument takes.
    pub const NAMES: [(&'static str, TempLayout); 2] =
        [("result_first", TempLayout::ResultFirst), ("summed_first", TempLayout::SummedFirst)];
}

/// `lift(t)` / `lift(t, order)`: the sequence of single contractions equal to `t`.
pub fn lift(state: &State, t: &TExpr, order: Option<&[(i64, i64)]>, layout: TempLayout) -> Result<Lifted> {
    let p = analyze(state, t)?;
    let written = Sets::of(&p)?;
    let (idx, pre) = reduced(&p);
    let s = Sets::with(&p, &idx)?;
    let n = p.terms.len();
    let tree = match order {
        None => best_tree(&s),
        Some(path) => tree_of_path(n, path).map_err(|why| {
            refuse(2, "order", "a contraction order: n-1 steps [a, b] of positions in the current list", why)
        })?,
    };
    let path = tree.path(n);
    let steps = tree.steps();
    // Fresh names for the temporaries: `<result>_1`, `<result>_2`, ...
    let mut taken: BTreeSet<Name> = state.vars.keys().cloned().collect();
    taken.extend(state.consts.keys().cloned());
    taken.extend(p.order.iter().cloned());
    let mut scratch = state.clone();
    let mut list: Vec<(Term, u64)> =
        p.terms.iter().cloned().enumerate().map(|(k, t)| (t, 1u64 << k)).collect();
    let mut stmts = Vec::new();
    let mut temps = Vec::new();
    let vars = |xs: &[Name]| -> Vec<Expr> { xs.iter().map(Expr::var_name).collect() };
    let fresh_temp = |taken: &mut BTreeSet<Name>, temps: &mut Vec<Name>| {
        let fresh = tensor::fresh(&format!("{}_{}", p.result, temps.len() + 1), taken);
        taken.insert(fresh.clone());
        temps.push(fresh.clone());
        fresh
    };
    // A temporary's dimensions: the iterators of `kept` in the layout's order, for the
    // temporary of operand set `ops`.
    let in_order = |set: u64| -> Vec<Name> {
        p.order.iter().enumerate().filter(|(i, _)| set >> i & 1 == 1).map(|(_, v)| v.clone()).collect()
    };
    let laid_out = |kept: u64, ops: u64| -> Vec<Name> {
        if layout == TempLayout::SummedFirst {
            // What the step reading this temporary keeps of it: the rest it sums over.
            let reader = steps.iter().find(|(a, b)| *a == ops || *b == ops).map_or(0, |(a, b)| a | b);
            let keeps = if reader == (1u64 << n) - 1 { s.out } else { s.kept(reader) };
            [in_order(kept & !keeps), in_order(kept & keeps)].concat()
        } else {
            in_order(kept)
        }
    };
    // Binds `name` to the step `stmt`: the statement as bound (for the sequence), and the
    // tensor it defines (the operand of later steps).
    let define = |scratch: &mut State, name: &Name, stmt: TExpr| -> Result<(TExpr, TExpr)> {
        *scratch = tensor::assign(scratch, name, None, Value::Tensor(stmt))?;
        let Some(Value::Tensor(bound)) = scratch.get(name).cloned() else {
            return Err(internal(format!("the step defining `{name}` is not bound")));
        };
        let leaf = scratch.real_tensor(name).ok_or_else(|| internal(format!("`{name}` is not a tensor")))?;
        Ok((bound, leaf))
    };
    let dims_of = |idx: &[Name]| -> Vec<Expr> {
        idx.iter().map(|i| p.extents.get(i).map_or(Expr::int(1), |e| e.1.clone())).collect()
    };
    // Each operand summed first over what it alone carries: `T[kept] += X[idx]` (eq. 5).
    for (k, (term, _)) in list.iter_mut().enumerate().filter(|(k, _)| idx[*k].is_some()) {
        let kept = laid_out(s.terms[k], 1 << k);
        let acc = tensor::tensor(&scratch, "accumulator", &dims_of(&kept), p.dtype)?;
        let o = vars(&kept);
        let operand = (term.tensor.shape.rank() > 0).then(|| vars(&term.idx));
        let stmt = tensor::op(&scratch, Arith::Add, &acc, &term.tensor, Some(&o), operand.as_deref(), &o)?;
        let name = fresh_temp(&mut taken, &mut temps);
        let (bound, leaf) = define(&mut scratch, &name, stmt)?;
        stmts.push(bound);
        *term = Term { tensor: leaf, idx: kept };
    }
    for (k, (a, b)) in path.iter().enumerate() {
        let last = k + 1 == path.len();
        let (y, ys) = list.remove(*b);
        let (x, xs) = list.remove(*a);
        let ops = xs | ys;
        let idx: Vec<Name> = if last { p.out.clone() } else { laid_out(s.kept(ops), ops) };
        let sums = x.idx.iter().chain(&y.idx).any(|i| !idx.contains(i));
        // A scalar (rank 0) takes no iterator list (eq. 12).
        let iters = |t: &Term| (t.tensor.shape.rank() > 0).then(|| vars(&t.idx));
        let mut prod = tensor::vop(
            &scratch,
            Arith::Mul,
            &x.tensor,
            &y.tensor,
            iters(&x).as_deref(),
            iters(&y).as_deref(),
        )?;
        if last && p.scale != 1.0 {
            prod = tensor::vop(&scratch, Arith::Mul, &prod, &lit(p.scale), None, None)?;
        }
        let dims = dims_of(&idx);
        let o = vars(&idx);
        let ol = (!o.is_empty()).then_some(o.as_slice());
        let stmt = if last && p.fin == Final::Onto {
            let base = scratch.real_tensor(&p.result).unwrap_or_else(|| real_leaf(&x.tensor));
            tensor::op(&scratch, Arith::Add, &base, &prod, ol, None, &o)?
        } else if sums {
            let acc = tensor::tensor(&scratch, "accumulator", &dims, p.dtype)?;
            // The accumulator (□, unset iterators) takes its list even when empty.
            tensor::op(&scratch, Arith::Add, &acc, &prod, Some(&o), None, &o)?
        } else {
            tensor::eq(&scratch, &prod, None, &o)?
        };
        let name = if last { p.result.clone() } else { fresh_temp(&mut taken, &mut temps) };
        let (bound, leaf) = define(&mut scratch, &name, stmt)?;
        stmts.push(bound);
        list.push((Term { tensor: leaf, idx }, ops));
    }
    let mut nest = super::build::sequence(&scratch, &stmts)?;
    nest.rewrites.push(Rewrite {
        by: "lift".into(),
        original: p.original.clone(),
        result: p.result.clone(),
        temps,
        order: path,
        flops_before: written.original(),
        flops_after: pre + tree.cost(&s),
        terms: written.points(written.union((1u64 << n) - 1) & !written.out),
        factors: n,
        scale: p.scale,
    });
    super::equivalence::agrees_on_small_data("lift", state, &p.original, &stmts, &p.result)?;
    Ok(Lifted { nest, stmts })
}

/// What `:lift t` prints: the sequence `lift(t)` makes, its FLOPs, and the cheapest orders.
pub fn describe(state: &State, t: &TExpr) -> Result<String> {
    let lifted = lift(state, t, None, TempLayout::default())?;
    let mut out = String::new();
    for (k, s) in lifted.stmts.iter().enumerate() {
        out.push_str(&format!("{}. {s}\n", k + 1));
    }
    if let Some(r) = lifted.nest.rewrites.first() {
        out.push_str(&r.describe());
        out.push('\n');
    }
    let orders = orders(state, t)?;
    out.push_str(&format!("orders ({} listed, cheapest first):", orders.len()));
    for (path, cost) in orders.iter().take(5) {
        out.push_str(&format!(
            "\n  {}  {} flops",
            crate::ir::rewrite::path(path),
            crate::ir::rewrite::flops(*cost)
        ));
    }
    if orders.len() > 5 {
        out.push_str(&format!(
            "\n  ... {} more: contraction_orders({})",
            orders.len() - 5,
            t.target().and_then(|x| x.id()).map_or("t".into(), |n| n.to_string())
        ));
    }
    Ok(out)
}

fn lit(x: f64) -> TExpr {
    crate::ir::TNode::leaf(Op::Lit(x), crate::ir::Shape::Dims(vec![]), Iters::Bullet, DType::Double)
}

fn internal(reason: String) -> Error {
    Error::Internal { builtin: "lift".into(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets(terms: &[&str], out: &str, n: f64) -> Sets {
        let mut order: Vec<char> = out.chars().collect();
        for t in terms {
            for c in t.chars() {
                if !order.contains(&c) {
                    order.push(c);
                }
            }
        }
        let bit = |c: char| 1u64 << order.iter().position(|o| *o == c).unwrap_or(0);
        Sets {
            terms: terms.iter().map(|t| t.chars().fold(0, |m, c| m | bit(c))).collect(),
            out: out.chars().fold(0, |m, c| m | bit(c)),
            ext: vec![n; order.len()],
        }
    }

    #[test]
    fn interp_is_lifted_to_three_n4_steps() {
        // v[e,a,b,c] = A[a,d] A[b,f] A[c,g] u[e,d,f,g]: O(n^7) naive, three O(n^5) steps lifted.
        let s = sets(&["ad", "bf", "cg", "edfg"], "eabc", 10.0);
        let t = best_tree(&s);
        assert_eq!(s.original(), 1e7 * 4.0);
        assert_eq!(t.cost(&s), 3.0 * 2e5);
        // Every order that contracts u first with one A is as good; none joins two A's first.
        let p = t.path(4);
        assert!(p[0].1 == 3 || p[0].0 == 3, "{p:?}");
    }

    #[test]
    fn mttkrp_multiplies_the_factor_matrices_first() {
        // A[i,j] = B[i,k,l] D[l,j] C[k,j]: D*C first (a Hadamard over j), then one product.
        let s = sets(&["ikl", "lj", "kj"], "ij", 10.0);
        let t = best_tree(&s);
        assert_eq!(t.path(3), vec![(1, 2), (0, 1)]);
        assert_eq!(s.original(), 1e4 * 3.0);
        assert_eq!(t.cost(&s), 1e3 + 2e4);
    }

    #[test]
    fn the_search_agrees_with_enumeration_and_greedy_is_valid() {
        let s = sets(&["ab", "bc", "cd", "de", "ea"], "", 6.0);
        let best = best_tree(&s).cost(&s);
        let all = all_trees(0b11111);
        assert_eq!(all.len(), 105);
        let min = all.iter().map(|t| t.cost(&s)).fold(f64::INFINITY, f64::min);
        assert_eq!(best, min);
        assert!(greedy(&s).cost(&s) >= best);
        for t in &all {
            let back =
                tree_of_path(5, &t.path(5).iter().map(|(a, b)| (*a as i64, *b as i64)).collect::<Vec<_>>());
            assert_eq!(back.map(|b| b.cost(&s)).ok(), Some(t.cost(&s)));
        }
    }

    #[test]
    fn bad_paths_say_which_step() {
        assert!(tree_of_path(3, &[(0, 1)]).unwrap_err().contains("1 steps"));
        assert!(tree_of_path(3, &[(0, 1), (0, 2)]).unwrap_err().contains("step 2 [0, 2]"));
        assert!(tree_of_path(3, &[(1, 1), (0, 1)]).unwrap_err().contains("step 1"));
    }
}
