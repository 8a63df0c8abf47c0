//! The rules: a search space of paths built from a nest itself, written as a Rhai script of
//! teml's builtins whose choices are `param(name, choices)` calls (docs/tuning.md, "Generated
//! spaces"). Each list of choices is ordered by the machine model: its first choice is the one
//! the model prefers, with its reason, so the space at its first choices is `teml auto`'s path.
//!
//! The sketches, as MetaSchedule's rules and Ansor's sketches build them:
//! - **register_tile** (BLIS): the inner three loops are rows, columns contiguous in the result
//!   and a long reduction: an mr x nr block of the result in vector registers across kc
//!   iterations of the reduction, column blocks of nc, operands packed or not.
//! - **register_block**: a data-parallel loop contiguous in the result in vector lanes (nr), a
//!   row loop unrolled and jammed (mr; the row whose operands are reused or broadcast, not
//!   loaded as vectors per row), the block kept in registers across the loops after it (the
//!   reductions), small reduction windows (a convolution's 3x3) unrolled, the outer
//!   data-parallel loops on threads (collapsed when the outermost is short for the cores).
//! - **gathered_block**: the same block with its lanes along a data-parallel loop the result is
//!   not contiguous in (gconv's channels `o`, 49 apart), its vectors gathered and stored lane by
//!   lane around the reductions, operands stored with that loop's dimension last
//!   (`permute_layout`); first where the result's contiguous loop fills vectors badly.
//! - **loops**: a legal order of the outer loops (the loop with the smallest strides
//!   innermost first), square tiles where the inner loops' data exceed the L2, the outermost
//!   parallel loop on threads, the innermost in lanes where data-parallel or a reduction into
//!   one element, streaming stores for
//!   a result written once that exceeds the caches.
//! - kernels of several nests, or nests with several statements at a level: every nest fused at
//!   the deepest level legal for each pair with the temporaries stored per iteration (storage
//!   contraction), or the first fusable pair, or none; then each part's outermost parallel loop
//!   on threads and, unfused, its innermost in lanes.
//! - **lift** (TeIL Sec. 5): a product of three or more tensors summed over some iterators
//!   (an einsum of several operands) as written, or as a sequence of single contractions in
//!   one of its cheapest orders (`contraction_orders`), each contraction then scheduled by the
//!   rules above (through `focus`), or two contractions fused block by block ([`super::chain`]:
//!   the temporary a register block at a time). Lifted first when it saves at least half the
//!   operations, or at least 1.3x where an order's contractions fuse.
//! - **loops** first where a block has nothing to keep or share (coars, blur: no reduction,
//!   every access varying along every loop), untiled where no reuse reaches past the L2.
//!
//! Every point is a legal path by construction or refused by the legality check of the
//! builtin that makes it, before anything is compiled.

use super::walk::{Located, extent, loops_in_order};
use super::workload::{Access, LoopInfo, Workload};
use crate::ir::{Name, Nest, State};
use crate::lang::rhai_ref;
use crate::ops::explore::Parallelism;
use crate::runtime::machine::Machine;
use std::fmt::Write;

/// One choice of a parameter and why the model ranks it where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The choice as Rhai writes it (`8`, `"collapse"`, `[1, 3, 2]`).
    pub value: String,
    /// Why (for the first choice: why the model picks it).
    pub reason: String,
}

/// A parameter of the generated space, its choices in the model's order.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Its name.
    pub name: String,
    /// The choices, the model's pick first.
    pub choices: Vec<Choice>,
}

/// A generated space.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Space {
    /// Rhai statements over the program's variables that leave the path in `p` (one nest) or in
    /// the variables `p1, p2, ...` (`outputs`).
    pub body: String,
    /// The variables holding the kernel's nests at the end of `body`.
    pub outputs: Vec<String>,
    /// The parameters, each with its choices and reasons.
    pub decisions: Vec<Decision>,
    /// What the rules read off the nests (comment lines).
    pub facts: Vec<String>,
}

impl Space {
    /// The reason the model gives for the choice a run took (`seen`). Sketches may each
    /// declare a parameter of the same name (`rows`, `parallel`): the one with as many choices,
    /// among them the value taken.
    pub fn reason(&self, seen: &crate::ir::Seen) -> &str {
        let value = seen.value.as_str();
        fn reason<'a>(d: &'a Decision, value: &str) -> Option<&'a str> {
            d.choices.iter().find(|c| c.text() == value).map(|c| c.reason.as_str())
        }
        let named = || self.decisions.iter().filter(move |d| d.name == seen.name);
        named()
            .filter(|d| d.choices.len() == seen.choices)
            .find_map(|d| reason(d, value))
            .or_else(|| named().find_map(|d| reason(d, value)))
            .unwrap_or("")
    }
}

impl Choice {
    /// The choice as `param` reports it (a string without its quotes).
    pub fn text(&self) -> &str {
        self.value.trim_matches('"')
    }
}

/// Writes the body line by line, with the parameters' comments.
#[derive(Default)]
struct Out {
    text: String,
    indent: usize,
    decisions: Vec<Decision>,
    /// Put before every parameter's name (the rules of one contraction of a lifted product).
    prefix: String,
}

impl Out {
    fn line(&mut self, s: &str) {
        let _ = writeln!(self.text, "{}{s}", "    ".repeat(self.indent));
    }

    /// `let var = param("name", [choices]);` with one comment line per choice.
    fn param(&mut self, var: &str, name: &str, what: &str, choices: Vec<Choice>) {
        let mut seen: Vec<Choice> = Vec::new();
        for c in choices {
            if !seen.iter().any(|s| s.value == c.value) {
                seen.push(c);
            }
        }
        let name = format!("{}{name}", self.prefix);
        self.line(&format!("// {name}: {what}"));
        for c in &seen {
            self.line(&format!("//   {}: {}", c.value, c.reason));
        }
        let list: Vec<&str> = seen.iter().map(|c| c.value.as_str()).collect();
        self.line(&format!("let {var} = param(\"{name}\", [{}]);", list.join(", ")));
        self.decisions.push(Decision { name, choices: seen });
    }
}

fn choice(value: impl ToString, reason: impl Into<String>) -> Choice {
    Choice { value: value.to_string(), reason: reason.into() }
}

/// The generated space of the kernel made of `nests` (name, nest) in `state`.
pub fn generate(state: &State, nests: &[(Name, Nest)], m: &Machine) -> Result<Space, String> {
    let mut out = Out::default();
    let mut facts = Vec::new();
    let outputs = match nests {
        [] => return Err("expected a kernel with at least one nest, found none".into()),
        [(name, nest)] => {
            let w = Workload::of(state, nest)?;
            facts.extend(describe(&w));
            if w.perfect && w.n_stmts == 1 && !w.loops.is_empty() {
                out.line(&format!("let p = {};", rhai_ref(name)));
                let pivots = super::pivots::pivots(state, nest, &w);
                if let Some(pv) = &pivots {
                    out.param(
                        "pivot",
                        "pivot",
                        "loops carried only through a pivot split there, the pieces on threads and in lanes",
                        vec![
                            choice(
                                "true",
                                format!(
                                    "split {} (before, at and after the pivot): each side's loops are free (isl), on threads and in lanes",
                                    pv.why
                                ),
                            ),
                            choice("false", "as written, by the rules of a single nest"),
                        ],
                    );
                    out.line("if pivot {");
                    out.indent += 1;
                    for l in &pv.steps {
                        out.line(l);
                    }
                    out.indent -= 1;
                    out.line("} else {");
                    out.indent += 1;
                }
                match lift_plan(state, &w) {
                    Some(plan) => {
                        facts.push(plan.fact.clone());
                        lifted_or_written(&mut out, &plan, &w, m);
                    }
                    None => single(&mut out, &w, m),
                }
                if pivots.is_some() {
                    out.indent -= 1;
                    out.line("}");
                }
            } else {
                facts.push(format!(
                    "{name} is not a perfect nest of one statement ({} statements): its outer loop on threads, its inner loops in lanes",
                    w.n_stmts
                ));
                several(&mut out, state, &[(name.clone(), nest.clone())], m)?;
            }
            vec!["p".to_string()]
        }
        many => {
            for (name, nest) in many {
                if let Ok(w) = Workload::of(state, nest) {
                    facts.push(format!("{name}: {}", w.describe_loops()));
                }
            }
            several(&mut out, state, many, m)?
        }
    };
    Ok(Space { body: out.text, outputs, decisions: out.decisions, facts })
}

/// Comment lines on a workload: its loops and each access's contiguous loop.
fn describe(w: &Workload) -> Vec<String> {
    let mut facts = vec![format!("loops: {}", w.describe_loops())];
    for a in &w.accesses {
        let inner: Vec<String> =
            w.loops.iter().filter(|l| a.contiguous_in(&l.iter)).map(|l| l.iter.to_string()).collect();
        facts.push(format!(
            "{} {}: {}",
            if a.write { "writes" } else { "reads" },
            a.text(),
            if inner.is_empty() {
                "contiguous in no loop".to_string()
            } else {
                format!("contiguous in {}", inner.join(", "))
            }
        ));
    }
    facts
}

/// The rules for a perfect nest of one statement, transforming `p` (the nest, or one
/// contraction of a lifted product in focus).
fn single(out: &mut Out, w: &Workload, m: &Machine) {
    let target = w.writes().next().cloned();
    let tile = target.as_ref().and_then(|t| matmul_like(w, t));
    let block = target.as_ref().and_then(|t| block_plan(w, t));
    let triangle = if tile.is_none() { target.as_ref().and_then(|t| triangle_like(w, t)) } else { None };
    let mut sketches = Vec::new();
    if let Some((t, c)) = &triangle {
        sketches.push(choice(
            "\"triangle\"",
            format!(
                "{}: a product over a triangle ({} from {}{}): {TRIANGLE_TILE} x {TRIANGLE_TILE} tiles, those off the diagonal rectangular, each with BLIS's register tile; the diagonal's as written",
                t.target,
                t.j,
                t.i,
                if *c > 0 { format!(" + {c}") } else { String::new() }
            ),
        ));
    }
    if let Some(t) = &tile {
        sketches.push(choice(
            "\"register_tile\"",
            format!(
                "{}: rows {}, columns {} contiguous in {}, a reduction {} of {} iterations: BLIS's register tile with cache blocks",
                t.target, t.i, t.j, t.target, t.k, t.k_extent
            ),
        ));
    }
    if let Some(b) = &block {
        sketches.push(choice(
            "\"register_block\"",
            format!(
                "{} contiguous in {} (data-parallel): a block of {} in vector registers{}",
                b.target,
                b.lane_iter,
                b.target,
                b.layouts
                    .iter()
                    .map(|(n, o)| format!(
                        "; {n} stored with {} last ({o:?}), read across it as declared",
                        b.lane_iter
                    ))
                    .collect::<String>()
            ),
        ));
    }
    // No row loop for a block: the lanes alone, across the reductions (a 1-D convolution).
    let lanes_only = match (&target, &block) {
        (Some(t), None) => lane_plan(w, t, m),
        _ => None,
    };
    if let Some(lb) = &lanes_only {
        sketches.push(choice(
            "\"lane_block\"",
            format!(
                "{} contiguous in {} (data-parallel), no other loop of {} to take rows from: a block of {} lanes in vector registers across {}",
                lb.target,
                lb.lane_iter,
                lb.target,
                lb.lane_iter,
                lb.reductions.join(", ")
            ),
        ));
    }
    let gathered = target.as_ref().and_then(|t| gathered_plan(w, t, m));
    if let Some(g) = &gathered {
        let c = choice(
            "\"gathered_block\"",
            format!(
                "a block of {} in vector registers, {}",
                g.target,
                g.gather.as_ref().map_or("", |x| &x.why)
            ),
        );
        // First where the contiguous block fills its vectors badly (half as many useful lanes).
        match &block {
            Some(b) if lanes_per_op(g, m) >= 1.5 * lanes_per_op(b, m) => {
                let at = sketches.iter().position(|s| s.value == "\"register_block\"").unwrap_or(0);
                sketches.insert(at, c);
            }
            _ => sketches.push(c),
        }
    }
    if time_tiled(w) {
        let names: Vec<String> = w.loops.iter().map(|l| l.iter.to_string()).collect();
        sketches.insert(
            0,
            choice(
                "\"time_tiles\"",
                format!(
                    "every loop carries a dependence ({}; {} a time loop no access uses): skewed into a permutable band, then tiled across time (Pluto's time tiling)",
                    names.join(", "),
                    names[0]
                ),
            ),
        );
    }
    if let Some(once) = in_order(w) {
        // Nothing for a block to keep or share: the loops first.
        sketches.insert(
            0,
            choice(
                "\"loops\"",
                if once {
                    "every element is used once (no reduction, every access varies along every loop): the loops in order on threads and in lanes, nothing for registers or tiles to keep"
                } else {
                    "no reduction for a block of registers to stay across and no operand its rows would share (a stencil's neighbouring rows come from the cache): the loops in order on threads and in lanes"
                },
            ),
        );
    } else {
        sketches.push(choice("\"loops\"", "a legal loop order, tiles, threads and lanes (any nest)"));
    }
    out.param("sketch", "sketch", "the kind of schedule", sketches.clone());
    let mut first = true;
    for s in &sketches {
        let kind = s.value.trim_matches('"').to_string();
        out.line(&format!("{}if sketch == {} {{", if first { "" } else { "} else " }, s.value));
        first = false;
        out.indent += 1;
        match kind.as_str() {
            "register_tile" => register_tile(out, tile.as_ref().expect("tile"), m),
            "triangle" => {
                let t = &triangle.as_ref().expect("triangle").0;
                out.line(&format!(
                    "p = stripmine(p, 1, {TRIANGLE_TILE}, \"aligned\"); p = stripmine(p, 3, {TRIANGLE_TILE}, \"aligned\"); p = interchange(p, 2, 3);"
                ));
                out.line("// the tiles off the diagonal (jo > io) apart: rectangular");
                out.line("let io = iterators(p)[0];");
                out.line("p = split(p, 2, iter(io) + 1); p = distribute(p, 1); p = focus(p, io + \"#2\");");
                register_tile(out, t, m);
                out.line("p = focus(p);");
            }
            "register_block" => register_block(out, w, block.as_ref().expect("block"), m),
            "gathered_block" => register_block(out, w, gathered.as_ref().expect("gathered"), m),
            "lane_block" => lane_block(out, w, lanes_only.as_ref().expect("lanes"), m),
            "time_tiles" => time_tiles(out, w),
            _ => loops(out, w, m),
        }
        out.indent -= 1;
    }
    out.line("}");
}

/// The temporaries of `temps` that `store_at` at level `r` takes, in order, on the nests fused
/// at `r`: each applied after the ones before it and checked for legality as the builtin is
/// (isl, with a witness), so that the space never offers a contraction its script refuses.
fn contractible(state: &State, nests: &[(Name, Nest)], r: usize, temps: Vec<Name>) -> Vec<Name> {
    use crate::ops::transform::{fuse_outer, store_at};
    let level = r as i64;
    let Some(mut f) =
        nests.iter().skip(1).try_fold(nests[0].1.clone(), |acc, (_, n)| fuse_outer(&acc, n, level).ok())
    else {
        return Vec::new();
    };
    temps
        .into_iter()
        .filter(|t| match store_at(state, &f, level, t, &[]) {
            Ok(g) if crate::ops::registry::legality_gate(state, "store_at", &g).is_ok() => {
                f = g;
                true
            }
            _ => false,
        })
        .collect()
}

/// The longest run of three or more consecutive nests (first and last index) whose pairs
/// share a fusion level, with the deepest such level; `levels[k]` is the pair k, k + 1's.
fn longest_run(levels: &[Vec<usize>]) -> Option<(usize, usize, usize)> {
    let mut best: Option<(usize, usize, usize)> = None;
    for s in 0..levels.len() {
        let mut shared: Vec<usize> = levels[s].clone();
        for (t, level) in levels.iter().enumerate().skip(s) {
            shared.retain(|r| level.contains(r));
            let Some(&r) = shared.iter().max() else { break };
            // Pairs s..=t: nests s..=t + 1.
            if t > s && best.is_none_or(|(a, b, _)| t + 1 - s > b - a) {
                best = Some((s, t + 1, r));
            }
        }
    }
    best
}

/// Whether some element or cache line is used again only after more than `bytes` of other
/// data: a loop that is not innermost carries reuse (an access that does not vary along it, two
/// accesses of one tensor apart along it as a stencil's rows, or an access contiguous along it
/// and not along the innermost, as a transposition's) and one of its iterations touches more
/// than `bytes` (mm's `i`: all of B; a transposition's `i`: a column, a cache line an element;
/// not blur's `i`: three rows).
fn reuse_beyond(w: &Workload, bytes: u64) -> bool {
    let Some(innermost) = w.loops.last() else { return false };
    let d = w.loops.len();
    (0..d - 1).any(|v| {
        let it = &w.loops[v].iter;
        let inner = &w.loops[v + 1..];
        // An access that does not vary along this loop nor along a loop inside it (before the
        // innermost) is used again at that inner loop, after little data, and stays in cache
        // (ttv's `x[k]` under `i` and `j`): its reuse across this loop is no reason to tile.
        let between = &w.loops[v + 1..d - 1];
        let carries = w.accesses.iter().any(|a| {
            (a.stride(it) == Some(0) && between.iter().all(|u| a.stride(&u.iter) != Some(0)))
                || (a.contiguous_in(it) && !a.contiguous_in(&innermost.iter))
                || w.accesses.iter().any(|b| {
                    b.tensor == a.tensor && b.index != a.index && a.index.iter().any(|x| x.mentions(it))
                })
        });
        // One iteration's footprint: each access's elements over the inner loops it varies
        // along, a cache line each where the innermost loop does not walk it contiguously; a
        // tensor's accesses counted once for each distinct index along this loop (a 3 x 3
        // stencil's nine accesses are three rows).
        let size = |a: &Access| -> f64 {
            let n: f64 = inner
                .iter()
                .filter(|l| a.stride(&l.iter) != Some(0))
                .map(|l| l.mean_extent.max(1.0))
                .product();
            let unit = if a.contiguous_in(&innermost.iter) || a.stride(&innermost.iter) == Some(0) {
                a.dtype.size() as f64
            } else {
                64.0
            };
            n * unit
        };
        let mut tensors: Vec<&Name> = w.accesses.iter().map(|a| &a.tensor).collect();
        tensors.sort();
        tensors.dedup();
        let touched: f64 = tensors
            .iter()
            .map(|t| {
                let of: Vec<&Access> = w.accesses.iter().filter(|a| a.tensor == **t).collect();
                let mut keys: Vec<Vec<String>> = of
                    .iter()
                    .map(|a| a.index.iter().filter(|x| x.mentions(it)).map(|x| x.to_string()).collect())
                    .collect();
                keys.sort();
                keys.dedup();
                of.iter().map(|a| size(a)).fold(0.0, f64::max) * keys.len() as f64
            })
            .sum();
        carries && touched > bytes as f64
    })
}

/// Whether a block has nothing to keep or share: every loop data-parallel, every access
/// varying along every loop and contiguous along the innermost; `Some(true)` where each tensor
/// has one index, so that every element is used once (coars's `C[i][j] = Ixx[i][j] *
/// Iyy[i][j] - ...`), `Some(false)` where a tensor is read at several offsets (blur's 3 x 3
/// stencil). Not a transposition (its blocks turn columns into rows), not a rank update's
/// `u[i] * v[j]` (its rows share `v`).
fn in_order(w: &Workload) -> Option<bool> {
    let inner = w.loops.last()?;
    let ok = w.loops.iter().all(|l| l.kind == Parallelism::Independent)
        && w.accesses.iter().all(|a| {
            a.contiguous_in(&inner.iter) && w.loops.iter().all(|l| a.stride(&l.iter).is_some_and(|s| s != 0))
        });
    ok.then(|| {
        w.accesses.iter().all(|a| w.accesses.iter().all(|b| b.tensor != a.tensor || b.index == a.index))
    })
}

/// A stencil swept in place over time (seidel-2d's `t, i, j`): two or three loops, every one
/// carrying a dependence, the outermost used by no access, at least 4 time steps and 32
/// iterations of every other loop.
fn time_tiled(w: &Workload) -> bool {
    let d = w.loops.len();
    (2..=3).contains(&d)
        && w.perfect
        && w.n_stmts == 1
        && w.loops.iter().all(|l| l.kind == Parallelism::Carried)
        && w.loops.iter().enumerate().all(|(k, l)| l.extent.is_some_and(|e| e >= if k == 0 { 4 } else { 32 }))
        && w.accesses.iter().all(|a| a.index.iter().all(|x| !x.mentions(&w.loops[0].iter)))
}

/// Time tiling: each loop skewed by every loop outside it (factor 1: a neighbour's value of
/// the step before, or of this step already updated, is then never in a later tile), the band
/// strip-mined on Pluto's tile lattice ("aligned") and its tile loops outermost; optionally
/// the tiles of one wavefront on threads. `permute` and the skews are checked by isl.
fn time_tiles(out: &mut Out, w: &Workload) {
    let d = w.loops.len();
    let mut skews = Vec::new();
    for s in 2..=d {
        for r in (1..s).rev() {
            skews.push(format!("p = skew(p, {r}, {s}, 1);"));
        }
    }
    out.line(&skews.join(" "));
    out.param(
        "tile",
        "tile",
        "the edge of a tile of the skewed band",
        vec![
            choice(16, "a tile's skewed rows stay in L1 across its time steps"),
            choice(32, "32 (Pluto's default)"),
            choice(8, "8"),
        ],
    );
    let levels: Vec<String> = (0..d).map(|k| (2 * k + 1).to_string()).collect();
    out.line(&format!("for r in [{}] {{ p = stripmine(p, r, tile, \"aligned\"); }}", levels.join(", ")));
    let order: Vec<String> =
        (0..d).map(|k| (2 * k + 1).to_string()).chain((0..d).map(|k| (2 * k + 2).to_string())).collect();
    out.line(&format!("p = permute(p, [{}]);", order.join(", ")));
    out.param(
        "wavefront",
        "wavefront",
        "the tiles of one wavefront on threads",
        vec![
            choice("false", "tiles in order on one thread (their reuse across time is the gain)"),
            choice("true", "the outer tile loops skewed into wavefronts, a wavefront's tiles on threads"),
        ],
    );
    out.line("if wavefront { p = parallelize(interchange(skew(p, 1, 2, 1), 1, 2), 2); }");
}

/// How many of the cheapest contraction orders the space offers.
const LIFT_ORDERS: usize = 2;

/// One contraction order of a lifted product: its steps, its FLOPs, and its contractions (the
/// focus address of each one's outer loop, its workload), in program order.
struct LiftOrder {
    steps: Vec<(usize, usize)>,
    flops: f64,
    parts: Vec<Part>,
}

/// A product of three or more operands and its cheapest contraction orders, each with the
/// sequence `lift` makes.
struct LiftPlan {
    tensor: Name,
    /// FLOPs as written.
    before: f64,
    orders: Vec<LiftOrder>,
    fact: String,
}

fn lift_plan(state: &State, w: &Workload) -> Option<LiftPlan> {
    use crate::ir::Value;
    use crate::ops::lift::{self, TempLayout};
    let target = w.writes().next()?;
    let Some(Value::Tensor(x)) = state.vars.get(&target.tensor) else { return None };
    let orders = lift::orders(state, x).ok()?;
    if orders.first()?.0.len() < 2 {
        return None;
    }
    let mut out = Vec::new();
    let mut before = 0.0;
    for (path, _) in orders.into_iter().take(LIFT_ORDERS) {
        let steps: Vec<(i64, i64)> = path.iter().map(|&(a, b)| (a as i64, b as i64)).collect();
        let Ok(l) = lift::lift(state, x, Some(&steps), TempLayout::SummedFirst) else { continue };
        let Some(r) = l.nest.rewrites.first() else { continue };
        before = r.flops_before;
        // The temporaries as tensors of the state, so that their accesses have extents.
        let mut s = state.clone();
        for st in &l.stmts {
            if let Some(id) = st.target().and_then(|t| t.id()) {
                s.vars.insert(id.clone(), Value::Tensor(st.clone()));
            }
        }
        let parts = top_parts(&s, &l.nest)?;
        out.push(LiftOrder { steps: path, flops: r.flops_after, parts });
    }
    let best = out.first()?.flops;
    Some(LiftPlan {
        tensor: target.tensor.clone(),
        before,
        fact: format!(
            "{} is a product of {} operands: {:.3e} flops as written, {:.3e} lifted in its cheapest order ({:.1}x fewer)",
            target.tensor,
            out[0].steps.len() + 1,
            before,
            best,
            before / best.max(1.0)
        ),
        orders: out,
    })
}

/// Whether a loop's sub-tree is a single path of loops (no sequence).
fn one_path(l: &crate::ir::Loop) -> bool {
    match l.body.as_slice() {
        [crate::ir::LNode::Loop(x)] => one_path(x),
        body => body.iter().all(|x| x.as_loop().is_none()),
    }
}

/// Whether a loop's sub-tree is a single path down to one statement.
fn one_statement(l: &crate::ir::Loop) -> bool {
    match l.body.as_slice() {
        [crate::ir::LNode::Stmt(_)] => true,
        [crate::ir::LNode::Loop(x)] => one_statement(x),
        _ => false,
    }
}

/// The top-level items of `nest` as perfect nests of one statement each: the address `focus`
/// takes for each one's outer loop ("i#2": the second loop over `i` in program order) and its
/// workload; `None` where one is not such a nest.
fn top_parts(state: &State, nest: &Nest) -> Option<Vec<Part>> {
    if nest.items.iter().any(|x| x.as_loop().is_none()) {
        return None;
    }
    let mut parts = Vec::new();
    for top in loops_in_order(&nest.items).into_iter().filter(|p| p.at.len() == 1) {
        let sub = Nest { items: vec![crate::ir::LNode::Loop(top.l)], focus: Vec::new(), ..nest.clone() };
        let w = Workload::of(state, &sub).ok()?;
        if !(w.perfect && w.n_stmts == 1 && !w.loops.is_empty()) {
            return None;
        }
        // Reordered in place (the other parts beside it), as `focus` then `permute` do.
        let reorder = wants_reorder(state, &Nest { focus: top.at, ..nest.clone() }, &w);
        parts.push(Part { address: top.address, work: w, reorder });
    }
    Some(parts)
}

/// One perfect nest of one statement among the top-level items of a nest: the address `focus`
/// takes for its outer loop, its workload, and the loop a better order puts innermost.
struct Part {
    address: String,
    work: Workload,
    reorder: Option<Reorder>,
}

/// A nest with sequences inside (statements fused as written: covariance's sum, scaling and
/// mirroring under one `i, j`; correlation's `i` around a statement and a `j` loop), distributed
/// into perfect nests of one statement: the loops `distribute` splits, innermost first, as the
/// addresses `focus` takes, and the parts.
struct Distribution {
    addresses: Vec<String>,
    parts: Vec<Part>,
}

/// The first loop whose body is a sequence with no sequence inside it, if any; loops `kept`
/// names (by [`loop_key`]) count as having no sequence.
fn innermost_sequence(
    items: &[crate::ir::LNode],
    kept: &std::collections::BTreeSet<String>,
) -> Option<Located> {
    fn splits(l: &crate::ir::Loop, kept: &std::collections::BTreeSet<String>) -> bool {
        l.body.len() > 1 && !kept.contains(&loop_key(l))
    }
    fn has_sequence(items: &[crate::ir::LNode], kept: &std::collections::BTreeSet<String>) -> bool {
        items.iter().any(|x| x.as_loop().is_some_and(|l| splits(l, kept) || has_sequence(&l.body, kept)))
    }
    loops_in_order(items).into_iter().find(|p| splits(&p.l, kept) && !has_sequence(&p.l.body, kept))
}

/// A loop's identity across rewrites of the loops around it: its iterator and its statements.
fn loop_key(l: &crate::ir::Loop) -> String {
    let mut stmts = Vec::new();
    fn go(items: &[crate::ir::LNode], out: &mut Vec<String>) {
        for x in items {
            match x {
                crate::ir::LNode::Stmt(s) => out.push(s.to_string()),
                crate::ir::LNode::Loop(l) => go(&l.body, out),
            }
        }
    }
    go(&l.body, &mut stmts);
    format!("{}: {}", l.iter, stmts.join("; "))
}

/// `items` with the loop at `at` (item indices from the top) distributed: one loop per item of
/// its body, the same header, as `focus` then `distribute(p, 1)` make it.
fn distribute_at(items: &[crate::ir::LNode], at: &[usize]) -> Vec<crate::ir::LNode> {
    use crate::ir::LNode;
    let Some((&k, rest)) = at.split_first() else { return items.to_vec() };
    let mut out = items[..k].to_vec();
    if let Some(LNode::Loop(l)) = items.get(k) {
        if rest.is_empty() {
            out.extend(l.body.iter().map(|b| LNode::Loop(l.with_body(vec![b.clone()]))));
        } else {
            out.push(LNode::Loop(l.with_body(distribute_at(&l.body, rest))));
        }
    }
    out.extend(items.iter().skip(k + 1).cloned());
    out
}

/// The nest distributed loop by loop, innermost sequences first, each step legal (isl): a
/// sequence whose distribution is illegal stays (adi's `j` around a recurrence of two
/// statements, gramschmidt's `k`), the loops around it are still tried. The parts: where the
/// whole nest distributes into perfect nests of one statement, those; else the loops deeper
/// down whose sub-trees are such nests (gramschmidt's `j` around a sum over `i`, inside `k`).
fn distribution(state: &State, nest: &Nest) -> Option<Distribution> {
    if !nest.focus.is_empty() {
        return None;
    }
    let mut cur = nest.clone();
    let mut addresses = Vec::new();
    let mut kept = std::collections::BTreeSet::new();
    loop {
        // The steps from `cur` on, unchecked: each distributes the next innermost sequence of
        // the nest the one before left (addresses as `focus` takes them then).
        let mut steps: Vec<(String, String, Nest)> = Vec::new();
        let mut next = cur.clone();
        while let Some(seq) = innermost_sequence(&next.items, &kept) {
            if addresses.len() + kept.len() + steps.len() >= 32 {
                return None;
            }
            next = Nest { items: distribute_at(&next.items, &seq.at), ..next.clone() };
            steps.push((seq.address, loop_key(&seq.l), next.clone()));
        }
        if steps.is_empty() {
            break;
        }
        // The longest legal run of them (isl). A pair of instances one step reorders stays
        // reordered by the steps after it, so legality only falls along the run: the whole run
        // first, then all but the last (an outer loop carrying the others, as adi's time
        // steps), then by halves.
        let legal = |k: usize| -> Option<bool> {
            Some(k == 0 || crate::analysis::legality::decide_at_sizes(state, &steps[k - 1].2).ok()?.is_ok())
        };
        let n = steps.len();
        let good = if legal(n)? {
            n
        } else if legal(n - 1)? {
            n - 1
        } else {
            let (mut lo, mut hi) = (0, n - 1);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if legal(mid)? { lo = mid } else { hi = mid }
            }
            lo
        };
        if good > 0 {
            cur = steps[good - 1].2.clone();
        }
        let refused = (good < n).then(|| steps[good].1.clone());
        addresses.extend(steps.into_iter().take(good).map(|s| s.0));
        match refused {
            Some(key) => {
                kept.insert(key);
            }
            None => break,
        }
    }
    if addresses.is_empty() {
        return None;
    }
    let parts = match top_parts(state, &cur) {
        Some(p) => p,
        None => deep_parts(state, &cur),
    };
    (!parts.is_empty()).then_some(Distribution { addresses, parts })
}

/// The loops of a nest whose sub-trees are perfect nests of one statement and whose parent
/// runs a sequence, in program order (the addresses `focus` takes).
fn deep_parts(state: &State, nest: &Nest) -> Vec<Part> {
    use crate::ir::LNode;
    let mut found = Vec::new();
    for p in loops_in_order(&nest.items).into_iter().filter(|p| p.in_sequence && one_statement(&p.l)) {
        // The part inside the loops around it (their bounds and iterators), alone.
        let whole = p.around.iter().rev().fold(p.l.clone(), |inner, a| a.with_body(vec![LNode::Loop(inner)]));
        let outer = p.around.len();
        let sub = Nest { items: vec![LNode::Loop(whole)], focus: Vec::new(), ..nest.clone() };
        let Ok(w) = Workload::shape(state, &sub) else { continue };
        if !(w.perfect && w.n_stmts == 1 && w.loops.len() >= outer + 2) {
            continue;
        }
        found.push((p, sub, w, outer));
    }
    // The parts' own loops classified with one reading of the nest's dependences: a loop carries
    // what the statements inside it carry, the same in the nest as in the part alone (the
    // loops around a part are not its own: drained below).
    let own: Vec<Vec<std::sync::Arc<crate::ir::Loop>>> =
        found.iter().map(|(_, sub, _, outer)| sub.view().path().into_iter().skip(*outer).collect()).collect();
    let asked: Vec<&crate::ir::Loop> = own.iter().flatten().map(|l| l.as_ref()).collect();
    let kinds = crate::analysis::legality::carried_kinds(state, nest, &asked).ok();
    let mut parts = Vec::new();
    let mut at = 0;
    for ((p, sub, mut w, outer), own) in found.into_iter().zip(&own) {
        let classified: Option<Vec<Parallelism>> = match &kinds {
            Some(k) => (0..own.len())
                .map(|i| crate::ops::explore::kind(state, &sub, outer + i + 1, k[at + i]).ok())
                .collect(),
            None => Workload::of_below(state, &sub, outer)
                .ok()
                .map(|x| x.loops.iter().skip(outer).map(|l| l.kind).collect()),
        };
        at += own.len();
        let Some(classified) = classified else { continue };
        // The part's own loops, numbered from its top (as `focus` numbers them).
        w.loops.drain(..outer);
        for (k, (l, c)) in w.loops.iter_mut().zip(classified).enumerate() {
            l.level = k + 1;
            l.kind = c;
        }
        let reorder = wants_reorder(state, &Nest { focus: p.at, ..nest.clone() }, &w);
        parts.push(Part { address: p.address, work: w, reorder });
    }
    parts
}

/// What `inner_lanes` finds.
struct Lanes {
    /// The innermost loops in lanes, each as the address `focus` takes, with the reason and,
    /// for a reduction into one element, its mean trip count.
    inner: Vec<(String, String, Option<f64>)>,
    /// The loops around such a loop and a statement beside it that carry a dependence
    /// (cholesky's `j`): unrolled by 2, their two iterations' independent work (the two
    /// reductions) overlaps.
    unroll: Vec<String>,
    /// The outermost data-parallel loops below the top level, inside loops that carry
    /// dependences (jacobi-2d's two sweeps `i` inside the time loop `t`): on threads.
    threads: Vec<String>,
}

/// The innermost loops (no loop inside) of a nest with sequences that can run in vector lanes:
/// data-parallel, or a reduction into one element (cholesky's `A[i][j] -= A[i][k] * A[j][k]`
/// over `k`), every access contiguous or invariant along it.
fn inner_lanes(state: &State, nest: &Nest) -> Lanes {
    use crate::ir::LNode;
    let innermost = |l: &crate::ir::Loop| l.body.iter().all(|b| b.as_loop().is_none());
    let all = loops_in_order(&nest.items);
    let mut out = Vec::new();
    let mut unroll: Vec<String> = Vec::new();
    for p in all.iter().filter(|p| innermost(&p.l)) {
        let l = &p.l;
        let alone = Nest { items: vec![LNode::Loop(l.clone())], focus: Vec::new(), ..nest.clone() };
        let Ok(w) = Workload::shape(state, &alone) else { continue };
        if w.accesses.iter().any(|a| a.stride(&l.iter).is_none_or(|s| s != 0 && s != 1)) {
            continue;
        }
        let focused = Nest { focus: p.at.clone(), ..nest.clone() };
        let Ok(kinds) = crate::ops::explore::parallelism(state, &focused) else { continue };
        let (why, sum) = match kinds.first().map(|k| k.2) {
            Some(Parallelism::Independent) => ("data-parallel".to_string(), None),
            Some(Parallelism::Reduction) if crate::analysis::reduction::plan(l, true).is_ok() => (
                format!("a reduction into {}", w.writes().next().map_or(String::new(), |t| t.text())),
                Some(w.loops.first().map_or(0.0, |x| x.mean_extent)),
            ),
            _ => continue,
        };
        out.push((p.address.clone(), why, sum));
        // Its parent, where a statement runs beside it and the parent's body is statements and
        // innermost loops (unrolling a loop around whole nests copies them: cholesky's `i`).
        let Some(parent) = all.iter().find(|q| p.in_sequence && q.at[..] == p.at[..p.at.len() - 1]) else {
            continue;
        };
        let shallow = parent.l.body.iter().all(|b| b.as_loop().is_none_or(|x| innermost(x)));
        if shallow && !unroll.contains(&parent.address) {
            let focused = Nest { focus: parent.at.clone(), ..nest.clone() };
            if crate::ops::explore::parallelism(state, &focused)
                .is_ok_and(|k| k.first().is_some_and(|k| k.2 == Parallelism::Carried))
            {
                unroll.push(parent.address.clone());
            }
        }
    }
    // The outermost loops that carry no dependence and hold loops, with 16 iterations or more:
    // those of a sequence at the top, or below loops that carry dependences (a team of threads
    // per iteration of the loops around: worth it for a sweep, not for a handful of
    // iterations). A nest of one top-level loop that carries none is the generic rule's.
    let mut threads: Vec<String> = Vec::new();
    let mut covered: Vec<Vec<usize>> = Vec::new();
    for p in &all {
        if (p.at.len() < 2 && nest.items.len() < 2)
            || innermost(&p.l)
            || covered.iter().any(|c| p.at.starts_with(c))
        {
            continue;
        }
        let Some(extent) = extent(state, &p.l) else { continue };
        let focused = Nest { focus: p.at.clone(), ..nest.clone() };
        if extent >= 16 && !crate::analysis::legality::carries(state, &focused, &p.l).unwrap_or(true) {
            threads.push(p.address.clone());
            covered.push(p.at.clone());
        }
    }
    Lanes { inner: out, unroll, threads }
}

/// Whether a sum into one element of `mean_extent` terms on average is worth vector lanes:
/// two vectors' terms or more (the 2 terms of a 2 x 2 pooling window's inner loop in 8 lanes
/// cost their horizontal sum and gain nothing: 3.5 ms as written, 8.7 ms in lanes; Zen 5).
fn long_sum(mean_extent: f64, lanes: usize) -> bool {
    mean_extent >= (2 * lanes) as f64
}

/// The innermost sums into one element of `nests` fused at level `r` (as `fuse_outer` fuses
/// them) that are worth `lanes` ([`long_sum`]): their addresses in the fused nest, with the
/// reason (the rules of a single nest put such a sum in lanes; in a fused nest it is left to
/// the compiler, which keeps a floating-point sum scalar).
fn fused_sums(state: &State, nests: &[(Name, Nest)], r: usize, lanes: usize) -> Vec<(String, String)> {
    let Some(((_, first), rest)) = nests.split_first() else { return Vec::new() };
    let fused = rest
        .iter()
        .try_fold(first.clone(), |acc, (_, n)| crate::ops::transform::fuse_outer(&acc, n, r as i64));
    let Ok(fused) = fused else { return Vec::new() };
    inner_lanes(state, &fused)
        .inner
        .into_iter()
        .filter_map(|(a, why, sum)| sum.filter(|&e| long_sum(e, lanes)).map(|_| (a, why)))
        .collect()
}

/// The product as written (the rules of a single nest) or lifted (each contraction by the
/// rules of a single nest, or two contractions fused block by block: [`super::chain`]), lifted
/// first when it saves at least half the operations, or at least 1.3x where the contractions
/// fuse (no temporary's traffic).
fn lifted_or_written(out: &mut Out, plan: &LiftPlan, w: &Workload, m: &Machine) {
    let best = plan.orders[0].flops;
    let chains: Vec<Option<(super::chain::Chain, Block)>> = plan.orders.iter().map(chain_plan).collect();
    // Orders that fuse first, where they cost at most 10% more operations than the cheapest.
    let mut ranked: Vec<usize> = (0..plan.orders.len()).collect();
    ranked.sort_by_key(|&k| chains[k].is_none() || plan.orders[k].flops > 1.1 * best);
    let fused = chains[ranked[0]].is_some();
    let ratio = plan.before / plan.orders[ranked[0]].flops.max(1.0);
    let lifted = choice(
        "\"lifted\"",
        format!(
            "{} as single contractions through temporaries: {ratio:.1}x fewer operations ({:.2e} -> {:.2e}){}",
            plan.tensor,
            plan.before,
            plan.orders[ranked[0]].flops,
            if fused { ", the temporary a register block at a time" } else { "" }
        ),
    );
    let written = choice(
        "\"as_written\"",
        format!(
            "the product as written: lifting saves {ratio:.1}x the operations and adds temporaries' traffic"
        ),
    );
    let forms =
        if ratio >= 2.0 || (fused && ratio >= 1.3) { vec![lifted, written] } else { vec![written, lifted] };
    out.param("form", "form", &format!("{} as written or lifted (TeIL Sec. 5)", plan.tensor), forms);
    out.line("if form == \"as_written\" {");
    out.indent += 1;
    single(out, w, m);
    out.indent -= 1;
    out.line("} else {");
    out.indent += 1;
    let show = |path: &[(usize, usize)]| {
        format!("[{}]", path.iter().map(|(a, b)| format!("[{a}, {b}]")).collect::<Vec<_>>().join(", "))
    };
    out.param(
        "contraction",
        "contraction",
        "the contraction order (opt_einsum's path: each step contracts two operands of the list; summed_first: each temporary contiguous along the result of the step that reads it)",
        ranked
            .iter()
            .map(|&k| {
                let o = &plan.orders[k];
                choice(
                    show(&o.steps),
                    format!(
                        "{:.2e} flops in {} contractions{}",
                        o.flops,
                        o.parts.len(),
                        if chains[k].is_some() { ", which fuse" } else { "" }
                    ),
                )
            })
            .collect(),
    );
    out.line(&format!("p = lift({}, contraction, \"summed_first\");", rhai_ref(&plan.tensor)));
    for (n, &k) in ranked.iter().enumerate() {
        let o = &plan.orders[k];
        out.line(&format!("{}if contraction == {} {{", if n == 0 { "" } else { "} else " }, show(&o.steps)));
        out.indent += 1;
        if let Some((ch, b)) = &chains[k] {
            out.prefix = if k == 0 { String::new() } else { format!("o{}_", k + 1) };
            out.param(
                "fusion",
                "fusion",
                "the two contractions fused block by block, or each by its own rules",
                vec![
                    choice("\"fused\"", ch.why.clone()),
                    choice("\"apart\"", "each contraction by its own rules, the temporary whole in memory"),
                ],
            );
            out.line("if fusion == \"fused\" {");
            out.indent += 1;
            out.prefix = if k == 0 { "f_".into() } else { format!("o{}f_", k + 1) };
            fused_chain(out, o, ch, b, m);
            out.prefix.clear();
            out.indent -= 1;
            out.line("} else {");
            out.indent += 1;
        }
        // The last contraction first: transforming it leaves the earlier ones' addresses as
        // they are.
        for (j, Part { address, work: wc, .. }) in o.parts.iter().enumerate().rev() {
            out.line(&format!("// contraction {}: {}", j + 1, wc.statements.join("; ")));
            out.line(&format!("p = focus(p, \"{address}\");"));
            out.prefix = if k == 0 { format!("c{}_", j + 1) } else { format!("o{}c{}_", k + 1, j + 1) };
            single(out, wc, m);
            out.prefix.clear();
        }
        out.line("p = focus(p);");
        if chains[k].is_some() {
            out.indent -= 1;
            out.line("}");
        }
        out.indent -= 1;
    }
    out.line("}");
    out.indent -= 1;
    out.line("}");
}

/// The fused schedule of an order of two contractions ([`super::chain`]), with the producer's
/// register block (its rows the first of `block_plan`'s that chain).
fn chain_plan(o: &LiftOrder) -> Option<(super::chain::Chain, Block)> {
    let [p, c] = o.parts.as_slice() else { return None };
    let t = p.work.writes().next()?;
    // The fused schedule converts no layout.
    let mut b = block_plan(&p.work, t).filter(|b| b.layouts.is_empty())?;
    let (row, ch) = b.rows.iter().find_map(|r| {
        let ch = super::chain::chain(&p.work, &c.work, &r.1)?;
        (ch.lanes == b.lane_iter).then(|| (r.clone(), ch))
    })?;
    b.rows = vec![row];
    Some((ch, b))
}

/// Both contractions ordered alike, register-blocked alike, fused over their shared loops, the
/// temporary stored per block (`store_at`), the rows' blocks on threads.
fn fused_chain(out: &mut Out, o: &LiftOrder, ch: &super::chain::Chain, b: &Block, m: &Machine) {
    let mr = block_sizes(out, b, m);
    let perm = |order: &[usize]| -> Option<String> {
        let identity = order.iter().enumerate().all(|(k, &l)| l == k + 1);
        let v: Vec<String> = order.iter().map(|l| l.to_string()).collect();
        (!identity).then(|| format!("p = permute(p, [{}]);", v.join(", ")))
    };
    // The consumer first: transforming it leaves the producer's address as it is.
    for (part, order, t) in
        [(&o.parts[1], &ch.consumer_order, &ch.target), (&o.parts[0], &ch.producer_order, &ch.temp)]
    {
        out.line(&format!("// {}", part.work.statements.join("; ")));
        out.line(&format!("p = focus(p, \"{}\");", part.address));
        if let Some(l) = perm(order) {
            out.line(&l);
        }
        out.line(&format!("p = register_block(p, {}, 1, {}, mr, nr);", rhai_ref(t), ch.shared));
    }
    out.line("p = focus(p);");
    out.line(&format!("for r in 1..={} {{ p = fuse_inner(p, r); }}", ch.shared));
    out.line(&format!("p = store_at(p, {}, {});", ch.shared, rhai_ref(&ch.temp)));
    // The rows' blocks on threads, or collapsed with the next shared loop where it is
    // data-parallel and the blocks are few or uneven for the cores.
    let cores = m.cores.max(1) as i64;
    let mr = mr.max(1) as i64;
    let blocks = (ch.rows_extent + mr - 1) / mr;
    let mut ch_par = vec![choice(
        "\"outer\"",
        format!("the {blocks} blocks of {} rows (at mr = {mr}) on threads", ch.rows),
    )];
    if let Some((next, e)) = &ch.next_parallel {
        let c = choice(
            "\"collapse\"",
            format!(
                "the blocks of {} rows and {next} ({e}) collapsed on threads: {} iterations",
                ch.rows,
                blocks * e
            ),
        );
        // Not where the last block of rows is partial: collapsed, the rows' loop cannot be
        // split where it starts (see `parallel_outer`).
        if (blocks < 8 * cores || blocks % cores != 0) && ch.rows_extent % mr == 0 {
            ch_par.insert(0, c)
        } else {
            ch_par.push(c)
        }
    }
    ch_par.push(choice("\"none\"", "one thread"));
    out.param("parallel", "parallel", "the outer loops on threads", ch_par);
    out.line("if parallel == \"outer\" { p = parallelize(p, 1); }");
    out.line("if parallel == \"collapse\" { p = collapse(p, 1, 2); }");
}

/// A matrix product's inner three loops: rows i, columns j (contiguous in the result), a
/// reduction k.
struct Tile {
    target: Name,
    /// Loops outside the three.
    outer: usize,
    i: Name,
    j: Name,
    k: Name,
    k_extent: i64,
    j_extent: i64,
    i_extent: i64,
    /// The operand contiguous in j (packed as panels), and the one indexed by i and k.
    b: Option<Name>,
    a: Option<(Name, usize)>,
    dtype: crate::ir::DType,
    /// A triangle's tiles off the diagonal ([`triangle_like`]): its row tiles on threads.
    triangle: bool,
}

/// The tile's side where a product over a triangle (`j` from `i`) is cut into square tiles:
/// three vectors of 16 lanes, or two of 24, or eight rows of 6.
const TRIANGLE_TILE: i64 = 48;

/// A product over a triangle, `C[i][j] += A[k][i] B[k][j]` for `j` from `i` (or `i + 1`),
/// covariance's: square tiles of [`TRIANGLE_TILE`], those off the diagonal (`jo > io`)
/// rectangular, each a matrix product for the register tile (the tiles inside the focused
/// part, loops `io, jo` around it); the diagonal's tiles stay as written. Returns the tile and
/// the triangle's offset (0 or 1).
fn triangle_like(w: &Workload, t: &Access) -> Option<(Tile, i64)> {
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
    Some((tile, *c))
}

fn matmul_like(w: &Workload, t: &Access) -> Option<Tile> {
    let d = w.loops.len();
    if d < 3 {
        return None;
    }
    let (li, lj, lk) = (&w.loops[d - 3], &w.loops[d - 2], &w.loops[d - 1]);
    let ok = li.kind == Parallelism::Independent
        && lj.kind == Parallelism::Independent
        && lk.kind == Parallelism::Reduction
        && t.contiguous_in(&lj.iter)
        // Every operand that varies along the columns is loaded as vectors along them
        // (`registers` refuses a strided one: attention's `Q K^T` reads K[b][h][j][d]).
        && w.reads_in_lanes(&lj.iter)
        && t.index.iter().any(|x| x.mentions(&li.iter))
        && !t.index.iter().any(|x| x.mentions(&lk.iter))
        && lk.extent.is_some_and(|e| e >= 64)
        && lj.extent.is_some_and(|e| e >= 16)
        && li.extent.is_some_and(|e| e >= 8);
    if !ok {
        return None;
    }
    let reads: Vec<&Access> = w.reads().filter(|a| a.tensor != t.tensor).collect();
    let mentions = |a: &Access, l: &LoopInfo| a.index.iter().any(|x| x.mentions(&l.iter));
    // The rows must be rows of an operand (one read along them and the reduction, not the
    // columns): otherwise every row of the tile broadcasts the same element, and the product
    // is over other loops (`C[a][b][c][d] = sum_k A[a][b][k] B[k][c][d]` has rows a and b,
    // not c: a tile over c, d, k read all of B per row of A, 2.8x slower than as written).
    if !reads.iter().any(|a| mentions(a, li) && mentions(a, lk) && !mentions(a, lj)) {
        return None;
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
    Some(Tile {
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
        triangle: false,
    })
}

fn register_tile(out: &mut Out, t: &Tile, m: &Machine) {
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
    // kc: the panel of B (kc x nr) stays in L1, A's mr x kc in L1 too.
    let elem = t.dtype.size() as u64;
    let l1 = m.caches[0].max(16 << 10);
    let fit = (l1 / 2 / (elem * (2 * lanes as u64 + 8))).max(16) as i64;
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
    out.line(&format!("p = register_tile(p, {}, mr, nr, kc, nc);", rhai_ref(&t.target)));
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
    out.line("p = parallelize(p, parallel);");
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
    if let Some(b) = &t.b {
        out.line(&format!(
            "if pack == \"B\" || pack == \"both\" {{ p = pack(p, {}, {}); }}",
            o + 3,
            rhai_ref(b)
        ));
    }
    if let Some((a, 2)) = &t.a {
        out.line(&format!(
            "if pack == \"A^T\" || pack == \"both\" {{ p = pack(p, {}, {}, [2, 1]); }}",
            o + 4,
            rhai_ref(a)
        ));
    }
}

/// The register block's plan: the lane loop and the row candidates.
struct Block {
    target: Name,
    lane_level: usize,
    lane_iter: Name,
    lane_extent: i64,
    /// (level, iterator, extent, reason), best first.
    rows: Vec<(usize, Name, i64, String)>,
    /// Innermost loops (after the rows and the lanes) with a small constant extent.
    windows: Vec<(Name, i64)>,
    dtype: crate::ir::DType,
    /// Operands stored with the lanes' dimension last (`permute_layout`): tensor and order.
    layouts: Layouts,
    /// Lanes along a loop the result is not contiguous in: its vectors gathered and stored
    /// lane by lane around the block.
    gather: Option<Gather>,
}

/// Operands and the order of their dimensions `permute_layout` stores them in.
type Layouts = Vec<(Name, Vec<usize>)>;

/// The lanes of a gathered block ([`gathered_plan`]).
struct Gather {
    /// Why these lanes.
    why: String,
}

/// The layouts that make every operand of `w` (but the result `t`) that varies along `lane`
/// contiguous in it, or `None`: each strided one must be a tensor the kernel only reads, whose
/// one index along the loop is the loop's iterator, every access of it alike, used at least 16
/// times an element (converted once at entry: `permute_layout`, that dimension last).
fn lane_layouts(w: &Workload, t: &Access, lane: &LoopInfo) -> Option<Layouts> {
    let written: Vec<&Name> = w.writes().map(|a| &a.tensor).collect();
    let instances: f64 = w.loops.iter().map(|l| l.mean_extent.max(1.0)).product();
    let mut layouts: Layouts = Vec::new();
    for a in w.reads().filter(|a| a.tensor != t.tensor) {
        if a.stride(&lane.iter) == Some(0) || a.contiguous_in(&lane.iter) {
            continue;
        }
        let at: Vec<usize> =
            a.index.iter().enumerate().filter(|(_, x)| x.mentions(&lane.iter)).map(|(k, _)| k).collect();
        let elements: f64 = a.dims.iter().map(|&d| d as f64).product();
        if at.len() != 1
            || a.index[at[0]] != crate::ir::Expr::var(&lane.iter)
            || written.contains(&&a.tensor)
            || a.dims.is_empty()
            || instances < 16.0 * elements
        {
            return None;
        }
        // Every access of the tensor runs along the loop in that dimension (after the
        // permutation, an access contiguous in the loop as declared would not be).
        if w.accesses.iter().filter(|b| b.tensor == a.tensor).any(|b| {
            b.index.len() != a.index.len()
                || b.index.iter().enumerate().any(|(k, x)| (k == at[0]) != x.mentions(&lane.iter))
        }) {
            return None;
        }
        let order: Vec<usize> = (1..=a.index.len()).filter(|&k| k != at[0] + 1).chain([at[0] + 1]).collect();
        match layouts.iter().find(|(n, _)| *n == a.tensor) {
            Some((_, o)) if *o != order => return None,
            Some(_) => {}
            None => layouts.push((a.tensor.clone(), order)),
        }
    }
    Some(layouts)
}

/// `n` and the noun, plural but for one.
fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}

/// A block of lanes without rows ([`lane_plan`]).
struct LaneBlock {
    target: Name,
    lane_level: usize,
    lane_iter: Name,
    lane_extent: i64,
    /// The loops after the lanes (reductions the block stays in registers across).
    reductions: Vec<String>,
    /// The result's element type (the lanes a vector holds).
    dtype: crate::ir::DType,
}

/// A register block of lanes alone, where the result has no second data-parallel loop to
/// take rows from (`Y[i] += X[i+k] * F[k]`): the lane loop contiguous in the result and in
/// every operand that varies along it, every loop after it a reduction of the result. Without
/// it the reduction stays innermost, and gcc, which vectorizes the sequential program along
/// `i`, does not once the loop is on threads (4.2M x 32 FIR: 62 ms on threads, 23 ms as written,
/// 4.8-5.5 ms as a block of 32 lanes; Intel Xeon AVX-512).
fn lane_plan(w: &Workload, t: &Access, m: &Machine) -> Option<LaneBlock> {
    let lanes = m.lanes(t.dtype).max(1) as i64;
    let lane = w.loops.iter().find(|l| {
        l.kind == Parallelism::Independent
            && t.contiguous_in(&l.iter)
            && l.extent.is_some_and(|e| e >= lanes)
            && w.reads_in_lanes(&l.iter)
    })?;
    let after: Vec<&LoopInfo> = w.loops.iter().filter(|l| l.level > lane.level).collect();
    if after.is_empty()
        || after
            .iter()
            .any(|l| l.kind != Parallelism::Reduction || t.index.iter().any(|x| x.mentions(&l.iter)))
    {
        return None;
    }
    Some(LaneBlock {
        target: t.tensor.clone(),
        lane_level: lane.level,
        lane_iter: lane.iter.clone(),
        lane_extent: lane.extent.unwrap_or(0),
        reductions: after.iter().map(|l| l.iter.to_string()).collect(),
        dtype: t.dtype,
    })
}

/// The lanes' loop strip-mined by `nr` and its block moved innermost, in lanes, the result's
/// vectors kept in registers across the reductions; the outermost loop on threads.
fn lane_block(out: &mut Out, w: &Workload, b: &LaneBlock, m: &Machine) {
    let lanes = m.lanes(b.dtype).max(1);
    let e = b.lane_extent.max(1) as usize;
    // Four vectors first: four independent chains of multiply-adds, each step one broadcast
    // and four loads (32 lanes: 4.8 ms against 7.2 for 16 and 5.3 for 64 on the FIR above).
    let mut nrs: Vec<Choice> = Vec::new();
    for v in [4, 8, 2, 1] {
        let n = v * lanes;
        if n <= e || nrs.is_empty() {
            let n = n.min(e);
            let tail = if e.is_multiple_of(n) {
                plural(e / n, "whole block")
            } else {
                format!("{} and a last one of {}", plural(e / n, "block"), e % n)
            };
            if !nrs.iter().any(|c| c.value == n.to_string()) {
                nrs.push(choice(
                    n,
                    format!("{n} lanes: {} in registers; {tail}", plural(n.div_ceil(lanes), "vector")),
                ));
            }
        }
    }
    out.param("nr", "nr", &format!("iterations of {} in vector lanes", b.lane_iter), nrs);
    let d = w.loops.len();
    let l = b.lane_level;
    out.line(&format!("p = stripmine(p, {l}, nr);"));
    // The block's loop, the reductions, then the lanes innermost.
    let order: Vec<String> = (1..=l).chain(l + 2..=d + 1).chain([l + 1]).map(|k| k.to_string()).collect();
    if l < d {
        out.line(&format!("p = permute(p, [{}]);", order.join(", ")));
    }
    out.line(&format!("p = vectorize(p, {});", d + 1));
    out.line(&format!("p = registers(p, {}, {});", l + 1, rhai_ref(&b.target)));
    let first = &w.loops[0];
    if first.kind == Parallelism::Independent {
        let blocks = if l == 1 { format!("the blocks of {}", first.iter) } else { first.iter.to_string() };
        out.param(
            "parallel",
            "parallel",
            "the outer loop on threads",
            vec![choice("\"outer\"", format!("{blocks} on threads")), choice("\"none\"", "one thread")],
        );
        out.line("if parallel == \"outer\" { p = parallelize(p, 1); }");
    }
}

/// The register block of a result `t`: its lanes along the first data-parallel loop that is
/// contiguous in it and in every operand (or in the operand's layout for the kernel), its rows
/// by [`block_rows`].
fn block_plan(w: &Workload, t: &Access) -> Option<Block> {
    // Lanes along a loop contiguous in the result and in every operand that varies along it,
    // or in its layout for the kernel (a strided operand cannot be loaded as a vector:
    // `registers` refuses it): attention's `A[b][h][i][j] = sum_d Q[b][h][i][d] K[b][h][j][d]`
    // with K stored [b][h][d][j], 8-13 ms against 25-80 ms for the block gathered along `i`
    // (Q stored [b][h][d][i], its 64 rows 2 KiB apart), Intel Xeon AVX-512.
    let (lane, layouts) = w.loops.iter().find_map(|l| {
        if l.kind != Parallelism::Independent || !t.contiguous_in(&l.iter) || l.extent.is_none_or(|e| e < 2) {
            return None;
        }
        Some((l, lane_layouts(w, t, l)?))
    })?;
    block_rows(w, t, lane, false, None, layouts)
}

/// Useful lanes per vector operation of a block's first lane choice ([`register_block`]'s
/// `nr`): 7 lanes of 8 are three pieces (4 + 2 + 1), 2.3 a piece; 16 of 32 are two whole ones.
fn lanes_per_op(b: &Block, m: &Machine) -> f64 {
    let nr = first_nr(b.lane_extent.max(1) as usize, m.lanes(b.dtype).max(1), m.registers.max(8));
    nr as f64 / m.pieces(nr, b.dtype).max(1) as f64
}

/// The model's lanes of a block whose lane loop runs `e` iterations: all of them where they are
/// at most four vectors (no loop left, and no last, partial block, which would run without
/// registers: 28-wide rows in blocks of 16 leave one of 12); else, of the one to four vectors
/// that divide the loop (no last block without registers: a 200-wide mttkrp block of 16 lanes
/// was twice as slow as one of 8), the most multiply-adds per load ([`fma_per_load`]: bmm's
/// 72-wide rows as 3 vectors x 8 rows, 24 accumulators, not 1 vector x 8 rows, which loads a
/// broadcast for every multiply-add: 51-53 against 71-74 ms, Intel Xeon AVX-512); two vectors
/// where none divides.
fn first_nr(e: usize, lanes: usize, regs: usize) -> usize {
    if e <= 4 * lanes {
        return e;
    }
    (1..=4usize)
        .filter(|&v| e.is_multiple_of(v * lanes))
        .max_by(|&a, &b| fma_per_load(a, regs).total_cmp(&fma_per_load(b, regs)))
        .map_or(2 * lanes, |v| v * lanes)
}

/// Multiply-adds per load of a block of `v` vectors a row and as many rows (at most 8) as
/// leave a register for the operand's vectors and one for a broadcast: each step of the
/// reduction loads `v` vectors and broadcasts one element a row, for `rows x v` multiply-adds.
fn fma_per_load(v: usize, regs: usize) -> f64 {
    let rows = (regs.saturating_sub(v + 1) / v).clamp(1, 8);
    (rows * v) as f64 / (rows + v) as f64
}

/// A register block whose lanes run along a data-parallel loop the result is not contiguous
/// in (gconv's output channels `o` of `O[n][g][o][h][w]` where the 7-wide `w` fills a vector
/// badly): every operand that varies along it is contiguous in it, or is a tensor the kernel
/// only reads whose one index is that loop, stored with that dimension last (`permute_layout`:
/// the weights `W[g][o][c][kh][kw]` as `[g][c][kh][kw][o]`, converted once at entry, where each
/// element is used at least 16 times). The result's vectors are gathered before the reductions
/// and stored lane by lane after them (TVM's accumulators across a strided axis).
fn gathered_plan(w: &Workload, t: &Access, m: &Machine) -> Option<Block> {
    let lanes = m.lanes(t.dtype).max(1) as i64;
    let mut found: Option<(&LoopInfo, Layouts)> = None;
    for l in &w.loops {
        let dims: Vec<usize> =
            t.index.iter().enumerate().filter(|(_, x)| x.mentions(&l.iter)).map(|(k, _)| k).collect();
        if l.kind != Parallelism::Independent
            || l.extent.is_none_or(|e| e < lanes)
            || t.contiguous_in(&l.iter)
            || dims.len() != 1
            || !t.index[dims[0]].is_affine()
            || t.index[dims[0]].coeff(&l.iter) != 1
        {
            continue;
        }
        let Some(layouts) = lane_layouts(w, t, l) else { continue };
        // A multiple of the lanes first, then the fewest elements to convert, then the longest.
        let converted = |ls: &[(Name, Vec<usize>)]| -> u64 {
            ls.iter()
                .filter_map(|(n, _)| w.reads().find(|a| a.tensor == *n))
                .map(|a| a.dims.iter().map(|&d| d as u64).product::<u64>())
                .sum()
        };
        let key = |x: &LoopInfo, ls: &[(Name, Vec<usize>)]| {
            let e = x.extent.unwrap_or(0);
            (e % lanes == 0, std::cmp::Reverse(converted(ls)), e)
        };
        if found.as_ref().is_none_or(|(f, fl)| key(l, &layouts) > key(f, fl)) {
            found = Some((l, layouts));
        }
    }
    let (lane, layouts) = found?;
    let moved: Vec<String> =
        layouts.iter().map(|(n, o)| format!("{n} stored with {} last ({o:?})", lane.iter)).collect();
    let why = format!(
        "{} ({}) in lanes, {}-apart in {}: each vector gathered before the reductions and stored after{}",
        lane.iter,
        lane.extent.unwrap_or(0),
        t.stride(&lane.iter).unwrap_or(0),
        t.tensor,
        if moved.is_empty() { String::new() } else { format!("; {}", moved.join(", ")) }
    );
    block_rows(w, t, lane, true, Some(Gather { why }), layouts)
}

/// The block with lanes along `lane`: its candidate rows (data-parallel loops of the result,
/// before the lanes unless `any_side`), best first, and the small windows after them.
fn block_rows(
    w: &Workload,
    t: &Access,
    lane: &LoopInfo,
    any_side: bool,
    gather: Option<Gather>,
    layouts: Layouts,
) -> Option<Block> {
    let mut rows = Vec::new();
    for l in &w.loops {
        if (l.level >= lane.level && !any_side)
            || l.level == lane.level
            || l.kind != Parallelism::Independent
            || !t.index.iter().any(|x| x.mentions(&l.iter))
            || l.extent.is_none_or(|e| e < 2)
        {
            continue;
        }
        // The block stays in registers across every loop after its rows' and lanes' blocks:
        // none of them may index the result (rows `h` before a convolution's `w`, with lanes
        // along its channels, would keep a row of `w` in registers across `w`).
        let last = l.level.max(lane.level);
        if w.loops.iter().any(|x| x.level > last && t.index.iter().any(|e| e.mentions(&x.iter))) {
            continue;
        }
        // Per row of the block: operands loaded as vectors (they depend on the row and on the
        // lanes), broadcast (the row only) or shared by every row (not the row).
        let reads: Vec<&Access> = w.reads().filter(|a| a.tensor != t.tensor).collect();
        let vectors =
            reads.iter().filter(|a| a.stride(&l.iter) != Some(0) && a.stride(&lane.iter) != Some(0)).count();
        let shared = reads.iter().filter(|a| a.stride(&l.iter) == Some(0)).count();
        let mut why = Vec::new();
        for a in &reads {
            let r = a.stride(&l.iter) == Some(0);
            let v = a.stride(&lane.iter) != Some(0);
            why.push(match (r, v) {
                (true, _) => format!("{} shared by every row", a.tensor),
                (false, false) => format!("{} one broadcast a row", a.tensor),
                (false, true) => format!("{} one vector load a row", a.tensor),
            });
        }
        // Gathered lanes: rows that read neighbouring elements of the broadcast operands first
        // (gconv's `w`: I[..][w+kw] one cache line for the whole block).
        let near: i64 = if gather.is_some() {
            reads
                .iter()
                .map(|a| a.stride(&l.iter).map_or(1 << 20, |s| s.abs().min(1 << 20)))
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        rows.push((
            vectors,
            std::cmp::Reverse(shared),
            near,
            l.level,
            l.iter.clone(),
            l.extent.unwrap_or(0),
            why.join(", "),
        ));
    }
    if rows.is_empty() {
        return None;
    }
    rows.sort_by_key(|r| (r.0, r.1, r.2, std::cmp::Reverse(r.5)));
    rows.truncate(3);
    let after = rows.iter().map(|r| r.3).max().unwrap_or(0).max(lane.level);
    let mut windows = Vec::new();
    for l in w.loops.iter().rev() {
        if l.level <= after || l.extent.is_none_or(|e| e > 4) {
            break;
        }
        windows.push((l.iter.clone(), l.extent.unwrap_or(0)));
    }
    Some(Block {
        target: t.tensor.clone(),
        lane_level: lane.level,
        lane_iter: lane.iter.clone(),
        lane_extent: lane.extent.unwrap_or(0),
        rows: rows.into_iter().map(|r| (r.3, r.4, r.5, r.6)).collect(),
        windows,
        dtype: t.dtype,
        layouts,
        gather,
    })
}

/// The register block's `nr` (lanes: `first_nr` first, then one to four vectors) and `mr` (as
/// many rows as the registers hold accumulators for); the model's rows.
fn block_sizes(out: &mut Out, b: &Block, m: &Machine) -> usize {
    let lanes = m.lanes(b.dtype).max(1);
    let regs = m.registers.max(8);
    let e = b.lane_extent as usize;
    let max_rows = b.rows.first().map_or(8, |r| r.2 as usize);
    let mut nr0 = first_nr(e, lanes, regs);
    // With 16 registers (no AVX-512), every row's accumulators, the shared operand's vectors and
    // a broadcast must fit: where all the rows do not at this width, fewer vectors a row that
    // hold them all come first (gconv at NB=G=CO=CI=32, 7x7: 7 rows x 1 vector 16.2 ms
    // against 7 x 2 vectors 22-30 ms and 6 + 1 rows x 2 vectors 36 ms; Zen 3, AVX2). With 32
    // registers all the rows' accumulators win even where they take every register (below).
    let fits = |v: usize| max_rows * v + v < regs;
    let wider = m.pieces(nr0, b.dtype).max(1);
    let narrower = (regs < 32 && max_rows <= 8 && !fits(wider))
        .then(|| (1..wider).rev().find(|&v| fits(v) && e.is_multiple_of(v * lanes)))
        .flatten();
    let narrowed = narrower.is_some();
    if let Some(v) = narrower {
        nr0 = v * lanes;
    }
    let mut nrs: Vec<Choice> = Vec::new();
    let whole = choice(
        e,
        format!(
            "all {e} iterations of {} in lanes ({} vectors of up to {lanes} lanes): no loop left",
            b.lane_iter,
            m.pieces(e, b.dtype)
        ),
    );
    if nr0 == e {
        nrs.push(whole.clone());
    }
    let mut ns = vec![nr0];
    ns.extend([2 * lanes, lanes, 3 * lanes, 4 * lanes].into_iter().filter(|&n| n != nr0));
    for n in ns {
        if n < e {
            let tail = if e.is_multiple_of(n) {
                plural(e / n, "whole block")
            } else {
                format!("{} and a last one of {} without registers", plural(e / n, "block"), e % n)
            };
            let v = n / lanes;
            let fit = if narrowed && n == nr0 {
                format!(
                    "; {max_rows} rows of {} each, the operand's {} and a broadcast fit {regs} registers",
                    plural(v, "accumulator"),
                    plural(v, "vector")
                )
            } else {
                String::new()
            };
            nrs.push(choice(n, format!("{n} lanes ({}) a row: {tail}{fit}", plural(v, "vector"))));
        }
    }
    if narrowed && e <= 4 * lanes {
        // The width first_nr chose, second.
        nrs.insert(1, whole);
    }
    out.param("nr", "nr", &format!("iterations of {} in vector lanes", b.lane_iter), nrs.clone());
    let pieces = m.pieces(nr0, b.dtype).max(1);
    let top = ((regs - pieces - 1) / pieces).clamp(1, 8);
    // All the rows where their accumulators fit the registers: a last, partial block of rows
    // would run without registers (8 rows as 6 + 2 leaves a quarter of the work there), which
    // costs more than the operand or the one accumulator the compiler then keeps in L1 (gconv,
    // 8 rows x 4 vectors against 6: 6.1-6.4 ms against 8.8-9.9 ms, Zen 4).
    let all = (regs / pieces).clamp(1, 8);
    let mut mrs = vec![if max_rows <= all { max_rows } else { top.min(max_rows) }];
    for r in [4, 8, 2, 6] {
        if r <= max_rows {
            mrs.push(r);
        }
    }
    out.param(
        "mr",
        "mr",
        "rows of the block",
        mrs.iter()
            .map(|&r| {
                choice(
                    r,
                    format!(
                        "{r} rows x {} = {} accumulators of {regs} registers",
                        plural(pieces, "vector"),
                        r * pieces
                    ),
                )
            })
            .collect(),
    );
    mrs[0]
}

fn register_block(out: &mut Out, w: &Workload, b: &Block, m: &Machine) {
    let rows: Vec<Choice> =
        b.rows.iter().map(|(lv, it, e, why)| choice(lv, format!("{it} ({e}): {why}"))).collect();
    out.param("rows", "rows", "the loop unrolled and jammed into the block's rows", rows);
    let mr = block_sizes(out, b, m);
    for (tensor, order) in &b.layouts {
        let order: Vec<String> = order.iter().map(|k| k.to_string()).collect();
        out.line(&format!("p = permute_layout(p, \"{tensor}\", [{}]);", order.join(", ")));
    }
    out.line(&format!("p = register_block(p, {}, rows, {}, mr, nr);", rhai_ref(&b.target), b.lane_level));
    // Small windows right above the block: unrolled, innermost first.
    if !b.windows.is_empty() {
        let names: Vec<String> = b.windows.iter().map(|(n, e)| format!("{n} ({e})")).collect();
        let size: i64 = b.windows.iter().map(|(_, e)| e).product();
        let mut us = vec![choice(
            0,
            format!(
                "the window {} kept as loops (the C compiler unrolls short constant loops itself; the path stays short)",
                names.join(" x ")
            ),
        )];
        if size <= 16 {
            us.push(choice(
                b.windows.len(),
                format!(
                    "the window {} unrolled: {size} copies of the block's multiply-adds, no loop",
                    names.join(" x ")
                ),
            ));
        }
        if b.windows.len() > 1 {
            us.push(choice(1, format!("{} unrolled", names[0])));
        }
        out.param("unroll", "unroll", "small reduction loops above the block, unrolled", us);
        out.line(&format!("let d = {};", w.loops.len()));
        out.line("for k in 0..unroll { p = unroll(p, d - k); }");
    }
    parallel_outer(out, w, b, mr, m);
}

/// Threads for the register block's outer loops: the outermost, or it and the next collapsed.
/// `mr`: the model's rows of the block.
fn parallel_outer(out: &mut Out, w: &Workload, b: &Block, mr: usize, m: &Machine) {
    // After register_block the outer loops keep their order (the rows' and lanes' blocks in
    // the place of the rows and the lanes): level 1 is the first loop, or its blocks.
    let Some(first) = w.loops.first() else { return };
    let second = w.loops.get(1);
    let e1 = first.extent.unwrap_or(1);
    let cores = m.cores.max(1) as i64;
    let dp = |l: &LoopInfo| l.kind == Parallelism::Independent;
    let mut ch = Vec::new();
    let collapse_ok = dp(first) && second.is_some_and(|s| dp(s) && s.level != b.lane_level);
    // The model's rows' blocks as the second loop, with a last, partial block: collapsed, that
    // loop cannot be split where the partial block starts, and its guards keep every block
    // out of registers (a convolution's 64 output channels in blocks of 6 behind its batch:
    // 17-23 ms collapsed, 3.9 ms with the batch alone on threads; Intel Xeon AVX-512).
    let partial = b.rows.first().is_some_and(|(level, _, e, _)| {
        second.is_some_and(|s| s.level == *level) && mr > 0 && *e % mr as i64 != 0
    });
    let one =
        choice("\"outer\"", format!("{} ({e1}) on threads: {} iterations a core", first.iter, e1 / cores));
    let two = second.map(|s| {
        choice(
            "\"collapse\"",
            format!(
                "{} and {} collapsed ({} iterations) on threads: balanced over {cores} cores",
                first.iter,
                s.iter,
                e1 * s.extent.unwrap_or(1)
            ),
        )
    });
    // A first loop with fewer iterations than cores (a convolution's batch of 1) leaves cores
    // idle on its own: the second loop on threads instead, which a partial block does not
    // stop (it is split where that block starts, as an unmarked loop is).
    let alone = second.filter(|_| collapse_ok && e1 < cores).map(|s| {
        choice(
            "\"second\"",
            format!(
                "{} ({}) on threads: {} has {e1} iteration{}, fewer than the {cores} cores",
                s.iter,
                s.extent.unwrap_or(1),
                first.iter,
                if e1 == 1 { "" } else { "s" }
            ),
        )
    });
    if collapse_ok && partial && e1 < cores {
        ch.extend(alone.clone());
        ch.extend(two.clone());
        ch.push(one.clone());
    } else if collapse_ok && !partial && (e1 < 8 * cores || e1 % cores != 0) {
        ch.extend(two.clone());
        ch.extend(alone.clone());
        ch.push(one.clone());
    } else {
        ch.push(one.clone());
        if collapse_ok {
            ch.extend(two);
        }
    }
    ch.push(choice("\"none\"", "one thread"));
    out.param("parallel", "parallel", "the outer loops on threads", ch);
    out.line("if parallel == \"outer\" { p = parallelize(p, 1); }");
    out.line("if parallel == \"collapse\" { p = collapse(p, 1, 2); }");
    if alone.is_some() {
        out.line("if parallel == \"second\" { p = parallelize(p, 2); }");
    }
}

/// The loops sketch of a perfect nest.
/// The level innermost after `order` permutes the outer `order.len()` of `d` loops.
fn innermost_after(d: usize, order: &[usize]) -> usize {
    if d > order.len() { d } else { order[order.len() - 1] }
}

/// The score of a loop order: the strides of the accesses along the loop it leaves innermost
/// (0 unchanged, 1 contiguous, 16 any other; the result's counted twice). Lower is better.
fn order_cost(w: &Workload, order: &[usize]) -> i64 {
    let l = &w.loops[innermost_after(w.loops.len(), order) - 1];
    w.accesses
        .iter()
        .map(|a| {
            let s = a.stride(&l.iter).map_or(1 << 20, |s| s.abs().min(1 << 20));
            let s = if s == 0 {
                0
            } else if s == 1 {
                1
            } else {
                16
            };
            if a.write { 2 * s } else { s }
        })
        .sum()
}

/// A better order of a nest's outer loops than the written one (levels, as `permute` takes
/// them), and the loop it puts innermost.
#[derive(Clone, Debug)]
struct Reorder {
    order: Vec<usize>,
    inner: Name,
}

impl Reorder {
    /// Whether the order brings a loop from below level `r` into the first `r` levels (what
    /// fusing the nest at level `r` forbids).
    fn crosses(&self, r: usize) -> bool {
        let mut first: Vec<usize> = self.order.iter().take(r).copied().collect();
        first.sort_unstable();
        first.iter().enumerate().any(|(k, &l)| l != k + 1)
    }
}

/// Where another order of a perfect nest's loops scores better than the written one and is
/// legal (isl): that order.
fn wants_reorder(state: &State, nest: &Nest, w: &Workload) -> Option<Reorder> {
    let d = w.loops.len();
    if d < 2 || !w.perfect {
        return None;
    }
    let k = d.min(crate::ops::explore::MAX_PERMUTED);
    let written: Vec<usize> = (1..=k).collect();
    let best = all_orders(k).into_iter().min_by_key(|o| order_cost(w, o))?;
    if order_cost(w, &best) >= order_cost(w, &written) {
        return None;
    }
    let moved = crate::ops::explore::permute(&nest.view(), &best).map(|n| nest.splice(n))?;
    crate::analysis::legality::decide_at_sizes(state, &moved).ok()?.ok()?;
    let inner = w.loops[innermost_after(d, &best) - 1].iter.clone();
    Some(Reorder { order: best, inner })
}

fn loops(out: &mut Out, w: &Workload, m: &Machine) {
    let d = w.loops.len();
    let k = d.min(crate::ops::explore::MAX_PERMUTED);
    // Every order of the outer k loops, ranked by the strides along the innermost loop; the
    // legality of the one a candidate takes is checked by `permute` (isl) when it is evaluated.
    let mut orders = all_orders(k);
    let innermost = |order: &[usize]| -> usize { innermost_after(d, order) };
    let cost = |order: &[usize]| -> i64 { order_cost(w, order) };
    orders.sort_by_key(|o| cost(o));
    orders.truncate(6);
    if orders.is_empty() {
        orders.push((1..=k).collect());
    }
    let choices = orders
        .iter()
        .map(|o| {
            let names: Vec<String> = o.iter().map(|&lv| w.loops[lv - 1].iter.to_string()).collect();
            let inner = &w.loops[innermost(o) - 1].iter;
            choice(
                format!("{o:?}"),
                format!("{} ({inner} innermost: stride score {})", names.join(" "), cost(o)),
            )
        })
        .collect();
    out.param("order", "order", "an order of the outer loops (permute refuses an illegal one)", choices);
    out.line("p = permute(p, order);");
    let big = w.loops.iter().rev().take(2).all(|l| l.extent.is_some_and(|e| e >= 128)) && d >= 2;
    if big {
        let bytes: u64 = w.accesses.iter().map(|a| a.bytes()).sum();
        let mut ts = vec![choice(0, "no tiles"), choice(32, "32 x 32 tiles"), choice(64, "64 x 64 tiles")];
        if bytes > m.caches[1] && reuse_beyond(w, m.caches[1] / 2) {
            ts.swap(0, 1);
            ts[0].reason = format!(
                "32 x 32 tiles: the tensors ({} KiB) exceed the L2 ({} KiB)",
                bytes >> 10,
                m.caches[1] >> 10
            );
        }
        out.param("tile", "tile", "square tiles of the path", ts);
        out.line("if tile > 0 { p = tile(p, tile); }");
    }
    out.param(
        "parallel",
        "parallel",
        "the outermost loop that runs in parallel, on threads",
        vec![choice("true", "the outermost parallel loop on threads (isl)"), choice("false", "one thread")],
    );
    out.line("let par = parallel_levels(p);");
    // Where the order leaves only the innermost loop parallel (a sum over the outer loops into
    // a row: gramschmidt's `R[k][j] += Q[i][k] * A[i][j]` as `i j`), a team of threads per
    // outer iteration costs more than the work: that loop's strips go outermost, on threads.
    let lanes = m.lanes(w.dtype());
    let strip = 8 * lanes;
    if d >= 2 {
        out.param(
            "strip",
            "strip",
            "where only the innermost loop runs in parallel: its strips outermost, on threads",
            vec![
                choice(
                    strip,
                    format!(
                        "strips of {strip} (8 vectors) outermost, on threads, the rest of the loop in lanes"
                    ),
                ),
                choice(0, "the innermost loop itself on threads"),
            ],
        );
        out.line("if parallel && strip > 0 && par.len() > 0 && par[0] == depth(p) && depth(p) > 1 {");
        out.line("    let d = depth(p);");
        out.line("    p = stripmine(p, d, strip);");
        out.line("    for r in 0..d - 1 { p = interchange(p, d - 1 - r, d - r); }");
        out.line("    p = parallelize(p, 1);");
        out.line("} else if parallel && par.len() > 0 { p = parallelize(p, par[0]); }");
    } else {
        out.line("if parallel && par.len() > 0 { p = parallelize(p, par[0]); }");
    }
    out.param(
        "vectorize",
        "vectorize",
        "the innermost loop in lanes",
        vec![
            choice(
                "true",
                "the innermost loop in lanes where it is data-parallel or a reduction into one element (a vector of partial sums)",
            ),
            choice("false", "no vectors"),
        ],
    );
    // A reduction into one element in lanes: the compiler may not reorder a floating-point sum
    // on its own (no -ffast-math), so a dot product over `k` innermost (syrk's `C[i][j] +=
    // A[i][k] * A[j][k]` as `i j k`) stays scalar unless marked; only a sum worth it
    // ([`long_sum`]).
    let long: Vec<String> = w
        .loops
        .iter()
        .filter(|l| l.kind != Parallelism::Independent && long_sum(l.mean_extent, lanes))
        .map(|l| format!("\"{}\"", l.iter))
        .collect();
    out.line(&format!("let long_sums = [{}];", long.join(", ")));
    out.line("let inner = depth(p);");
    out.line("if vectorize && (data_parallel_levels(p).contains(inner) || (parallel_levels(p).contains(inner) && long_sums.contains(iterators(p)[inner - 1]))) { p = vectorize(p, inner); }");
    // Streaming stores: a result written once (no reduction, not added onto: a rank update's
    // `C[i][j] += a[i] * b[j]` reads C's lines anyway), larger than the caches.
    let set_once = w.loops.iter().all(|l| l.kind == Parallelism::Independent);
    if let Some(t) = w.writes().next().filter(|t| set_once && !w.updated.contains(&t.tensor)) {
        let big = t.bytes() > m.caches[2] / 2;
        let mut ss = vec![
            choice("false", "ordinary stores"),
            choice("true", format!("{}'s whole vectors stored around the caches", t.tensor)),
        ];
        if big {
            ss.swap(0, 1);
            ss[0].reason = format!(
                "{} ({} MiB) is written once and exceeds half the L3: streaming stores",
                t.tensor,
                t.bytes() >> 20
            );
        }
        out.param("stream", "stream", "non-temporal stores of the result", ss);
        out.line(&format!(
            "if stream && vectorize && data_parallel_levels(p).contains(depth(p)) {{ p = stream(p, depth(p), {}); }}",
            rhai_ref(&t.tensor)
        ));
    }
}

/// Every permutation of 1..=k, the identity first (lexicographic).
fn all_orders(k: usize) -> Vec<Vec<usize>> {
    fn go(rest: &mut Vec<usize>, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if rest.is_empty() {
            out.push(cur.clone());
            return;
        }
        for i in 0..rest.len() {
            let x = rest.remove(i);
            cur.push(x);
            go(rest, cur, out);
            cur.pop();
            rest.insert(i, x);
        }
    }
    let mut out = Vec::new();
    go(&mut (1..=k).collect(), &mut Vec::new(), &mut out);
    out
}

/// One value of `several`'s `fuse` parameter: its tag, its lines, whether they ask whether to
/// contract the temporaries, and the fused nest's innermost sums that may go in lanes
/// (address, reason).
struct Arm {
    tag: String,
    lines: Vec<String>,
    contract: bool,
    sums: Vec<(String, String)>,
}

/// Kernels of several nests (or nests with sequences): fusion where legal, then threads and
/// lanes per nest. Returns the output variables.
fn several(out: &mut Out, state: &State, nests: &[(Name, Nest)], m: &Machine) -> Result<Vec<String>, String> {
    let mut vars = Vec::new();
    let alone = nests.len() == 1;
    // Scalars that pin a loop privatized first (scalars.rs): the rules below read the nests
    // as the privatized ones.
    let mut owned: Vec<(Name, Nest)> = Vec::new();
    for (k, (name, nest)) in nests.iter().enumerate() {
        let v = if alone { "p".to_string() } else { format!("p{}", k + 1) };
        out.line(&format!("let {v} = {};", rhai_ref(name)));
        let simple = nest.items.len() == 1 && nest.items[0].as_loop().is_some_and(|l| one_path(l));
        match if simple { None } else { super::scalars::privatized(state, nest) } {
            Some((n, lines)) => {
                out.line(
                    "// a scalar that pins a loop, one copy per iteration (privatize): the loop is free",
                );
                out.line(&format!("let p = {v};"));
                for l in lines {
                    out.line(&l);
                }
                out.line(&format!("{v} = p;"));
                owned.push((name.clone(), n));
            }
            None => owned.push((name.clone(), nest.clone())),
        }
        vars.push(v);
    }
    let nests = owned.as_slice();
    // Each nest's workload, read once (isl's verdicts included): what it writes and reads for
    // storage contraction, and the single-nest rules for `each`.
    let works: Vec<Option<Workload>> =
        if alone { vec![None] } else { nests.iter().map(|(_, n)| Workload::of(state, n).ok()).collect() };
    // Fusion: every nest at the deepest level legal for each consecutive pair (then the
    // temporaries one nest writes and a later one reads stored per iteration of that loop:
    // storage contraction), or the first fusable pair at its deepest level, or none.
    let mut choices = Vec::new();
    let mut arms: Vec<Arm> = Vec::new();
    // The level of the model's first fusion choice.
    let mut fused_at: Option<usize> = None;
    if nests.len() > 1 {
        let mut levels = Vec::new();
        for k in 0..nests.len() - 1 {
            levels.push(crate::ops::explore::fusion_levels(state, &nests[k].1, &nests[k + 1].1)?);
        }
        let common = levels[0].iter().copied().filter(|r| levels.iter().all(|l| l.contains(r))).max();
        // Without a level common to every pair, the longest run of three or more consecutive
        // nests that share one (helm's seven element loops at `e`, after `L`, which has none).
        let run = if common.is_some() { None } else { longest_run(&levels) };
        fused_at =
            common.or(run.map(|(_, _, r)| r)).or_else(|| levels.iter().find_map(|l| l.last().copied()));
        if let Some((s, t, r)) = common.map(|r| (0, nests.len() - 1, r)).or(run) {
            // Tensors written by one nest of the run and read by a later one of it, and by no
            // nest after it: candidates for store_at.
            let names = |w: &Option<Workload>, write: bool| -> Vec<Name> {
                w.iter()
                    .flat_map(|w| w.accesses.iter())
                    .filter(|a| a.write == write)
                    .map(|a| a.tensor.clone())
                    .collect()
            };
            let after: Vec<Name> = works[t + 1..].iter().flat_map(|w| names(w, false)).collect();
            let temps: Vec<Name> = (s..=t)
                .flat_map(|k| {
                    let later: Vec<Name> = works[k + 1..=t].iter().flat_map(|w| names(w, false)).collect();
                    names(&works[k], true).into_iter().filter(move |t| later.contains(t))
                })
                .filter(|x| !after.contains(x))
                .collect();
            // Only the temporaries the script's `store_at` accepts: each on the fused nest with
            // the ones before it, checked as the builtin checks it (a temporary read before the
            // kernel writes it, a row sum accumulated from zero set outside, keeps its tensor).
            let temps = contractible(state, &nests[s..=t], r, temps);
            let chain =
                vars[s + 1..=t].iter().fold(vars[s].clone(), |acc, v| format!("fuse_outer({acc}, {v}, {r})"));
            let mut lines = vec![format!("let f = {chain};")];
            let contracted = !temps.is_empty();
            if contracted {
                for t in &temps {
                    lines.push(format!("if contract {{ f = store_at(f, {r}, {}); }}", rhai_ref(t)));
                }
            }
            // The fused nest's innermost sums into one element (gesummv's two dot products
            // per row, fused at `i`): scalar unless marked (gcc may not reorder a
            // floating-point sum), in lanes where each sums two vectors' terms or more, as the
            // rules of a single nest put them.
            let sums = fused_sums(state, &nests[s..=t], r, lanes_of(state, &nests[s].1, m));
            if !sums.is_empty() {
                lines.push("if sums {".into());
                for (a, _) in &sums {
                    lines.push(format!("    f = focus(f, \"{a}\"); f = vectorize(f, 1); f = focus(f);"));
                }
                lines.push("}".into());
            }
            let whole = s == 0 && t == nests.len() - 1;
            let kept: Vec<String> =
                (0..nests.len()).filter(|&k| k < s || k > t).map(|k| vars[k].clone()).collect();
            let mut parts: Vec<String> = kept[..s].to_vec();
            parts.push("f".into());
            parts.extend(kept[s..].iter().cloned());
            let flags: Vec<&str> = (0..parts.len()).map(|k| if k == s { "true" } else { "false" }).collect();
            lines.push(format!("parts = [{}];", parts.join(", ")));
            lines.push(format!("fused = [{}];", flags.join(", ")));
            let stored = if contracted {
                format!(
                    "; {} stored per iteration (storage contraction)",
                    temps.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
                )
            } else {
                String::new()
            };
            let (tag, why) = if whole {
                (
                    format!("\"all@{r}\""),
                    format!(
                        "every nest fused at level {r} (the deepest legal for each pair): each element used while in cache{stored}"
                    ),
                )
            } else {
                (
                    format!("\"{}-{}@{r}\"", s + 1, t + 1),
                    format!(
                        "{} to {} fused at level {r} (the deepest legal for each pair), the others apart: each element used while in cache{stored}",
                        nests[s].0, nests[t].0
                    ),
                )
            };
            choices.push(choice(&tag, why));
            arms.push(Arm { tag, lines, contract: contracted, sums });
        }
        if let Some((k, &r)) = levels.iter().enumerate().find_map(|(k, l)| l.last().map(|r| (k, r)))
            && (nests.len() > 2 || common != Some(r))
        {
            let (a, b) = (&vars[k], &vars[k + 1]);
            let rest: Vec<String> = vars
                .iter()
                .enumerate()
                .map(|(i, v)| if i == k { format!("fuse_outer({a}, {b}, {r})") } else { v.clone() })
                .enumerate()
                .filter(|(i, _)| *i != k + 1)
                .map(|(_, v)| v)
                .collect();
            let tag = format!("\"{}+{}@{r}\"", k + 1, k + 2);
            choices.push(choice(
                &tag,
                format!(
                    "{} and {} fused at level {r} (their deepest legal), the others apart",
                    nests[k].0,
                    nests[k + 1].0
                ),
            ));
            let flags: Vec<&str> = (0..rest.len()).map(|i| if i == k { "true" } else { "false" }).collect();
            arms.push(Arm {
                tag,
                lines: vec![
                    format!("parts = [{}];", rest.join(", ")),
                    format!("fused = [{}];", flags.join(", ")),
                ],
                contract: false,
                sums: Vec::new(),
            });
        }
        if !choices.is_empty() {
            choices.push(choice("\"none\"", "not fused"));
        }
    }
    // Unfused, each perfect nest of one statement by the rules of a single nest (a matrix
    // product's register tile, a register block, an order): first where one of them is a
    // matrix product with a long reduction (gemm's, 2mm's), whose register tile fusion would
    // forbid.
    let own: Vec<Option<&Workload>> = works
        .iter()
        .map(|w| w.as_ref().filter(|w| w.perfect && w.n_stmts == 1 && !w.loops.is_empty()))
        .collect();
    // A nest with a sequence inside, distributed into perfect nests where that is legal, each
    // then by the rules of a single nest (what Polly and Pluto do with a fused kernel).
    let plans: Vec<Option<Distribution>> = nests
        .iter()
        .zip(&own)
        .map(|((_, n), w)| if w.is_some() { None } else { distribution(state, n) })
        .collect();
    // A nest with sequences that stays whole: its innermost loops in lanes where they can be.
    let lanes: Vec<Lanes> = nests
        .iter()
        .enumerate()
        .map(|(j, (_, n))| {
            let whole =
                own[j].is_none() && plans[j].is_none() && works[j].as_ref().is_none_or(|w| !w.perfect);
            if whole {
                inner_lanes(state, n)
            } else {
                Lanes { inner: Vec::new(), unroll: Vec::new(), threads: Vec::new() }
            }
        })
        .collect();
    // A whole nest whose sum reads down a column (nussinov's split over `k`): its statements
    // sunk into the sum, the loops interchanged, the rest of `j` in lanes (columns.rs).
    let sunk: Vec<Option<super::columns::Sunk>> = nests
        .iter()
        .enumerate()
        .map(|(j, (_, n))| {
            let whole = own[j].is_none() && plans[j].is_none() && lanes[j].inner.is_empty();
            if whole { super::columns::sunk(state, n) } else { None }
        })
        .collect();
    // A nest of independent rows around recurrences (adi's sweeps): blocks of rows, each
    // recurrence with the block's rows in vector lanes (sweep.rs).
    let sweeps: Vec<Option<super::sweep::Sweeps>> = nests
        .iter()
        .enumerate()
        .map(|(j, (_, n))| {
            if own[j].is_some() {
                return None;
            }
            let others: Vec<&Nest> =
                nests.iter().enumerate().filter(|(i, _)| *i != j).map(|(_, x)| &x.1).collect();
            super::sweep::sweeps(state, n, &others, lanes_of(state, n, m))
        })
        .collect();
    // A loop over columns each updating every later column (gramschmidt): left-looking, in
    // blocks of columns (left.rs).
    let lefts: Vec<Option<super::left::Left>> = nests
        .iter()
        .enumerate()
        .map(|(j, (_, n))| {
            if own[j].is_some() || sunk[j].is_some() || sweeps[j].is_some() {
                return None;
            }
            super::left::left(state, n, super::left::BLOCK)
        })
        .collect();
    let products = own
        .iter()
        .flatten()
        .filter(|w| w.writes().next().and_then(|t| matmul_like(w, t)).is_some_and(|t| t.k_extent >= 64))
        .count();
    // A nest with most of the kernel's work whose loops want another order (covariance's sum
    // over the samples, innermost as written, walks a column): fusion keeps the order it was
    // written in, its own rules do not.
    // Each perfect piece of work (a nest, or a part of a distributed one): its name, its
    // statement instances, the loop a better legal order puts innermost where fusion as the
    // model's first choice (or as written, for the parts) would keep the written order.
    let pieces: Vec<(String, f64, Option<Name>)> = (0..nests.len())
        .flat_map(|j| {
            let name = nests[j].0.to_string();
            let mut v = Vec::new();
            if let Some(plan) = &plans[j] {
                v.extend(plan.parts.iter().map(|p| {
                    let inner = p.reorder.as_ref().map(|r| r.inner.clone());
                    (format!("{name} ({})", p.address), p.work.mean_instances(), inner)
                }));
            } else if let Some(w) = &works[j] {
                let better = own[j]
                    .and_then(|w| wants_reorder(state, &nests[j].1, w))
                    .filter(|r| fused_at.is_some_and(|at| r.crosses(at)));
                v.push((name, w.mean_instances(), better.map(|r| r.inner)));
            }
            v
        })
        .collect();
    let total: f64 = pieces.iter().map(|p| p.1).sum();
    let reordered: Vec<String> = pieces
        .iter()
        .filter(|p| p.1 >= 0.25 * total)
        .filter_map(|(name, _, inner)| {
            Some(format!("{name}'s loops reordered, {} innermost", inner.as_ref()?))
        })
        .collect();
    let split: Vec<String> = plans
        .iter()
        .enumerate()
        .filter_map(|(j, p)| {
            p.as_ref().map(|p| format!("{} distributed into {} nests", nests[j].0, p.parts.len()))
        })
        .collect();
    let swept = sweeps.iter().filter(|s| s.is_some()).count();
    if own.iter().any(Option::is_some)
        || !split.is_empty()
        || lanes.iter().any(|l| !l.inner.is_empty() || !l.threads.is_empty())
        || sweeps.iter().any(Option::is_some)
        || sunk.iter().any(Option::is_some)
    {
        let each = choice(
            "\"each\"",
            format!(
                "not fused: each nest by its own rules{}{}",
                split.iter().map(|s| format!("; {s}")).collect::<String>(),
                if products > 0 {
                    format!(
                        " ({products} matrix product{} with a register tile)",
                        if products == 1 { "" } else { "s" }
                    )
                } else if !reordered.is_empty() {
                    format!(" ({}: fusion would keep the written order)", reordered.join("; "))
                } else if swept > 0 {
                    format!(
                        " ({swept} nest{} of recurrences over independent rows, a block of rows in lanes: fused, each core would wait on one row's chain at a time)",
                        if swept == 1 { "" } else { "s" }
                    )
                } else {
                    String::new()
                }
            ),
        );
        // Recurrences are bound by their chains' latency, not by the memory fusion saves
        // (deriche at 4096 x 2160: 77 ms fused, 23-28 ms with its passes' rows in lanes; Zen 5).
        let at = if products > 0 || !reordered.is_empty() || swept > 0 {
            0
        } else {
            choices.len().saturating_sub(1).min(choices.len())
        };
        if choices.is_empty() {
            choices.push(choice("\"none\"", "not fused"));
        }
        choices.insert(at, each);
        arms.insert(at, Arm { tag: "\"each\"".into(), lines: Vec::new(), contract: false, sums: Vec::new() });
    }
    out.line(&format!("let parts = [{}];", vars.join(", ")));
    // A fused part's depth is its shared loops': its inner loops are left to the compiler (but
    // for the sums above, where `sums` marks them); a nest scheduled by its own rules is left
    // as they made it.
    out.line(&format!("let fused = [{}];", vec!["false"; vars.len()].join(", ")));
    out.line(&format!("let ruled = [{}];", vec!["false"; vars.len()].join(", ")));
    // Inner loops of a whole nest put in lanes (the generic lanes then leave it alone).
    out.line(&format!("let laned = [{}];", vec!["false"; vars.len()].join(", ")));
    if !choices.is_empty() {
        out.param("fuse", "fuse", "which nests are fused, at which level", choices);
        for (k, Arm { tag, lines, contract, sums }) in arms.iter().enumerate() {
            out.line(&format!("{}if fuse == {tag} {{", if k == 0 { "" } else { "} else " }));
            out.indent += 1;
            if tag == "\"each\"" {
                for (j, sk) in sunk.iter().enumerate() {
                    let Some(sk) = sk else { continue };
                    sink_rules(out, sk, &vars[j], j, alone);
                }
                for (j, sw) in sweeps.iter().enumerate() {
                    let Some(sw) = sw else { continue };
                    sweep_rules(out, sw, &vars[j], j, alone);
                }
                for (j, lf) in lefts.iter().enumerate() {
                    let Some(lf) = lf else { continue };
                    left_rules(out, lf, &vars[j], j, alone);
                }
                for (j, Lanes { inner, unroll, threads }) in lanes.iter().enumerate() {
                    if inner.is_empty() && threads.is_empty() {
                        continue;
                    }
                    out.line(&format!("// nest {}: sequences inside, kept whole", j + 1));
                    out.prefix = if alone { String::new() } else { format!("n{}_", j + 1) };
                    let names: Vec<String> = inner.iter().map(|(a, why, _)| format!("{a} ({why})")).collect();
                    if inner.is_empty() {
                        out.line("let lanes = true;");
                    } else {
                        out.param(
                            "lanes",
                            "lanes",
                            "the innermost loops in vector lanes",
                            vec![
                                choice("true", format!("in lanes: {}", names.join(", "))),
                                choice("false", "no vectors"),
                            ],
                        );
                    }
                    if !threads.is_empty() {
                        out.param(
                            "threads",
                            "threads",
                            "the outermost data-parallel loops of a nest with sequences, on threads",
                            vec![
                                choice(
                                    "true",
                                    format!(
                                        "{} on threads: the outermost data-parallel loops (isl) of the nest's sequences (at the top, or inside loops that carry dependences)",
                                        threads.join(", ")
                                    ),
                                ),
                                choice("false", "one thread"),
                            ],
                        );
                    }
                    if !unroll.is_empty() {
                        out.param(
                            "unroll",
                            "unroll",
                            "the loops around a laned loop and a statement beside it that carry a dependence, unrolled",
                            vec![
                                choice(
                                    2,
                                    format!(
                                        "{} by 2: its iterations run in order, two at a time the compiler overlaps their independent work",
                                        unroll.join(", ")
                                    ),
                                ),
                                choice(0, "not unrolled"),
                            ],
                        );
                    }
                    out.prefix.clear();
                    if sweeps[j].is_some() || lefts[j].is_some() {
                        out.line(&format!("if lanes && !ruled[{j}] {{"));
                    } else {
                        out.line("if lanes {");
                    }
                    out.line(&format!("    let p = {};", vars[j]));
                    for (a, _, _) in inner {
                        out.line(&format!("    p = focus(p, \"{a}\"); p = vectorize(p, 1); p = focus(p);"));
                    }
                    if !threads.is_empty() {
                        out.line("    if threads {");
                        for a in threads {
                            out.line(&format!(
                                "        p = focus(p, \"{a}\"); p = parallelize(p, 1); p = focus(p);"
                            ));
                        }
                        out.line(&format!("        ruled[{j}] = true;"));
                        out.line("    }");
                    }
                    // The last loop first: unrolling it leaves the earlier ones' addresses.
                    for a in unroll.iter().rev() {
                        out.line(&format!(
                            "    if unroll > 0 {{ p = focus(p, \"{a}\"); p = stripmine(p, 1, unroll); p = unroll(p, 2); p = focus(p); }}"
                        ));
                    }
                    out.line(&format!("    parts[{j}] = p;"));
                    out.line(&format!("    laned[{j}] = true;"));
                    out.line("}");
                }
                for (j, plan) in plans.iter().enumerate() {
                    let Some(plan) = plan else { continue };
                    let guarded = sweeps[j].is_some() || lefts[j].is_some();
                    if guarded {
                        out.line(&format!("if !ruled[{j}] {{"));
                        out.indent += 1;
                    }
                    out.line(&format!(
                        "// nest {}: distributed into {} perfect nests, each by its own rules",
                        j + 1,
                        plan.parts.len()
                    ));
                    out.line(&format!("let p = {};", vars[j]));
                    for a in &plan.addresses {
                        out.line(&format!("p = focus(p, \"{a}\"); p = distribute(p, 1); p = focus(p);"));
                    }
                    // The last part first: transforming it leaves the earlier ones' addresses.
                    for (i, Part { address, work: w, .. }) in plan.parts.iter().enumerate().rev() {
                        out.line(&format!("// part {}: {}", i + 1, w.statements.join("; ")));
                        out.line(&format!("p = focus(p, \"{address}\");"));
                        out.prefix =
                            if alone { format!("d{}_", i + 1) } else { format!("n{}d{}_", j + 1, i + 1) };
                        single(out, w, m);
                        out.prefix.clear();
                    }
                    out.line("p = focus(p);");
                    out.line(&format!("parts[{j}] = p;"));
                    out.line(&format!("ruled[{j}] = true;"));
                    if guarded {
                        out.indent -= 1;
                        out.line("}");
                    }
                }
                for (j, w) in own.iter().enumerate() {
                    let Some(w) = w else { continue };
                    out.line(&format!("// nest {}: {}", j + 1, w.statements.join("; ")));
                    out.line(&format!("let p = {};", vars[j]));
                    out.prefix = format!("n{}_", j + 1);
                    single(out, w, m);
                    out.prefix.clear();
                    out.line(&format!("parts[{j}] = p;"));
                    out.line(&format!("ruled[{j}] = true;"));
                }
            }
            if *contract {
                out.param(
                    "contract",
                    "contract",
                    "the temporaries of the fused nests stored per iteration of the fused loop",
                    vec![
                        choice("true", "a block per iteration, in cache, instead of the whole tensor"),
                        choice("false", "the whole tensors"),
                    ],
                );
            }
            if !sums.is_empty() {
                let names: Vec<String> = sums.iter().map(|(a, why)| format!("{a} ({why})")).collect();
                out.param(
                    "sums",
                    "sums",
                    "the fused nest's innermost sums into one element in vector lanes",
                    vec![
                        choice("true", format!("in lanes (vectors of partial sums): {}", names.join(", "))),
                        choice("false", "left to the compiler (scalar)"),
                    ],
                );
            }
            for l in lines {
                out.line(l);
            }
            out.indent -= 1;
        }
        out.line("}");
    }
    out.param(
        "parallel",
        "parallel",
        "each nest's outermost parallel loop on threads",
        vec![
            choice("true", "each nest's outermost parallel loop (isl) on threads"),
            choice("false", "one thread"),
        ],
    );
    out.param(
        "vectorize",
        "vectorize",
        "each nest's innermost loop in lanes",
        vec![
            choice("true", "the innermost loop in lanes where it is data-parallel"),
            choice("false", "no vectors"),
        ],
    );
    out.line("for k in 0..parts.len() {");
    out.line("    let q = parts[k];");
    out.line("    let par = parallel_levels(q);");
    out.line("    if parallel && !ruled[k] && par.len() > 0 { q = parallelize(q, par[0]); }");
    out.line("    if vectorize && !fused[k] && !ruled[k] && !laned[k] && depth(q) > 0 && data_parallel_levels(q).contains(depth(q)) { q = vectorize(q, depth(q)); }");
    out.line("    parts[k] = q;");
    out.line("}");
    if alone {
        out.line("p = parts[0];");
        Ok(vec!["p".to_string()])
    } else {
        Ok(vec!["parts".to_string()])
    }
}

/// Doubles (or floats) in one of the machine's vectors, for `nest`'s arithmetic.
fn lanes_of(state: &State, nest: &Nest, m: &Machine) -> usize {
    m.lanes(Workload::shape(state, nest).map(|w| w.dtype()).unwrap_or(crate::ir::DType::Double))
}

/// The rows of line sweeps of nest `j` (variable `var`) in blocks, each recurrence with the
/// block's rows in lanes (sweep.rs); the nest's other rules where `rows` is 0.
fn sweep_rules(out: &mut Out, sw: &super::sweep::Sweeps, var: &str, j: usize, alone: bool) {
    let lanes = sw.lanes;
    let recurrences: Vec<String> =
        sw.rows.iter().flat_map(|r| r.recurrences.iter().map(|(_, it)| it.to_string())).collect();
    let rows: Vec<String> = sw.rows.iter().map(|r| r.iter.to_string()).collect();
    out.line(&format!(
        "// nest {}: independent rows ({}) around recurrences ({})",
        j + 1,
        rows.join(", "),
        recurrences.join(", ")
    ));
    out.prefix = if alone { String::new() } else { format!("n{}_", j + 1) };
    let block = |k: usize, why: &str| {
        choice(k * lanes, format!("blocks of {} rows ({k} vectors) on threads{why}", k * lanes))
    };
    // Transposed, the lanes read and write contiguously: 4 vectors of rows; gathering from as
    // many rows as lanes, 2 (each lane's row is a stream the prefetchers follow).
    let contiguous = !sw.per_block.is_empty() || (sw.repeated && !sw.transpose.is_empty());
    let first = if contiguous { 4 } else { 2 };
    let why = format!(
        ", each loop over {} that carries a dependence interchanged outside the block's rows, which run in lanes: every lane runs its own row's chain, and a block's sweeps stay in cache together{}",
        recurrences.join(", "),
        if contiguous { "" } else { " (2 vectors: each lane's row is a stream for the prefetchers)" }
    );
    let mut choices = vec![block(first, &why)];
    choices.extend([2, 4, 8].into_iter().filter(|&k| k != first).map(|k| block(k, "")));
    choices.push(choice(0, "row by row (the nest's other rules)"));
    out.param(
        "rows",
        "rows",
        "blocks of rows on threads, each recurrence with the block's rows innermost, in vector lanes",
        choices,
    );
    out.line("if rows > 0 {");
    out.indent += 1;
    out.line(&format!("let p = {var};"));
    // Tensors stored per block of rows: asked here, applied in each block loop below.
    let blocked: Vec<&Name> = sw.per_block.iter().map(|(t, _)| t).collect();
    let whole: Vec<String> =
        sw.transpose.iter().filter(|t| !blocked.contains(t)).map(|t| t.to_string()).collect();
    if !sw.transpose.is_empty() {
        let names: Vec<String> = sw.transpose.iter().map(|t| t.to_string()).collect();
        let mut choices = Vec::new();
        if !blocked.is_empty() {
            let b: Vec<String> = blocked.iter().map(|t| t.to_string()).collect();
            choices.push(choice(
                "\"block\"",
                format!(
                    "{} stored per block of rows, transposed (store_at with [2, 1]): every row writes its values before it reads them (isl), so a block's buffer, in cache and contiguous in the lanes, holds them; the whole tensor is never written{}",
                    b.join(", "),
                    if whole.is_empty() { String::new() } else { format!("; {} stored transposed", whole.join(", ")) }
                ),
            ));
        }
        let mut rest = vec![
            choice(
                "\"whole\"",
                format!(
                    "{} stored transposed (permute_layout): the rows in lanes read and write them contiguously, converted once at entry and exit for every sweep around",
                    names.join(", ")
                ),
            ),
            choice("\"none\"", "as declared (the lanes gather and scatter)"),
        ];
        if !sw.repeated {
            rest.swap(0, 1);
            rest[0].reason =
                "as declared: no loop runs around the sweeps, a conversion would cost about what a sweep does".into();
        }
        choices.extend(rest);
        out.param(
            "transpose",
            "transpose",
            "tensors only the rows loops touch, the row in their first index: stored per block of rows or transposed",
            choices,
        );
    }
    // The last rows loop first: transforming it leaves the earlier ones' addresses.
    for (k, r) in sw.rows.iter().enumerate().rev() {
        out.line(&format!(
            "p = focus(p, \"{}\"); p = stripmine(p, 1, rows); p = distribute(p, 2); p = parallelize(p, 1);",
            r.address
        ));
        for (t, touching) in &sw.per_block {
            if touching.contains(&k) {
                out.line(&format!("if transpose == \"block\" {{ p = store_at(p, 1, \"{t}\", [2, 1]); }}"));
            }
        }
        out.line("p = focus(p);");
        for (a, _) in r.recurrences.iter().rev() {
            out.line(&format!(
                "p = focus(p, \"{a}\"); p = interchange(p, 1, 2); p = vectorize(p, 2); p = focus(p);"
            ));
        }
    }
    for t in &sw.transpose {
        let how = if blocked.contains(&t) { "transpose == \"whole\"" } else { "transpose != \"none\"" };
        out.line(&format!("if {how} {{ p = permute_layout(p, \"{t}\", [2, 1]); }}"));
    }
    out.prefix.clear();
    out.line(&format!("parts[{j}] = p;"));
    out.line(&format!("ruled[{j}] = true;"));
    out.indent -= 1;
    out.line("}");
}

/// Nest `j`'s sum down a column turned into row updates in lanes (columns.rs).
/// Nest `j`'s column steps left-looking, in blocks of columns (left.rs); the nest's other
/// rules where `left` is 0.
fn left_rules(out: &mut Out, lf: &super::left::Left, var: &str, j: usize, alone: bool) {
    let into = &lf.into;
    out.line(&format!(
        "// nest {}: {} over columns, each updating every later column {into} (right-looking)",
        j + 1,
        lf.address
    ));
    out.prefix = if alone { String::new() } else { format!("n{}_", j + 1) };
    let stored = if lf.layouts.is_empty() {
        String::new()
    } else {
        format!(
            "; {} stored by columns (permute_layout): the loops down a column read them contiguously",
            lf.layouts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")
        )
    };
    let b = super::left::BLOCK;
    out.param(
        "left",
        "left",
        "the column steps left-looking: blocks of later columns outside the loop over columns",
        vec![
            choice(
                b,
                format!(
                    "blocks of {b} columns outside {}: each block takes every earlier column's update in turn while it is in cache, instead of one pass over all later columns per column (the column's own statements sunk into {into}'s first iteration){stored}; a block's columns after its first on threads, each column's loops in lanes",
                    lf.address
                ),
            ),
            choice(b / 2, format!("blocks of {} columns", b / 2)),
            choice(b * 2, format!("blocks of {} columns", b * 2)),
            choice(0, "right-looking, as written (the nest's other rules)"),
        ],
    );
    out.prefix.clear();
    out.line("if left > 0 {");
    out.indent += 1;
    out.line(&format!("let p = {var};"));
    out.line(&format!("p = focus(p, \"{}\"); p = split(p, 1, {}); p = focus(p);", lf.address, lf.split_k));
    out.line(&format!(
        "p = focus(p, \"{}\"); p = sink(p, 1, \"first\", \"{into}\"); p = stripmine(p, 2, left, \"aligned\"); p = interchange(p, 1, 2); p = focus(p);",
        lf.address
    ));
    for t in &lf.layouts {
        out.line(&format!("p = permute_layout(p, \"{t}\", [2, 1]);"));
    }
    out.line(&format!("p = focus(p, \"{}\"); p = split(p, 3, {}); p = focus(p);", lf.blocks, lf.split_j));
    for a in &lf.lanes {
        out.line(&format!("p = focus(p, \"{a}\"); p = vectorize(p, 1); p = focus(p);"));
    }
    out.line(&format!("p = focus(p, \"{}\"); p = parallelize(p, 1); p = focus(p);", lf.rest));
    out.line(&format!("parts[{j}] = p;"));
    out.line(&format!("ruled[{j}] = true;"));
    out.line(&format!("laned[{j}] = true;"));
    out.indent -= 1;
    out.line("}");
}

fn sink_rules(out: &mut Out, sk: &super::columns::Sunk, var: &str, j: usize, alone: bool) {
    out.line(&format!("// nest {}: a sum down a column ({}) inside {}", j + 1, sk.column, sk.address));
    out.prefix = if alone { String::new() } else { format!("n{}_", j + 1) };
    out.param(
        "sink",
        "sink",
        "the statements beside a sum down a column sunk into it, its loops interchanged, the rows in lanes",
        vec![
            choice(
                "true",
                format!(
                    "{}'s statements sunk into the sum at its last iteration, then {} outside: {} is read along rows, the rest of the loop in lanes",
                    sk.address, sk.outer, sk.column
                ),
            ),
            choice("false", "as written (the sum walks a column)"),
        ],
    );
    out.prefix.clear();
    out.line("if sink {");
    out.indent += 1;
    out.line(&format!("let p = {var};"));
    out.line(&format!(
        "p = focus(p, \"{}\"); p = sink(p, 1, \"last\"); p = interchange(p, 1, 2); p = focus(p);",
        sk.address
    ));
    out.line(&format!("p = focus(p, \"{}\"); p = split(p, 2, {}); p = focus(p);", sk.outer, sk.split));
    out.line(&format!("p = focus(p, \"{}\"); p = vectorize(p, 1); p = focus(p);", sk.lanes));
    out.line(&format!("parts[{j}] = p;"));
    out.line(&format!("laned[{j}] = true;"));
    out.indent -= 1;
    out.line("}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(rows: i64, lanes: i64) -> Block {
        Block {
            target: "O".into(),
            lane_level: 5,
            lane_iter: "w".into(),
            lane_extent: lanes,
            rows: vec![(3, "o".into(), rows, String::new())],
            windows: Vec::new(),
            dtype: crate::ir::DType::Double,
            layouts: Vec::new(),
            gather: None,
        }
    }

    fn first_mr(rows: i64, lanes: i64, m: &Machine) -> usize {
        let mut out = Out::default();
        block_sizes(&mut out, &block(rows, lanes), m)
    }

    #[test]
    fn a_block_takes_every_row_whose_accumulators_fit_the_registers() {
        let zen4 = Machine {
            vector_bits: 512,
            registers: 32,
            cores: 2,
            caches: [32 << 10, 1 << 20, 32 << 20],
            ..Machine::default()
        };
        // 28 lanes are 4 vectors: 8 rows are 32 accumulators, every register; 6 + 2 would leave
        // a quarter of the rows without registers.
        assert_eq!(first_mr(8, 28, &zen4), 8);
        // 9 rows do not fit: the most that leave an operand and a broadcast beside them.
        assert_eq!(first_mr(9, 28, &zen4), 6);
        // 16 lanes are 2 vectors: 8 rows fit (16 accumulators).
        assert_eq!(first_mr(8, 16, &zen4), 8);
        let avx2 = Machine { vector_bits: 256, registers: 16, ..zen4 };
        // 16 registers: 8 lanes are 2 vectors of 4, and 8 rows of 2 accumulators leave none for
        // the operand and a broadcast; 12 lanes are 3 vectors: 8 rows at 1 vector a row fit.
        for lanes in [8, 12] {
            let mut out = Out::default();
            assert_eq!(block_sizes(&mut out, &block(8, lanes), &avx2), 8);
            assert!(out.text.contains("let nr = param(\"nr\", [4, "), "{}", out.text);
        }
        // 7 rows of 2 vectors still do not fit (14 + 2 + 1 > 16): one vector a row.
        assert_eq!(first_mr(7, 8, &avx2), 7);
        // 4 rows of 2 vectors fit (8 + 2 + 1): the width stays.
        let mut out = Out::default();
        assert_eq!(block_sizes(&mut out, &block(4, 8), &avx2), 4);
        assert!(out.text.contains("let nr = param(\"nr\", [8, "), "{}", out.text);
    }

    #[test]
    fn a_long_row_takes_the_whole_vectors_that_divide_it_with_the_most_multiply_adds_a_load() {
        // AVX-512 doubles: 8 lanes, 32 registers.
        let (lanes, regs) = (8, 32);
        // bmm's 72-wide rows: 3 vectors (x 8 rows: 24 multiply-adds for 11 loads), not 1 vector
        // (8 for 9); 2 and 4 vectors leave a last block of 8 lanes without registers.
        assert_eq!(first_nr(72, lanes, regs), 24);
        // 64: 4 vectors x 6 rows (24 for 10 loads) ahead of 2 x 8 (16 for 10).
        assert_eq!(first_nr(64, lanes, regs), 32);
        // mttkrp's 200 is 25 vectors: only 1 divides it.
        assert_eq!(first_nr(200, lanes, regs), 8);
        // Up to 4 vectors: all of them, no loop left.
        assert_eq!(first_nr(28, lanes, regs), 28);
        // None divides: two vectors.
        assert_eq!(first_nr(100, lanes, regs), 16);
        // AVX2 doubles: 4 lanes, 16 registers: 3 vectors x 4 rows (12 for 7) beat 2 x 6 (12 for
        // 8) and 4 x 2 (8 for 6).
        assert_eq!(first_nr(72, 4, 16), 12);
        assert_eq!(first_nr(48, 4, 16), 12);
        assert_eq!(first_nr(200, 4, 16), 8);
    }
}
