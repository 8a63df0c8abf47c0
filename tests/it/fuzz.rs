//! Differential fuzzing: random well-typed `.teml` programs, generated as text, checked four
//! ways.
//!
//! 1. Evaluation never panics: every statement either evaluates or fails with a located error
//!    (`--> fuzz.teml:LINE:COL`). Statements that fail are dropped, so the program printed for
//!    a failure is one that evaluates (rerun it with `teml run prog.teml`).
//! 2. For every kernel, the reference interpreter (untransformed nests) agrees with the
//!    expression oracle (`oracle::run`) on the origin statements (`Unsupported` is skipped
//!    and counted).
//! 3. Every kernel is compiled and run through `pipeline::run_request`. It verifies, is refused
//!    with an error (`RunError::Meta`, e.g. an illegal mark), or reports `verified: false`. The
//!    transformed nests are also run in the interpreter from the same initial data: a kernel
//!    that does not verify while the transformed interpretation equals the untransformed one is
//!    a lowering/codegen bug; a verified kernel whose transformed interpretation differs is a
//!    verification bug. Only an illegal reordering (both differ) may give `verified: false`.
//! 4. The legality check (`analysis::decide`, isl) agrees with what the paths compute: every
//!    path it accepts computes what the untransformed statements compute (interpreted), and
//!    every path that changes the result is refused. Programs are generated `unchecked`, so
//!    that refused paths reach the kernels too.
//!
//! Programs are decoded from a vector of choices (proptest shrinks it: fewer and smaller
//! choices give shorter, simpler programs; a choice past the end is 0, the simplest).
//!
//! CI runs a few cases (`cargo test --release --test it fuzz::`). A campaign:
//!
//! ```text
//! TEML_FUZZ_CASES=2000 cargo test --release --test it fuzz:: -- --nocapture
//! ```
//!
//! prints the statistics (programs, paths, kernels compiled, refusals, mismatches, oracle
//! skips) at the end.

use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use teml::interp::{self, Buffers};
use teml::ir::{Dim, Name, State, TExpr, Value};
use teml::oracle::{self, OracleError};
use teml::pipeline::{self, Comparison, RunError, RunOptions};
use teml::script::Stdlib;

const FILE: &str = "fuzz.teml";

// ---------------------------------------------------------------------------------------------
// Statistics

static PROGRAMS: AtomicUsize = AtomicUsize::new(0);
static LINES: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicUsize = AtomicUsize::new(0);
static PATH_STEPS: AtomicUsize = AtomicUsize::new(0);
static FUSIONS: AtomicUsize = AtomicUsize::new(0);
static KERNELS: AtomicUsize = AtomicUsize::new(0);
static COMPILED: AtomicUsize = AtomicUsize::new(0);
static VERIFIED: AtomicUsize = AtomicUsize::new(0);
static REFUSED: AtomicUsize = AtomicUsize::new(0);
static ILLEGAL: AtomicUsize = AtomicUsize::new(0);
static ORACLE_OK: AtomicUsize = AtomicUsize::new(0);
static ORACLE_SKIP: AtomicUsize = AtomicUsize::new(0);
static BUGS: AtomicUsize = AtomicUsize::new(0);
static CHECKED: AtomicUsize = AtomicUsize::new(0);
static ACCEPTED: AtomicUsize = AtomicUsize::new(0);
static REJECTED: AtomicUsize = AtomicUsize::new(0);
static REJECTED_SAME: AtomicUsize = AtomicUsize::new(0);
static CHECK_NANOS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static KNOWN: AtomicUsize = AtomicUsize::new(0);
static LOCAL: AtomicUsize = AtomicUsize::new(0);
static LAID: AtomicUsize = AtomicUsize::new(0);
static IN_PLACE: AtomicUsize = AtomicUsize::new(0);
static STREAMED: AtomicUsize = AtomicUsize::new(0);
static GCC_BUGS: AtomicUsize = AtomicUsize::new(0);
static MATH: AtomicUsize = AtomicUsize::new(0);
static AFFINE: AtomicUsize = AtomicUsize::new(0);
static FULL_BY_ORACLE: AtomicUsize = AtomicUsize::new(0);
static FULL_BY_UNTRANSFORMED: AtomicUsize = AtomicUsize::new(0);
static FULL_REFUSED_PATH: AtomicUsize = AtomicUsize::new(0);
static FULL_REDUCED_MISMATCH: AtomicUsize = AtomicUsize::new(0);
static AUTO: AtomicUsize = AtomicUsize::new(0);
static AUTO_VERIFIED: AtomicUsize = AtomicUsize::new(0);
static AUTO_SKIPPED: AtomicUsize = AtomicUsize::new(0);

/// True if kernel `k`, which did not verify, verifies when the same C is compiled without
/// gcc's loop vectorizer (`-fno-tree-loop-vectorize`) or its SLP vectorizer (`-fno-tree-slp-vectorize`).
fn gcc_vectorizer_at_fault(
    state: &State,
    req: &teml::ir::KernelRequest,
    k: usize,
    opts: &RunOptions,
) -> bool {
    // The loop vectorizer (three reproducers), or the SLP vectorizer (the fourth).
    ["-fno-tree-loop-vectorize", "-fno-tree-slp-vectorize"].iter().any(|flag| {
        let mut safe = opts.clone();
        safe.flags.opt.push(flag.to_string());
        pipeline::run_request(state, req, k, &safe).is_ok_and(|r| r.verified)
    })
}

/// Known bugs, each with its regression test below: a failure whose message contains the
/// signature is counted (and printed with `--nocapture`), not failed, so that CI stays green
/// until the bug is fixed in `src/`. `TEML_FUZZ_STRICT=1` fails on them too.
const KNOWN_BUGS: &[(&str, &str)] = &[];

fn known(msg: &str) -> Option<&'static str> {
    if std::env::var_os("TEML_FUZZ_STRICT").is_some() {
        return None;
    }
    KNOWN_BUGS.iter().find(|(sig, _)| msg.contains(sig)).map(|(_, test)| *test)
}

fn stats() -> String {
    let g = |a: &AtomicUsize| a.load(Relaxed);
    format!(
        "fuzz: {} programs ({} lines kept, {} dropped with a located error), {} transformation steps, \
         {} fusions; {} kernels: {} compiled and run ({} verified, {} mismatches from illegal \
         reorderings, {} with a temporary stored per iteration, {} with a tensor in another layout, {} with a result stored over its operand, {} with streaming stores, {} calling math functions, {} writing affine result positions), {} refused; oracle: {} agreed, {} skipped (unsupported); legality: {} kernels \
         checked ({:.1} ms each), {} accepted, {} refused ({} of them computing the same values at \
         this size); {} known bugs hit; {} kernels miscompiled by gcc's vectorizers (verified without the loop or the SLP vectorizer); full-size binaries of programs too large for the interpreter: {} checked by the oracle, {} by the untransformed program's own build ({} with a reduced size that builds another path), {} mismatching at the reduced size; teml auto: {} programs scheduled ({} auto paths verified), {} skipped (a program teml run refuses); {} failing cases (bugs, shrinking included)",
        g(&PROGRAMS),
        g(&LINES),
        g(&DROPPED),
        g(&PATH_STEPS),
        g(&FUSIONS),
        g(&KERNELS),
        g(&COMPILED),
        g(&VERIFIED),
        g(&ILLEGAL),
        g(&LOCAL),
        g(&LAID),
        g(&IN_PLACE),
        g(&STREAMED),
        g(&MATH),
        g(&AFFINE),
        g(&REFUSED),
        g(&ORACLE_OK),
        g(&ORACLE_SKIP),
        g(&CHECKED),
        CHECK_NANOS.load(Relaxed) as f64 / 1e6 / g(&CHECKED).max(1) as f64,
        g(&ACCEPTED),
        g(&REJECTED),
        g(&REJECTED_SAME),
        g(&KNOWN),
        g(&GCC_BUGS),
        g(&FULL_BY_ORACLE),
        g(&FULL_BY_UNTRANSFORMED),
        g(&FULL_REFUSED_PATH),
        g(&FULL_REDUCED_MISMATCH),
        g(&AUTO),
        g(&AUTO_VERIFIED),
        g(&AUTO_SKIPPED),
        g(&BUGS),
    )
}

// ---------------------------------------------------------------------------------------------
// Choices

struct Choices<'a> {
    ch: &'a [u32],
    pos: usize,
}

impl Choices<'_> {
    /// 0..n; 0 past the end.
    fn pick(&mut self, n: usize) -> usize {
        let v = self.ch.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        v as usize % n.max(1)
    }

    /// True with probability `pct`%; false past the end.
    fn flip(&mut self, pct: usize) -> bool {
        self.pick(100) >= 100 - pct
    }

    fn one<'b, T>(&mut self, xs: &'b [T]) -> &'b T {
        &xs[self.pick(xs.len())]
    }

    fn perm(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for k in (1..n).rev() {
            let j = self.pick(k + 1);
            v.swap(k, j);
        }
        v
    }
}

/// An extent: its text in the program and its value.
#[derive(Clone, Debug)]
struct Ext {
    text: String,
    val: i64,
}

impl Ext {
    fn plus(&self, c: i64) -> Ext {
        if c == 0 {
            return self.clone();
        }
        match self.text.parse::<i64>() {
            Ok(v) => Ext { text: (v + c).to_string(), val: self.val + c },
            Err(_) => Ext { text: format!("{}+{c}", self.text), val: self.val + c },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The program being generated

struct Gen<'a> {
    c: Choices<'a>,
    lines: Vec<String>,
    state: State,
    n: i64,
    fresh: usize,
    /// Real tensors usable as operands (inputs and results), in order of creation.
    pool: Vec<Name>,
    /// A failure of check 1 (a panic, an unlocated error).
    bug: Option<String>,
}

fn stdlib() -> Stdlib {
    Stdlib::get()
}

impl Gen<'_> {
    fn name(&mut self, stem: &str) -> String {
        self.fresh += 1;
        format!("{stem}{}", self.fresh)
    }

    fn text(&self) -> String {
        self.lines.join("\n") + "\n"
    }

    /// Evaluates `line` after the program so far; `None` when it fails (with a located
    /// error) or panics (recorded as a bug).
    fn attempt(&mut self, line: &str) -> Option<State> {
        if self.bug.is_some() {
            return None;
        }
        let st = &self.state;
        let r = catch_unwind(AssertUnwindSafe(|| teml::lang::eval_stmt(line, FILE, st, &stdlib())));
        match r {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                let msg = e.to_string();
                if !msg.contains(&format!("--> {FILE}:1:")) {
                    self.bug = Some(format!(
                        "an error without its location for `{line}`:\n{msg}\nafter:\n{}",
                        self.text()
                    ));
                }
                DROPPED.fetch_add(1, Relaxed);
                None
            }
            Err(p) => {
                let what = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                self.bug = Some(format!("evaluation panicked ({what}) at `{line}` after:\n{}", self.text()));
                None
            }
        }
    }

    fn commit(&mut self, line: String, s: State) {
        self.lines.push(line);
        self.state = s;
        LINES.fetch_add(1, Relaxed);
    }

    /// Evaluates and keeps `line` when it evaluates.
    fn line(&mut self, line: String) -> bool {
        match self.attempt(&line) {
            Some(s) => {
                self.commit(line, s);
                true
            }
            None => false,
        }
    }

    fn ext(&mut self) -> Ext {
        if self.c.flip(20) {
            Ext { text: "N".into(), val: self.n }
        } else {
            let v = 2 + self.c.pick(8) as i64;
            Ext { text: v.to_string(), val: v }
        }
    }

    /// The extents of a tensor (of the target of an assignment).
    fn dims(&self, name: &str) -> Option<Vec<Ext>> {
        let t: &TExpr = match self.state.get(name)? {
            Value::Tensor(t) => t,
            Value::Nest(_) => return None,
        };
        let leaf = t.target().unwrap_or(t);
        leaf.shape
            .dims()?
            .iter()
            .map(|d| match d {
                Dim::Known(e) => {
                    Some(Ext { text: e.to_string(), val: e.eval(&|v| self.state.constant(v)).ok()? })
                }
                Dim::Unknown => None,
            })
            .collect()
    }

    /// A consumer of the last result: it read at its indices, and one dimension shifted, so
    /// that fusing the two nests makes the result a temporary (storage contraction).
    fn consumer(&mut self) -> Option<String> {
        let x = self
            .pool
            .iter()
            .rev()
            .find(|n| {
                self.state.get(n).is_some_and(|v| matches!(v, Value::Tensor(t) if t.target().is_some()))
            })?
            .to_string();
        let dims = self.dims(&x)?;
        let r = dims.len();
        if r == 0 || r > 3 || dims.iter().any(|e| e.val < 2) {
            return None;
        }
        let its: Vec<&str> = ["i", "j", "k"][..r].to_vec();
        let d = self.c.pick(r);
        let shifted: Vec<String> = its
            .iter()
            .enumerate()
            .map(|(k, it)| if k == d && self.c.flip(70) { offset(it, 1) } else { it.to_string() })
            .collect();
        let op = ["add", "mul", "sub"][self.c.pick(3)];
        let name = self.name("Y");
        let line = format!(
            "{name} = {op}({x}, {x}, [[{}], [{}]] -> [{}])",
            its.join(", "),
            shifted.join(", "),
            its.join(", ")
        );
        self.line(line).then_some(name)
    }

    /// A new input tensor of these extents.
    fn input(&mut self, dims: &[Ext]) -> Option<String> {
        let name = self.name("A");
        let list: Vec<&str> = dims.iter().map(|e| e.text.as_str()).collect();
        // Mostly double, some float, and some of the narrow types (docs/types.md): bf16 read
        // into float, i8 and u8 into i32 (their results promoted), through every path.
        let ty = match self.c.pick(100) {
            92.. => "float, ",
            88..=91 => "bf16, ",
            86..=87 => "i8, ",
            84..=85 => "u8, ",
            _ => "",
        };
        self.line(format!("{name} = tensor({ty}[{}])", list.join(", "))).then(|| {
            self.pool.push(name.as_str().into());
            name
        })
    }

    /// An existing tensor of a rank in `ranks`, preferring results.
    fn existing(&mut self, ranks: std::ops::RangeInclusive<usize>) -> Option<(String, Vec<Ext>)> {
        let cands: Vec<(String, Vec<Ext>)> = self
            .pool
            .iter()
            .filter_map(|n| Some((n.to_string(), self.dims(n)?)))
            .filter(|(_, d)| ranks.contains(&d.len()) && d.iter().all(|e| e.val >= 1))
            .collect();
        if cands.is_empty() || !self.c.flip(55) {
            return None;
        }
        // Later tensors (results) first.
        let k = cands.len() - 1 - self.c.pick(cands.len().min(3));
        Some(cands[k].clone())
    }

    /// An operand of rank in `ranks`: existing, or new with random extents.
    fn operand(&mut self, ranks: std::ops::RangeInclusive<usize>) -> Option<(String, Vec<Ext>)> {
        if let Some(x) = self.existing(ranks.clone()) {
            return Some(x);
        }
        let r = ranks.start() + self.c.pick(ranks.end() - ranks.start() + 1);
        let dims: Vec<Ext> = (0..r).map(|_| self.ext()).collect();
        let name = self.input(&dims)?;
        Some((name, dims))
    }

    fn result(&mut self, name: &str) {
        self.pool.push(name.into());
    }

    // -- tensor statements ----------------------------------------------------------------

    /// Element-wise chains with explicit iterators, offsets (stencils), broadcasts,
    /// constants, a permuted target.
    fn elementwise(&mut self) -> Option<String> {
        let r = 1 + self.c.pick(3);
        let its: Vec<&str> = ["i", "j", "k"][..r].to_vec();
        let exts: Vec<Ext> = (0..r).map(|_| self.ext()).collect();
        let nops = 2 + self.c.pick(3);
        let mut ops: Vec<(String, String, bool)> = Vec::new(); // (operand, list, divisor-safe)
        for m in 0..nops {
            let kind = self.c.pick(if m == 0 { 2 } else { 4 });
            match kind {
                1 => {
                    // existing tensor, dimensions mapped to distinct iterators, offsets fitting
                    let Some((name, dims)) = self.existing(1..=r) else {
                        ops.push(self.new_operand(&its, &exts, r)?);
                        continue;
                    };
                    let p = self.c.perm(r);
                    let mut list = Vec::new();
                    for (d, e) in dims.iter().enumerate() {
                        let c = if self.c.flip(25) { self.c.pick(e.val.min(3) as usize) } else { 0 };
                        list.push(offset(its[p[d]], c as i64));
                    }
                    ops.push((name, format!("[{}]", list.join(", ")), false));
                }
                2 => {
                    // a lower-rank input: a broadcast (an outer product when r > 1)
                    let k = 1 + self.c.pick(r);
                    let p = self.c.perm(r);
                    let mut sel: Vec<usize> = p[..k].to_vec();
                    sel.sort();
                    let sub_its: Vec<&str> = sel.iter().map(|&d| its[d]).collect();
                    let sub_exts: Vec<Ext> = sel.iter().map(|&d| exts[d].clone()).collect();
                    ops.push(self.new_operand(&sub_its, &sub_exts, k)?);
                }
                3 => {
                    let v = self.c.one(&["2.0", "0.5", "3.0", "1.5"]);
                    ops.push((v.to_string(), String::new(), true));
                }
                _ => ops.push(self.new_operand(&its, &exts, r)?),
            }
        }
        let out = self.c.perm(r);
        let out_list: Vec<&str> = out.iter().map(|&d| its[d]).collect();
        let out_list = format!("[{}]", out_list.join(", "));
        // now and then the result at affine positions of a larger declared tensor (issue 21)
        let (at, out_list) = if self.c.flip(12) {
            let cs: Vec<i64> = (0..r).map(|_| self.c.pick(3) as i64).collect();
            let dims: Vec<Ext> = out.iter().zip(&cs).map(|(&d, &c)| exts[d].plus(c)).collect();
            let y = self.input(&dims)?;
            let list: Vec<String> = out.iter().zip(&cs).map(|(&d, &c)| offset(its[d], c)).collect();
            (format!("@{y}: "), format!("[{}]", list.join(", ")))
        } else {
            (String::new(), out_list)
        };
        let x = self.name("X");
        let pick_op = |c: &mut Choices, safe: bool, v: bool| -> String {
            // now and then a function of two operands (issue 21) instead of an arithmetic one
            let base = if c.flip(15) {
                ["min", "max"][c.pick(2)]
            } else {
                ["add", "mul", "sub", "div"][c.pick(if safe { 4 } else { 3 })]
            };
            if v { format!("v{base}") } else { base.to_string() }
        };
        if ops.len() == 2 {
            let op = pick_op(&mut self.c, ops[1].2, false);
            let l = format!(
                "{x} = {at}{op}({}, {}, [{}, {}] -> {out_list})",
                ops[0].0, ops[1].0, ops[0].1, ops[1].1
            );
            return self.line(l).then_some(x);
        }
        let mut prev = self.name("t");
        let op = pick_op(&mut self.c, ops[1].2, true);
        if !self.line(format!("{prev} = {op}({}, {}, [{}, {}])", ops[0].0, ops[1].0, ops[0].1, ops[1].1)) {
            return None;
        }
        for (k, (o, l, safe)) in ops.iter().enumerate().skip(2) {
            if k + 1 == ops.len() {
                let op = pick_op(&mut self.c, *safe, false);
                let line = format!("{x} = {at}{op}({prev}, {o}, [, {l}] -> {out_list})");
                return self.line(line).then_some(x);
            }
            let t = self.name("t");
            let op = pick_op(&mut self.c, *safe, true);
            if !self.line(format!("{t} = {op}({prev}, {o}, [, {l}])")) {
                return None;
            }
            prev = t;
            // now and then a function of one operand: abs, then sqrt or exp of it
            if self.c.flip(15) {
                let a = self.name("t");
                if !self.line(format!("{a} = vabs({prev})")) {
                    return None;
                }
                prev = a;
                if self.c.flip(50) {
                    let f = self.name("t");
                    let func = ["vsqrt", "vexp"][self.c.pick(2)];
                    if !self.line(format!("{f} = {func}({prev})")) {
                        return None;
                    }
                    prev = f;
                }
            }
        }
        None
    }

    /// A new input indexed by `its` (all of them, in order), some with offsets (a stencil:
    /// the extent grows by the offset).
    fn new_operand(&mut self, its: &[&str], exts: &[Ext], r: usize) -> Option<(String, String, bool)> {
        let mut dims = Vec::new();
        let mut list = Vec::new();
        for d in 0..r {
            let c = if self.c.flip(25) { 1 + self.c.pick(2) as i64 } else { 0 };
            dims.push(exts[d].plus(c));
            list.push(offset(its[d], c));
        }
        let name = self.input(&dims)?;
        Some((name, format!("[{}]", list.join(", ")), true))
    }

    /// Two operands and 0-based dimensions to contract, the result's rank within 1..=3.
    fn contraction_operands(&mut self) -> Option<(String, String, usize, usize, usize)> {
        let (a, da) = self.operand(1..=2)?;
        let r0 = self.c.pick(da.len());
        let k = da[r0].clone();
        // An existing tensor with a matching extent, else a new one.
        let cands: Vec<(String, Vec<Ext>, usize)> = self
            .pool
            .iter()
            .filter_map(|n| {
                let d = self.dims(n)?;
                let m = d.len() + da.len() - 2;
                let r1 = d.iter().position(|e| e.val == k.val && e.text == k.text)?;
                (1..=3).contains(&m).then(|| (n.to_string(), d, r1))
            })
            .collect();
        if !cands.is_empty() && self.c.flip(40) {
            let (b, db, r1) = cands[self.c.pick(cands.len())].clone();
            return Some((a, b, r0, r1, da.len() + db.len() - 2));
        }
        let rb = if da.len() == 1 { 2 } else { 1 + self.c.pick(2) };
        let r1 = self.c.pick(rb);
        let dims: Vec<Ext> = (0..rb).map(|d| if d == r1 { k.clone() } else { self.ext() }).collect();
        let b = self.input(&dims)?;
        Some((a, b, r0, r1, da.len() + rb - 2))
    }

    fn contract(&mut self) -> Option<String> {
        let (a, b, r0, r1, _) = self.contraction_operands()?;
        let x = self.name("C");
        self.line(format!("{x} = contract({a}, {b}, [{}, {}])", r0 + 1, r1 + 1)).then_some(x)
    }

    /// A virtual contraction assigned, alone, with another factor, or summed further.
    fn vcontract(&mut self) -> Option<String> {
        let (a, b, r0, r1, m) = self.contraction_operands()?;
        let t = self.name("t");
        if !self.line(format!("{t} = vcontract({a}, {b}, [{}, {}])", r0 + 1, r1 + 1)) {
            return None;
        }
        let its: Vec<String> = (1..=m).map(|k| format!("i{k}")).collect();
        let list = format!("[{}]", its.join(", "));
        let x = self.name("X");
        let line = match self.c.pick(4) {
            1 => {
                let dims = self.dims(&t)?;
                let y = self.input(&dims)?;
                format!("{x} = mul({y}, {t}, [{list}, ] -> {list})")
            }
            2 => {
                let dims = self.dims(&t)?;
                let y = self.input(&dims)?;
                format!("{x} = div({t}, {y}, [, {list}] -> {list})")
            }
            3 if m >= 2 => format!("{x} = eq({t}, {list} -> [{}])", its[..m - 1].join(", ")),
            _ => {
                let p = self.c.perm(m);
                let out: Vec<&str> = p.iter().map(|&d| its[d].as_str()).collect();
                format!("{x} = eq({t}, {list} -> [{}])", out.join(", "))
            }
        };
        self.line(line).then_some(x)
    }

    fn transpose(&mut self) -> Option<String> {
        let (a, d) = self.operand(2..=3)?;
        let r = d.len();
        let its = &["i", "j", "k"][..r];
        let x = self.name("T");
        let line = if self.c.flip(30) {
            let p = self.c.perm(r);
            let (u, v) = (p[0].min(p[1]) + 1, p[0].max(p[1]) + 1);
            format!("{x} = transpose({a}, [[{u}, {v}]])")
        } else {
            let p = self.c.perm(r);
            let out: Vec<&str> = p.iter().map(|&k| its[k]).collect();
            format!("{x} = eq({a}, [{}] -> [{}])", its.join(", "), out.join(", "))
        };
        self.line(line).then_some(x)
    }

    fn outer(&mut self) -> Option<String> {
        let (u, du) = self.operand(1..=2)?;
        let (v, _) = self.operand(1..=(3 - du.len()).max(1))?;
        let x = self.name("W");
        self.line(format!("{x} = outerproduct({u}, {v})")).then_some(x)
    }

    /// A convolution accumulated onto a real tensor: O[h][w] = O[h][w] + I[h+kh][w+kw] * K[kh][kw].
    fn conv(&mut self) -> Option<String> {
        let r = 1 + self.c.pick(2);
        let hs = &["h", "w"][..r];
        let ks = &["kh", "kw"][..r];
        let kd: Vec<Ext> = (0..r)
            .map(|_| {
                let v = 1 + self.c.pick(3) as i64;
                Ext { text: v.to_string(), val: v }
            })
            .collect();
        // The image: an existing tensor large enough, else a new one.
        let (img, out) = match self.existing(r..=r) {
            Some((n, d)) if d.iter().zip(&kd).all(|(e, k)| e.val >= k.val) => {
                let out: Vec<Ext> = d
                    .iter()
                    .zip(&kd)
                    .map(|(e, k)| {
                        let v = e.val - k.val + 1;
                        Ext { text: v.to_string(), val: v }
                    })
                    .collect();
                (n, out)
            }
            _ => {
                let out: Vec<Ext> = (0..r).map(|_| self.ext()).collect();
                let dims: Vec<Ext> = out.iter().zip(&kd).map(|(e, k)| e.plus(k.val - 1)).collect();
                (self.input(&dims)?, out)
            }
        };
        let w = self.input(&kd)?;
        let o = self.input(&out)?;
        let p = self.name("p");
        let ii: Vec<String> = hs.iter().zip(ks).map(|(h, k)| format!("{h}+{k}")).collect();
        let l = format!("{p} = vmul({img}, {w}, [[{}], [{}]])", ii.join(", "), ks.join(", "));
        if !self.line(l) {
            return None;
        }
        let hl = hs.join(", ");
        self.line(format!("{o} = add({o}, {p}, [[{hl}], ] -> [{hl}])")).then_some(o)
    }

    /// An update in place of an existing result: `Y = @X: op(X, Z, ..)`, Z a new input (maybe
    /// read transposed) or X itself at the same element.
    fn in_place(&mut self) -> Option<String> {
        let cands: Vec<Name> =
            self.pool.iter().filter(|n| n.starts_with(['X', 'C', 'T', 'W'])).cloned().collect();
        if cands.is_empty() {
            return self.elementwise();
        }
        let x = cands[cands.len() - 1 - self.c.pick(cands.len().min(2))].to_string();
        let dims = self.dims(&x)?;
        let r = dims.len();
        if r == 0 || r > 3 {
            return None;
        }
        let its = &["i", "j", "k"][..r];
        let own = format!("[{}]", its.join(", "));
        let y = self.name("Y");
        let op = *self.c.one(&["add", "mul", "sub"]);
        let line = if self.c.flip(30) {
            format!("{y} = @{x}: {op}({x}, {x}, [{own}, {own}] -> {own})")
        } else {
            // Z is read through a permutation p of the iterators: Z's extents follow it.
            let p = self.c.perm(r);
            let square = dims.iter().all(|e| e.val == dims[0].val);
            let p: Vec<usize> = if square { p } else { (0..r).collect() };
            let zd: Vec<Ext> = p.iter().map(|&d| dims[d].clone()).collect();
            let z = self.input(&zd)?;
            let zl: Vec<&str> = p.iter().map(|&d| its[d]).collect();
            format!("{y} = @{x}: {op}({x}, {z}, [{own}, [{}]] -> {own})", zl.join(", "))
        };
        self.line(line).then_some(y)
    }

    // -- loop nests -----------------------------------------------------------------------

    fn nest(&self, name: &str) -> Option<teml::ir::Nest> {
        match self.state.get(name)? {
            Value::Nest(n) => Some(n.clone()),
            Value::Tensor(_) => None,
        }
    }

    /// One random transformation of nest `cur`, kept when it evaluates and stays small.
    fn step(&mut self, cur: &str) -> Option<String> {
        let depth = self.nest(cur)?.view().path().len().max(1);
        let lv = |c: &mut Choices| 1 + c.pick(depth + 1);
        let v = 2 + self.c.pick(4);
        let new = self.name("l");
        // a tensor the nest accesses: the target or an operand of one of its statements
        let stmts = self.nest(cur)?.stmts();
        let st = stmts.get(self.c.pick(stmts.len().max(1)))?;
        let mut tensors: Vec<String> =
            st.indexed_leaves().iter().filter_map(|n| n.id()).map(|n| n.to_string()).collect();
        tensors.extend(st.target().and_then(|t| t.id()).map(|n| n.to_string()));
        let tensor = tensors.get(self.c.pick(tensors.len().max(1)))?.clone();
        let rank = st
            .indexed_leaves()
            .iter()
            .copied()
            .chain(st.target().map(|t| &**t))
            .find(|n| n.id().is_some_and(|x| **x == *tensor))
            .and_then(|n| n.index_list().map(|xs| xs.len()))
            .unwrap_or(1)
            .max(1);
        let call = match self.c.pick(28) {
            26 => format!(
                "sink({cur}, {}{})",
                lv(&mut self.c),
                ["", ", \"first\"", ", \"last\""][self.c.pick(3)]
            ),
            27 => {
                // at a constant, or at an outer loop's iterator plus a constant
                let path = self.nest(cur)?.view().path();
                let c = self.c.pick(5) as i64 - 1;
                let at = match path.get(self.c.pick(path.len() + 1)) {
                    Some(l) => format!("{}{}", l.iter, if c == 0 { String::new() } else { format!("{c:+}") }),
                    None => c.to_string(),
                };
                format!("split({cur}, {}, {at})", lv(&mut self.c))
            }
            25 => {
                // levels from a loop of the nest, maybe below a branch (`focus`), by its address
                let n = self.nest(cur)?;
                let loops = n.loops_with_positions();
                let (_, l) = loops.get(self.c.pick(loops.len().max(1)))?;
                let same: Vec<_> = loops.iter().filter(|(_, m)| m.iter == l.iter).collect();
                let k = same.iter().position(|(_, m)| std::sync::Arc::ptr_eq(m, l))? + 1;
                match (same.len(), self.c.pick(4)) {
                    (_, 0) => format!("focus({cur})"),
                    (1, _) => format!("focus({cur}, \"{}\")", l.iter),
                    _ => format!("focus({cur}, \"{}#{k}\")", l.iter),
                }
            }
            21 => format!(
                "skew({cur}, {}, {}, {})",
                lv(&mut self.c),
                lv(&mut self.c),
                [1, 2, -1][self.c.pick(3)]
            ),
            22 => format!("shift({cur}, {}, {})", lv(&mut self.c), 1 + self.c.pick(3)),
            23 => format!("reverse({cur}, {})", lv(&mut self.c)),
            24 => format!("distribute({cur}, {})", lv(&mut self.c)),
            20 => {
                // streaming stores of the statement's result from the innermost loop (refused
                // unless it is vectorized and sets the result along its rows)
                let y = st.target().and_then(|t| t.id())?.to_string();
                let path = self.nest(cur)?.view().path();
                let (at, level) = match path.iter().rposition(|l| l.annot.vectorize) {
                    Some(k) => (cur.to_string(), k + 1),
                    None => {
                        // vectorize the innermost loop first (a step of its own)
                        let v = self.name("l");
                        let line = format!("{v} = vectorize({cur}, {})", path.len());
                        let s = self.attempt(&line)?;
                        self.commit(line, s);
                        (v, path.len())
                    }
                };
                format!("stream({at}, {level}, {y})")
            }
            19 => {
                // the statement's result over one of its operands
                let y = st.target().and_then(|t| t.id())?.to_string();
                let xs: Vec<String> = st
                    .value()?
                    .indexed_leaves()
                    .iter()
                    .filter_map(|n| n.id())
                    .map(|n| n.to_string())
                    .collect();
                let x = xs.get(self.c.pick(xs.len().max(1)))?;
                format!("in_place({cur}, {y}, {x})")
            }
            17 => {
                // a tensor's layout: regrouped (padded when the width does not divide), permuted
                let d = 1 + self.c.pick(rank);
                match self.c.pick(3) {
                    0 => format!("regroup({cur}, {tensor}, {d}, {}, 1)", 2 + self.c.pick(4)),
                    1 => format!("regroup({cur}, {tensor}, {d}, 2)"),
                    _ => {
                        let o: Vec<String> = (1..=rank).rev().map(|d| d.to_string()).collect();
                        format!("permute_layout({cur}, {tensor}, [{}])", o.join(", "))
                    }
                }
            }
            18 => format!(
                "pad({cur}, {tensor}, {}, {}, {})",
                1 + self.c.pick(rank),
                [1, 4, 8][self.c.pick(3)],
                self.c.pick(3)
            ),
            16 => format!("store_at({cur}, {}, {tensor})", lv(&mut self.c)),
            15 => format!("rfactor({cur}, {}, {v}, {tensor})", lv(&mut self.c)),
            12 | 13 => format!("registers({cur}, {}, {tensor})", lv(&mut self.c)),
            14 => {
                // the block as it is, reversed (a transpose), and padded rows
                let rank = st
                    .indexed_leaves()
                    .iter()
                    .find(|n| n.id().is_some_and(|x| **x == *tensor))
                    .and_then(|n| n.index_list().map(|xs| xs.len()))
                    .unwrap_or(1);
                let layout = match self.c.pick(4) {
                    0 | 1 => String::new(),
                    2 => {
                        let o: Vec<String> = (1..=rank).rev().map(|d| d.to_string()).collect();
                        format!(", [{}]", o.join(", "))
                    }
                    _ => {
                        let o: Vec<String> = (1..=rank).map(|d| d.to_string()).collect();
                        format!(", [{}], {}", o.join(", "), [3, 8][self.c.pick(2)])
                    }
                };
                format!("pack({cur}, {}, {tensor}{layout})", lv(&mut self.c))
            }
            0 | 1 => format!("stripmine({cur}, {}, {v})", lv(&mut self.c)),
            2 => format!("interchange({cur}, {}, {})", lv(&mut self.c), lv(&mut self.c)),
            3 => format!("unroll({cur}, {})", lv(&mut self.c)),
            4 => format!("fuse_inner({cur}, {})", lv(&mut self.c)),
            5 => format!("parallelize({cur}, {})", lv(&mut self.c)),
            6 => {
                // now and then narrower lanes than the target's (a width it lacks is dropped)
                let bits = ["", "", ", 256", ", 128"][self.c.pick(4)];
                // the innermost loop half the time (where explicit lanes and `stream` apply)
                let level = if self.c.pick(2) == 0 { depth } else { lv(&mut self.c) };
                format!("vectorize({cur}, {level}{bits})")
            }
            7 => format!("tile({cur}, {v})"),
            8 => format!("unroll_by({cur}, {}, {v})", lv(&mut self.c)),
            9 => format!("unroll_and_jam({cur}, {}, {v})", lv(&mut self.c)),
            10 => format!("collapse({cur}, {}, {})", lv(&mut self.c), 2 + self.c.pick(2)),
            _ => format!("interchange({cur}, [{}, {}])", lv(&mut self.c), lv(&mut self.c)),
        };
        let line = format!("{new} = {call}");
        let s = self.attempt(&line)?;
        // Keep the C small: at most 48 statements in a nest.
        match s.get(&new) {
            Some(Value::Nest(n)) if n.stmts().len() <= 48 => {}
            _ => return None,
        }
        self.commit(line, s);
        PATH_STEPS.fetch_add(1, Relaxed);
        Some(new)
    }

    fn path(&mut self, start: &str, max: usize) -> String {
        let mut cur = start.to_string();
        for _ in 0..self.c.pick(max + 1) {
            if let Some(n) = self.step(&cur) {
                cur = n;
            }
        }
        cur
    }
}

fn offset(it: &str, c: i64) -> String {
    if c == 0 { it.to_string() } else { format!("{it}+{c}") }
}

/// Generates a program from the choices: the program text (every line evaluates) and its
/// state, or a check-1 failure.
fn generate(ch: &[u32]) -> Result<(String, State), String> {
    let mut g = Gen {
        c: Choices { ch, pos: 0 },
        lines: Vec::new(),
        state: unchecked(),
        n: 0,
        fresh: 0,
        pool: Vec::new(),
        bug: None,
    };
    g.n = 3 + g.c.pick(6) as i64;
    let line = format!("N = {}", g.n);
    g.line(line);
    // Tensor statements, each built.
    let nstmts = 1 + g.c.pick(4);
    let mut built: Vec<String> = Vec::new();
    for _ in 0..nstmts {
        let x = match g.c.pick(10) {
            8 | 9 => g.consumer(),
            1 => g.contract(),
            2 => g.vcontract(),
            3 => g.transpose(),
            4 => g.outer(),
            5 => g.conv(),
            6 => g.in_place(),
            _ => g.elementwise(),
        };
        let Some(x) = x else { continue };
        g.result(&x);
        let l = g.name("l");
        if !g.line(format!("{l} = build({x})")) {
            continue;
        }
        // Now and then other domains (issue 21): a triangle or a backward loop given to
        // `build`, or a time loop around the nest; refused forms are skipped.
        let path = g.nest(&l).map(|n| n.path()).unwrap_or_default();
        let alt = g.name("l");
        let ranges = match (g.c.pick(8), path.as_slice()) {
            (0, [a, b, ..]) => Some(format!("build({x}, [[{}, 0, {}]])", b.iter, a.iter)),
            (1, [a, b, ..]) => Some(format!("build({x}, [[{}, {}, {}]])", b.iter, a.iter, b.ub)),
            (2, [a, ..]) => Some(format!("build({x}, [[{}, {}, 0, -1]])", a.iter, a.ub)),
            (3, [_, ..]) => Some(format!("around(t, [0, {}], {l})", 1 + g.c.pick(2))),
            _ => None,
        };
        match ranges {
            Some(r) if g.line(format!("{alt} = {r}")) => built.push(alt),
            _ => built.push(l),
        }
    }
    // Transformation paths.
    let mut variants: Vec<String> = Vec::new();
    let mut finals: Vec<String> = Vec::new();
    for l in &built {
        let f = g.path(l, 5);
        variants.push(l.clone());
        if f != *l {
            variants.push(f.clone());
        }
        finals.push(f);
    }
    // Fusions (legal and illegal), then a short path over each; some are kernels alone.
    let mut alone: Vec<String> = Vec::new();
    if !built.is_empty() {
        for _ in 0..g.c.pick(3) {
            let a = g.c.pick(variants.len());
            // Often a producer and a consumer of its result (a temporary after fusion).
            let targets = |g: &Gen, v: &str| -> Vec<String> {
                g.nest(v).map_or(Vec::new(), |n| {
                    n.stmts().iter().filter_map(|s| s.target()?.id().map(|x| x.to_string())).collect()
                })
            };
            let reads = |g: &Gen, v: &str, t: &[String]| -> bool {
                g.nest(v).is_some_and(|n| {
                    n.stmts().iter().any(|s| {
                        s.indexed_leaves().iter().any(|x| x.id().is_some_and(|i| t.contains(&i.to_string())))
                    })
                })
            };
            let made = targets(&g, &variants[a]);
            let consumers: Vec<usize> =
                (0..variants.len()).filter(|&j| j != a && reads(&g, &variants[j], &made)).collect();
            let b = if !consumers.is_empty() && g.c.flip(60) {
                consumers[g.c.pick(consumers.len())]
            } else if built.len() >= 2 && g.c.flip(70) {
                g.c.pick(variants.len())
            } else {
                a
            };
            let (a, b) = (variants[a].clone(), variants[b].clone());
            let r = 1 + g.c.pick(3);
            let f = g.name("f");
            if g.line(format!("{f} = fuse_outer({a}, {b}, {r})")) {
                FUSIONS.fetch_add(1, Relaxed);
                // Now and then the temporary stored per iteration explicitly.
                let f = match made.first() {
                    Some(t) if g.c.flip(40) => {
                        let s = g.name("s");
                        let r = 1 + g.c.pick(2);
                        if g.line(format!("{s} = store_at({f}, {r}, {t})")) { s } else { f }
                    }
                    _ => f,
                };
                let p = g.path(&f, 2);
                variants.push(f.clone());
                if g.c.flip(50) {
                    alone.push(p.clone());
                }
                if p != f {
                    variants.push(p);
                }
            }
        }
    }
    // Kernels.
    for f in &alone {
        g.line(format!("codegen({f})"));
    }
    if !variants.is_empty() {
        for k in 0..1 + g.c.pick(3) {
            // Mostly the most transformed variants (the last ones).
            let late = |c: &mut Choices| {
                let n = variants.len();
                if c.flip(60) { n - 1 - c.pick(n.min(3)) } else { c.pick(n) }
            };
            let names: Vec<String> = match g.c.pick(3) {
                0 if k == 0 => finals.clone(),
                1 => {
                    let (a, b) = (late(&mut g.c), late(&mut g.c));
                    vec![variants[a].clone(), variants[b].clone()]
                }
                _ => vec![variants[late(&mut g.c)].clone()],
            };
            let line = format!("codegen({})", names.join(", "));
            g.line(line);
        }
    }
    if let Some(b) = g.bug {
        return Err(b);
    }
    let text = g.text();
    // The whole text evaluates to the same kernels as the statements one at a time.
    let whole =
        catch_unwind(AssertUnwindSafe(|| teml::lang::eval_with(&text, FILE, &unchecked(), &stdlib())))
            .map_err(|_| format!("evaluation of the whole program panicked:\n{text}"))?
            .map_err(|e| {
                format!("the whole program fails while its lines evaluate one by one:\n{e}\n{text}")
            })?;
    if whole.kernels.len() != g.state.kernels.len() {
        return Err(format!("the whole program gives other kernels:\n{text}"));
    }
    Ok((text, whole))
}

/// Programs are generated without the legality check, so that illegal paths reach the
/// kernels and the check's verdicts can be compared with what the kernels compute.
fn unchecked() -> State {
    State { unchecked: true, ..State::new() }
}

// ---------------------------------------------------------------------------------------------
// Checks 2, 3 and 4

fn options() -> RunOptions {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    RunOptions {
        worker: Some(env!("CARGO_BIN_EXE_teml").into()),
        cache_dir: Some(dir.path().to_path_buf()),
        threads: Some(2),
        timeout: std::time::Duration::from_secs(30),
        ..RunOptions::default()
    }
}

/// The first difference between `got` and `want` on `names`, beyond the pipeline's tolerance:
/// float tolerance where any tensor is float, and an absolute floor relative to the magnitude
/// of the initial data (as `pipeline::compare_within`).
fn differ(names: &[Name], got: &Buffers, want: &Buffers, initial: &Buffers) -> Option<String> {
    let float = initial.values().chain(want.values()).any(|t| t.dtype == teml::ir::DType::Float);
    let tol = pipeline::tolerance(if float { teml::ir::DType::Float } else { teml::ir::DType::Double });
    let mag = pipeline::magnitude(initial);
    for n in names {
        let (g, w) = (got.get(n)?, want.get(n)?);
        let mut cmp = Comparison::default();
        pipeline::compare_within(n, &w.dims, &g.data, &w.data, tol, mag, &mut cmp);
        if let Some(worst) = cmp.worst {
            return Some(worst);
        }
    }
    None
}

/// Checks every kernel of the program; `Err` describes a bug.
fn check_kernels(text: &str, state: &State) -> Result<(), String> {
    let opts = options();
    for (k, req) in state.kernels.iter().enumerate() {
        KERNELS.fetch_add(1, Relaxed);
        let what =
            |msg: String| format!("kernel {} ({}): {msg}\nprogram:\n{text}", k + 1, req.names.join(", "));
        let reference =
            pipeline::untransformed(state, req).map_err(|e| what(format!("untransformed: {e}")))?;
        let all: Vec<_> = req.nests.iter().chain(&reference).cloned().collect();
        let initial = pipeline::initial_store(state, &all, &opts).map_err(|e| what(format!("data: {e}")))?;
        let stmts: Vec<TExpr> = req.nests.iter().flat_map(|n| n.origin.clone()).collect();
        let mut written: Vec<Name> = stmts.iter().filter_map(|s| s.target()?.id().cloned()).collect();
        written.sort();
        written.dedup();

        // 2. interpreter (untransformed) against the oracle.
        let mut by_interp = initial.clone();
        interp::run(state, &reference, &mut by_interp).map_err(|e| what(format!("interpreter: {e}")))?;
        let mut by_oracle = initial.clone();
        match oracle::run(state, &stmts, &mut by_oracle) {
            Ok(()) => {
                if let Some(d) = differ(&written, &by_oracle, &by_interp, &initial) {
                    return Err(what(format!(
                        "the oracle and the interpreter differ: {d} (oracle, interpreter)"
                    )));
                }
                ORACLE_OK.fetch_add(1, Relaxed);
            }
            Err(OracleError::Unsupported(_)) => {
                ORACLE_SKIP.fetch_add(1, Relaxed);
            }
            Err(e) => return Err(what(format!("oracle: {e}"))),
        }

        // 3. the transformed nests in the interpreter: is the path a legal reordering?
        let mut by_transformed = initial.clone();
        interp::run(state, &req.nests, &mut by_transformed)
            .map_err(|e| what(format!("interpreter on the transformed nests: {e}")))?;
        let illegal = differ(&written, &by_transformed, &by_interp, &initial);

        // 4. the legality check (isl) against what the paths compute: an accepted path must
        //    compute what the untransformed statements compute; every path that changes the
        //    result must be refused. (A refused path may still compute the same values at this
        //    size: the check decides for every size, and the data may not expose the order.)
        let t = std::time::Instant::now();
        let mut refusal = None;
        for (name, nest) in req.names.iter().zip(&req.nests) {
            match teml::analysis::decide(state, nest) {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    refusal.get_or_insert(format!("{name}: {}", e.message));
                }
                Err(e) => return Err(what(format!("the legality check failed on {name}: {e}"))),
            }
        }
        CHECK_NANOS.fetch_add(t.elapsed().as_nanos() as u64, Relaxed);
        CHECKED.fetch_add(1, Relaxed);
        match (&refusal, &illegal) {
            (None, Some(d)) => {
                return Err(what(format!(
                    "the legality check accepts a path that changes the result: {d} (transformed, untransformed)"
                )));
            }
            (None, None) => {
                ACCEPTED.fetch_add(1, Relaxed);
            }
            (Some(_), Some(_)) => {
                REJECTED.fetch_add(1, Relaxed);
            }
            (Some(_), None) => {
                REJECTED.fetch_add(1, Relaxed);
                REJECTED_SAME.fetch_add(1, Relaxed);
            }
        }

        // A temporary stored per iteration where an iteration reads another's value: the
        // interpreter keeps whole tensors, so only the check and the kernel see it.
        let escapes = refusal.as_deref().is_some_and(|r| r.contains("a buffer per iteration"));

        // 3. the compiled kernel.
        let run = pipeline::run_request(state, req, k, &opts);
        if let Ok(report) = &run
            && let Ok(c) = std::fs::read_to_string(&report.c_path)
        {
            if c.contains("_local") {
                LOCAL.fetch_add(1, Relaxed);
            }
            if c.contains("_layout") {
                LAID.fetch_add(1, Relaxed);
            }
            if c.contains("/* in place:") {
                IN_PLACE.fetch_add(1, Relaxed);
            }
            if c.contains("teml_stream_fence();  /*") {
                STREAMED.fetch_add(1, Relaxed);
            }
            if c.contains("#include <math.h>") {
                MATH.fetch_add(1, Relaxed);
            }
            let affine = req.nests.iter().any(|n| {
                n.stmts().iter().any(|s| {
                    s.target()
                        .and_then(|t| t.index_list())
                        .is_some_and(|xs| xs.iter().any(|e| e.as_var().is_none()))
                })
            });
            if affine {
                AFFINE.fetch_add(1, Relaxed);
            }
        }
        match run {
            Ok(report) if escapes => {
                COMPILED.fetch_add(1, Relaxed);
                if report.verified {
                    VERIFIED.fetch_add(1, Relaxed);
                } else {
                    ILLEGAL.fetch_add(1, Relaxed);
                }
            }
            Ok(report) => {
                COMPILED.fetch_add(1, Relaxed);
                match (report.verified, &illegal) {
                    (true, None) => {
                        VERIFIED.fetch_add(1, Relaxed);
                        full_size_check(text, state, k, &opts).map_err(what)?;
                    }
                    (false, Some(_)) => {
                        ILLEGAL.fetch_add(1, Relaxed);
                    }
                    (false, None) if gcc_vectorizer_at_fault(state, req, k, &opts) => {
                        // The same C verifies without gcc's loop vectorizer: a compiler bug
                        // (gcc 12 at -O3 with 512-bit vectors), caught by verification, not
                        // teml's; its reproducers are in trust.rs.
                        GCC_BUGS.fetch_add(1, Relaxed);
                        eprintln!(
                            "gcc's loop vectorizer miscompiled a valid kernel (verified with \
                             -fno-tree-loop-vectorize):\n{text}\nC: {}\n",
                            report.c_path.display()
                        );
                    }
                    (false, None) => {
                        return Err(what(format!(
                            "the kernel does not verify while the transformed nests, interpreted, \
                             agree with the untransformed ones (legality: {}): {}\nC: {}",
                            refusal.as_deref().unwrap_or("accepted"),
                            report.summary(),
                            report.c_path.display()
                        )));
                    }
                    (true, Some(d)) => {
                        return Err(what(format!(
                            "verified, but the transformed nests, interpreted, differ from the \
                             untransformed ones: {d} (transformed, untransformed)"
                        )));
                    }
                }
            }
            Err(RunError::Meta(_)) => {
                REFUSED.fetch_add(1, Relaxed);
            }
            // A binary that crashes on valid C and runs without gcc's vectorizers: the same
            // compiler defect (`Pipeline::run` rebuilds it; trust.rs has the reproducer).
            Err(RunError::Runtime(e @ teml::runtime::RuntimeError::Crashed { .. }))
                if gcc_vectorizer_at_fault(state, req, k, &opts) =>
            {
                GCC_BUGS.fetch_add(1, Relaxed);
                eprintln!(
                    "gcc's vectorizers built a binary that crashed ({e}) from a valid kernel:\n{text}\n"
                );
            }
            Err(e) => return Err(what(format!("run_request: {e}"))),
        }
    }
    Ok(())
}

/// 5. The kernel, verified in full at the program's size, run again as a program too large for
///    the reference interpreter (the limit just below its cost): it is verified at a reduced
///    size where the program builds the same path there, and its full-size binary must then be
///    checked by something independent (the expression oracle, or the untransformed program
///    compiled on its own: ranges given to `build` and `around`) and verified; nothing may
///    report it unchecked or mismatched.
fn full_size_check(text: &str, state: &State, k: usize, opts: &RunOptions) -> Result<(), String> {
    let req = &state.kernels[k];
    let cost = pipeline::reference_cost(state, req).map_err(|e| format!("reference cost: {e}"))?;
    if cost < 2 {
        return Ok(());
    }
    let src = text.to_string();
    let program = pipeline::Program::new("fuzz", Default::default(), move |consts| {
        let mut s = unchecked();
        for (n, v) in consts {
            s = s.with_const(n, *v);
        }
        teml::lang::eval_with(&src, FILE, &s, &stdlib()).map_err(teml::error::ProgramError::from)
    });
    let small = RunOptions { max_reference_instances: cost - 1, ..opts.clone() };
    let pipe = pipeline::Pipeline::with_state(program, state.clone(), small);
    let run = match pipe.run(&pipeline::KernelRef::Codegen(k)) {
        Ok(r) => r,
        // No smaller size of the program fits, or it fails there: nothing to compare.
        Err(_) => return Ok(()),
    };
    let e = &run.report.evidence;
    if matches!(e.reference, pipeline::ReferenceCheck::Refused { .. }) {
        FULL_REFUSED_PATH.fetch_add(1, Relaxed);
    }
    match &e.full_size {
        pipeline::FullSizeCheck::Oracle { .. } => FULL_BY_ORACLE.fetch_add(1, Relaxed),
        pipeline::FullSizeCheck::Untransformed { .. } => FULL_BY_UNTRANSFORMED.fetch_add(1, Relaxed),
        // The path computes otherwise at the reduced size (unchecked programs: a path legal at
        // the program's size only): reported as a mismatch there, never as verified.
        pipeline::FullSizeCheck::Nothing { why } if why.contains("reduced-size kernel did not match") => {
            FULL_REDUCED_MISMATCH.fetch_add(1, Relaxed);
            return Ok(());
        }
        other => {
            return Err(format!(
                "verified at full size, but as a program too large for the interpreter its full-size binary \
                 is checked by {other:?}: {}",
                run.report.summary()
            ));
        }
    };
    if !run.report.verified && e.compiler_defect.is_none() {
        return Err(format!(
            "verified at full size, but not as a program too large for the interpreter: {}",
            run.report.summary()
        ));
    }
    Ok(())
}

/// All three checks on the program of `choices`.
fn check_choices(choices: &[u32]) -> Result<(), String> {
    PROGRAMS.fetch_add(1, Relaxed);
    let (text, state) = generate(choices)?;
    if std::env::var_os("TEML_FUZZ_SHOW").is_some() {
        eprintln!("---- {} kernels\n{text}", state.kernels.len());
    }
    check_kernels(&text, &state)?;
    // teml auto on the program (every program in a campaign, every fourth otherwise): its path
    // must verify.
    let campaign = std::env::var_os("TEML_FUZZ_SECONDS").is_some();
    // (A program whose every codegen line was dropped has no kernel to schedule.)
    let pick = campaign || PROGRAMS.load(Relaxed) % 4 == 1;
    if pick && !state.kernels.is_empty() { check_auto(&text) } else { Ok(()) }
}

/// `teml auto` on `text`, where every line passes the legality checks (the fuzzer's programs
/// may hold illegal reorderings, which the checked front-end refuses): the path it writes is
/// evaluated, and each of its kernels must verify.
fn check_auto(text: &str) -> Result<(), String> {
    // Programs `teml run` refuses (a line the checks refuse, or a kernel code generation
    // cannot realize) are the user's to fix first.
    let runs = teml::lang::eval_with(text, FILE, &State::new(), &stdlib()).is_ok_and(|s| {
        s.kernels.iter().all(|k| teml::codegen::generate(&s, "fuzz_probe", &k.named()).is_ok())
    });
    if !runs {
        AUTO_SKIPPED.fetch_add(1, Relaxed);
        return Ok(());
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let program = dir.path().join("p.teml");
    std::fs::write(&program, text).map_err(|e| e.to_string())?;
    let o = teml::tuner::auto::AutoOptions {
        program,
        defines: Default::default(),
        unchecked: false,
        roles: Default::default(),
        out: dir.path().join("auto"),
        db: None,
        threads: 2,
    };
    let what = |msg: String| format!("teml auto: {msg}\nprogram:\n{text}");
    let report = teml::tuner::auto::auto(&o).map_err(what)?;
    AUTO.fetch_add(1, Relaxed);
    let path = std::fs::read_to_string(&report.path).unwrap_or_default();
    let state =
        pipeline::eval_file(&report.path, &State::new()).map_err(|e| what(format!("{e}\npath:\n{path}")))?;
    for (k, req) in state.kernels.iter().enumerate() {
        match pipeline::run_request(&state, req, k, &options()) {
            Ok(r) if r.verified => {}
            Ok(r) => {
                return Err(what(format!("the auto path does not verify: {}\npath:\n{path}", r.summary())));
            }
            // A kernel too large for the reference at this size is not the path's fault.
            Err(RunError::Data(_)) => {}
            Err(e) => return Err(what(format!("the auto path fails: {e}\npath:\n{path}"))),
        }
    }
    AUTO_VERIFIED.fetch_add(1, Relaxed);
    Ok(())
}

/// All checks on a program given as text (regressions).
fn check_text(text: &str) {
    let state = teml::lang::eval_with(text, FILE, &unchecked(), &stdlib()).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = check_kernels(text, &state) {
        panic!("{e}");
    }
}

fn cases() -> u32 {
    std::env::var("TEML_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(32)
}

#[test]
fn random_programs_agree_four_ways() {
    let config = ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        max_shrink_iters: 400,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = proptest::collection::vec(any::<u32>(), 0..160);
    // TEML_FUZZ_KEEP_GOING=1: print every failure and go on (a campaign collecting several
    // bugs); the test fails at the end if any was found.
    let keep_going = std::env::var_os("TEML_FUZZ_KEEP_GOING").is_some();
    let found = std::sync::Mutex::new(Vec::<String>::new());
    // TEML_FUZZ_SECONDS=S: no new program after S seconds (a campaign bounded in time).
    let deadline = std::env::var("TEML_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map(|s| std::time::Instant::now() + std::time::Duration::from_secs_f64(s));
    let result = runner.run(&strategy, |ch| match deadline.is_some_and(|d| std::time::Instant::now() > d) {
        true => Ok(()),
        false => match check_choices(&ch) {
            Ok(()) => Ok(()),
            Err(e) => {
                if let Some(test) = known(&e) {
                    KNOWN.fetch_add(1, Relaxed);
                    eprintln!("known bug ({test}):\n{e}\n");
                    return Ok(());
                }
                BUGS.fetch_add(1, Relaxed);
                if keep_going {
                    eprintln!("FAILURE:\n{e}\n");
                    found.lock().unwrap().push(e);
                    return Ok(());
                }
                Err(TestCaseError::fail(e))
            }
        },
    });
    eprintln!("{}", stats());
    if let Err(e) = result {
        panic!("{e}");
    }
    let found = found.into_inner().unwrap();
    assert!(found.is_empty(), "{} failures, the first:\n{}", found.len(), found[0]);
}

/// The fuzzer's `teml auto` check skips a program `teml run` itself refuses (here code
/// generation: `A8` padded for the whole kernel and packed in one nest) instead of reporting
/// the refusal as the auto path's.
#[test]
fn auto_check_skips_a_program_run_refuses() {
    let text = "N = 6\n\
         A1 = tensor([4, 6])\n\
         T2 = eq(A1, [i, j] -> [i, j])\n\
         l3 = build(T2)\n\
         Y5 = @T2: add(T2, T2, [[i, j], [i, j]] -> [i, j])\n\
         l6 = build(Y5)\n\
         A8 = tensor([N])\n\
         W9 = outerproduct(Y5, A8)\n\
         l10 = build(W9)\n\
         t13 = vdiv(A8, 0.5, [[i], ])\n\
         t14 = vadd(t13, A8, [, [i]])\n\
         X12 = add(t14, 1.5, [, ] -> [i])\n\
         l15 = build(X12)\n\
         l16 = around(t, [0, 1], l15)\n\
         l17 = tile(l3, 3)\n\
         l18 = vectorize(l17, 1)\n\
         l20 = vectorize(l6, 2)\n\
         l21 = interchange(l20, [2, 1])\n\
         l22 = vectorize(l21, 2)\n\
         l26 = vectorize(l10, 3)\n\
         l25 = stream(l26, 3, W9)\n\
         l30 = parallelize(l16, 2)\n\
         l31 = pad(l30, A8, 1, 8, 1)\n\
         l33 = pack(l31, 1, A8)\n\
         codegen(l18, l22, l25, l33)\n";
    assert!(check_auto(text).is_ok());
}

/// Found by the fuzzer's `teml auto` check (Zen 4, 2026-12-02): `A1` packed by the time loop
/// `t` and kept in registers across `i2`; the auto path's `permute(l25, [2, 3, 4, 1])` moves `t`
/// innermost, inside the register loop, and the C read `teml_A1_pack` before declaring it (a C
/// compile error). Code generation refuses that nest with its reason, so `teml auto` takes the
/// next point, which verifies.
#[test]
fn a_register_across_the_loop_that_packs_it_is_refused_and_auto_takes_the_next_point() {
    let program = "N = 8\nA1 = tensor([N])\nA2 = tensor([5])\nW3 = outerproduct(A1, A2)\nl4 = build(W3)\n\
         l5 = around(t, [0, 2], l4)\nl21 = pack(l5, 1, A1, [1], 8)\nl22 = stripmine(l21, 3, 3)\n\
         l25 = registers(l22, 4, A1)\n";
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("p.teml");
    std::fs::write(&f, format!("{program}l1 = permute(l25, [2, 3, 4, 1])\ncodegen(l1)\n")).unwrap();
    let o =
        std::process::Command::new(env!("CARGO_BIN_EXE_teml")).arg("run").arg(&f).arg("-q").output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("p.teml:11:1") && err.contains("codegen: expected `A1` packed by a loop around"),
        "{err}"
    );
    assert!(check_auto(&format!("{program}codegen(l25)\n")).is_ok());
}

/// The generator itself: the empty choice vector gives the simplest program, which runs.
#[test]
fn simplest_program_runs() {
    let (text, state) = generate(&[]).unwrap();
    assert_eq!(state.kernels.len(), 1, "{text}");
    check_text(&text);
}

// ---------------------------------------------------------------------------------------------
// Regressions: shrunk failures, as programs (each was a bug, now fixed: the contraction of
// floats is float; the interpreter rounds stores to float tensors and a kernel with float
// tensors is compared at float tolerance; parallel inside simd is refused at its line).

/// An i8 tensor plus a fractional literal, stored into its promoted i32 result: the expression
/// oracle truncates the stored value as the interpreter and the C do (it kept -1.5 where the
/// tensor holds -1; found by a campaign once the fuzzer made narrow inputs).
#[test]
fn an_integer_result_of_a_fractional_literal_is_truncated_by_the_oracle_too() {
    check_text(
        "A1 = tensor(i8, [2, 8, 7])\nX2 = add(A1, 1.5, [[i, j, k], ] -> [k, j, i])\nl3 = build(X2)\ncodegen(l3)\n",
    );
}

/// An i8 tensor summing double products (a convolution into it): each update truncates, so
/// the expression oracle, which rounds the whole sum once, leaves it to the interpreter.
#[test]
fn an_integer_target_summing_non_integer_terms_is_left_to_the_interpreter() {
    check_text(
        "A1 = tensor([4, 11])\nA2 = tensor(float, [1, 3])\nA3 = tensor(i8, [4, 9])\n\
         p4 = vmul(A1, A2, [[h+kh, w+kw], [kh, kw]])\nA3 = add(A3, p4, [[h, w], ] -> [h, w])\n\
         l5 = build(A3)\nl8 = unroll(l5, 4)\ncodegen(l8)\n",
    );
}

/// A bf16 tensor summing a convolution's double products: each update rounds to bf16, so the
/// expression oracle, which rounds the whole sum once, leaves it to the interpreter (the
/// fuzzer's case: kernel -1.34375, oracle -1.3515625).
#[test]
fn a_bf16_target_summing_is_left_to_the_interpreter() {
    check_text(
        "A10 = tensor([7])\nA11 = tensor([3])\nA12 = tensor(bf16, [5])\n\
         p13 = vmul(A10, A11, [[h+kh], [kh]])\nA12 = add(A12, p13, [[h], ] -> [h])\nl14 = build(A12)\n\
         codegen(l14)\n",
    );
}

/// A u8 element summing double products truncates at every update (`u8 += double`), so its
/// updates give another value in another order: not a reduction that may run on threads (the
/// fuzzer's case: `parallelize` of the summed loop accepted, an OpenMP reduction in an i32
/// accumulator, kernel 1 where the reference, truncating in order, gives 0). Refused at
/// `parallelize`, with the two updates; the nest as written verifies.
#[test]
fn an_integer_target_summing_non_integers_is_no_reduction_to_reorder() {
    let d = tempfile::tempdir().unwrap();
    let head = "N = 3\nA5 = tensor([3])\nA14 = tensor(float, [3])\nA15 = tensor(u8, [1])\n\
                p16 = vmul(A5, A14, [[h+kh], [kh]])\nA15 = add(A15, p16, [[h], ] -> [h])\n\
                l18 = build(A15, [[kh, h, 2]])\n";
    let f = crate::common::program(
        d.path(),
        "par.teml",
        &format!("{head}l26 = parallelize(l18, 2)\ncodegen(l26)\n"),
    );
    let (ok, out) = crate::common::teml_env(d.path(), &[], &["run", &f]);
    assert!(!ok && out.contains("parallelize: illegal") && out.contains("par.teml:8:1"), "{out}");
    assert!(out.contains("loop `kh` is parallelized"), "{out}");
    assert!(
        out.contains("A15 is an integer summing values that are not integers: each update truncates"),
        "{out}"
    );
    check_text(&format!("{head}l27 = stripmine(l18, 1, 2)\ncodegen(l27)\n"));
}

/// The same truncation kept in registers: the band's variable of a u8 element summing double
/// products is a u8 (each update truncates to it, as in memory), not the i32 an integer sum
/// would use (seeds 2, 3, 4 and 6 mismatched with an i32 variable: e.g. -1 + 0.5 is 0 in i32,
/// 255 + 0.5 is 255 in u8).
#[test]
fn an_integer_target_summing_non_integers_is_kept_in_its_own_type() {
    let d = tempfile::tempdir().unwrap();
    let f = crate::common::program(
        d.path(),
        "regs.teml",
        "A = tensor([4, 8])\nW = tensor(float, [8])\nY = tensor(u8, [4])\np = vmul(A, W, [[h, k], [k]])\n\
         Y = add(Y, p, [[h], ] -> [h])\nl = build(Y)\nl2 = registers(l, 2, Y)\ncodegen(l2)\n",
    );
    let emit = d.path().join("regs.c");
    for seed in ["1", "2", "3", "4", "6"] {
        let (ok, out) = crate::common::teml_env(
            d.path(),
            &[],
            &["run", &f, "--seed", seed, "--emit-c", emit.to_str().unwrap()],
        );
        assert!(ok && out.contains(": verified"), "seed {seed}: {out}");
    }
    let c = std::fs::read_to_string(&emit).unwrap();
    assert!(c.contains("uint8_t teml_Y0 = Y[h];"), "{c}");
}

/// A contraction of float tensors: `contract` makes a double accumulator and the C computes
/// `C[i1][i2] += A[k1][i1] * A[k1][i2]` with the product in float, while the reference
/// interpreter computes it in double; the output is double, so the tolerance is 1e-9 and the
/// untransformed kernel fails verification (rel. error ~4e-8: kernel 2.34934663772583,
/// reference 2.3493465973460737). Expected: verified (the product computed in the target's
/// type, or the reference rounding float products, or a float accumulator).
#[test]
fn float_contraction_verifies() {
    check_text("A = tensor(float, [2, 4])\nC = contract(A, A, [1, 1])\nl = build(C)\ncodegen(l)\n");
}

/// The same root (the reference interpreter computes everything in f64 and never rounds to
/// float): a float tensor written by one nest and read by the next into a double tensor. The
/// kernel stores `F[i] = A[i]` rounded to float, the reference keeps `A[i]` exact, and the
/// double output `Y` differs by ~4e-8 relative: the untransformed kernel fails verification.
#[test]
fn float_store_then_double_read_verifies() {
    check_text(
        "A = tensor([4])\nF = tensor(float, [4])\nX = @F: eq(A, [i] -> [i])\n\
         Y = add(F, A, [[i], [i]] -> [i])\nl1 = build(X)\nl2 = build(Y)\ncodegen(l1, l2)\n",
    );
}

/// A `parallelize` mark inside a `vectorize`d loop: the generated C nests `omp parallel for`
/// inside `omp simd`, which gcc rejects ("OpenMP constructs other than 'ordered simd', 'simd',
/// 'loop' or 'atomic' may not be nested inside 'simd' region"). Expected: the kernel runs (the
/// inner mark dropped) or is refused with a `RunError::Meta` naming the marks.
#[test]
fn parallel_inside_vectorized_loop_is_refused() {
    let src = "A = tensor([4, 4])\nB = eq(A, [i, j] -> [i, j])\nl = build(B)\nl1 = vectorize(l, 1)\n\
               l2 = parallelize(l1, 2)\ncodegen(l2)\n";
    let e = teml::lang::eval_with(src, FILE, &State::new(), &Stdlib::get()).unwrap_err().to_string();
    assert!(
        e.contains("OpenMP allows no `parallel for` inside `simd`") && e.contains("fuzz.teml:5:1"),
        "{e}"
    );
}

/// An extent inferred with `min` (`X13` is `[6, min(N-2, 2)]`): the kernel's parameter
/// declaration used `teml_min` without defining it (undefined symbol at load time).
#[test]
fn an_extent_with_min_declares_its_helper() {
    check_text(
        "N = 5\nA10 = tensor([N])\nA12 = tensor([2, 6])\nX13 = mul(A10, A12, [[i+2], [i, j]] -> [j, i])\n\
         A15 = tensor([3, 1])\nA16 = tensor([4, 2])\np17 = vmul(X13, A15, [[h+kh, w+kw], [kh, kw]])\n\
         A16 = add(A16, p17, [[h, w], ] -> [h, w])\nl18 = build(A16)\ncodegen(l18)\n",
    );
}

/// `(A1/A2)*A2 - A1` is 0 in the reference and a rounding residue (1e-33, fused multiply-add)
/// in the kernel; squared in place, the relative error was 1e279. Values computed from data of
/// magnitude 1 are compared with an absolute floor of the tolerance.
#[test]
fn cancellation_residue_is_not_a_mismatch() {
    check_text(
        "N = 7\nA1 = tensor([N])\nA2 = tensor([N])\nt4 = vdiv(A1, A2, [[i], [i]])\nt5 = vmul(t4, A2, [, [i]])\n\
         X3 = sub(t5, A1, [, [i]] -> [i])\nl6 = build(X3)\nY7 = @X3: mul(X3, X3, [[i], [i]] -> [i])\n\
         l8 = build(Y7)\nl14 = stripmine(l6, 1, 3)\nl15 = unroll(l14, 1)\nl20 = stripmine(l8, 1, 3)\n\
         codegen(l15, l20)\n",
    );
}

/// Found by the fuzzer: `A3 = add(A3, p4, ..)` updates onto the values `A3` held, and `T11`
/// reads `A3`; fused at the outer loop, `A3` looked like a temporary, and the update's read of
/// its own target was taken for an accumulator's (which reads the zero written just before).
/// It reads the initial data: `A3` must keep its storage.
#[test]
fn an_update_onto_a_tensor_is_no_temporary() {
    check_text(
        "N = 3\nA1 = tensor([9, N])\nA2 = tensor(float, [1, 1])\nA3 = tensor([9, N])\n\
         p4 = vmul(A1, A2, [[h+kh, w+kw], [kh, kw]])\nA3 = add(A3, p4, [[h, w], ] -> [h, w])\nl5 = build(A3)\n\
         T11 = eq(A3, [i, j] -> [i, j])\nl12 = build(T11)\nf23 = fuse_outer(l5, l12, 1)\n\
         l24 = parallelize(f23, 1)\ncodegen(l24)\ns = store_at(f23, 1, A3)\ncodegen(s)\n",
    );
}

/// Found by the fuzzer: `X8` regrouped along its first dimension keeps that dimension's lanes
/// last in its buffer (`[j div 2][i][k][j mod 2]`), so consecutive `k` are 2 apart; explicit
/// lanes along `k` stored pairs of adjacent doubles there, half of them into another element.
/// Such lanes now keep the pragma.
#[test]
fn lanes_along_a_row_that_another_regrouped_dimension_splits() {
    check_text(
        "N = 7\nA6 = tensor([N, N, 6])\nA7 = tensor([N, 6])\n\
         X8 = mul(A6, A7, [[i, j, k], [j, k]] -> [j, i, k])\nl10 = build(X8)\n\
         l17 = vectorize(l10, 3, 128)\nl18 = regroup(l17, X8, 1, 2, 1)\ncodegen(l18)\n\
         l19 = regroup(l17, X8, 3, 2)\ncodegen(l19)\nl20 = regroup(l10, X8, 1, 2, 1)\n\
         l21 = permute_layout(l20, X8, [1, 2, 4, 3])\nl22 = vectorize(l21, 3)\ncodegen(l22)\n",
    );
}

/// Found by the fuzzer (issue 21): a result at affine positions whose iterator `j` indexes an
/// operand on its own (`A2[j]`, extent 4) and the target at `j+2` (extent 4): `build` bounds
/// `j` by both (0..1), and the expression oracle now infers the range the same way instead of
/// taking the operand's whole extent.
#[test]
fn an_affine_result_position_bounds_an_iterator_the_operands_index_whole() {
    check_text(
        "N = 4\n\
         A1 = tensor([N+1])\n\
         A2 = tensor(float, [N])\n\
         A3 = tensor([N])\n\
         t5 = vmin(A1, A2, [[i+1], [i]])\n\
         A7 = tensor([4, N+1, 6])\n\
         t9 = vdiv(A2, 2.0, [[j], ])\n\
         t10 = vadd(t9, A3, [, [k]])\n\
         X8 = @A7: mul(t10, 3.0, [, ] -> [j+2, i+1, k+1])\n\
         l11 = build(X8)\n\
         A12 = tensor([N, N])\n\
         C13 = contract(A2, A12, [1, 2])\n\
         l14 = build(C13)\n\
         A15 = tensor([4, 9])\n\
         t16 = vcontract(A15, A7, [1, 1])\n\
         X17 = eq(t16, [i1, i2, i3] -> [i2, i1, i3])\n\
         l18 = build(X17)\n\
         l20 = vectorize(l11, 3)\n\
         l19 = stream(l20, 3, A7)\n\
         l21 = pack(l19, 2, A2)\n\
         l22 = pad(l21, A2, 1, 1, 0)\n\
         l24 = permute_layout(l14, C13, [1])\n\
         l26 = stripmine(l24, 1, 2)\n\
         l27 = stripmine(l26, 1, 2)\n\
         codegen(l22, l27, l18)\n",
    );
}

/// Skewing the reduction loop by the result's column makes it start below 0 (`k1` from
/// `-j`); unrolling the column then gives copies whose first update is at `k1 + 1 == 0`. The
/// zeroing took "every iterator is non-negative" for granted and dropped those copies' clears.
#[test]
fn an_unrolled_copy_of_a_skewed_reduction_is_zeroed() {
    check_text(
        "N = 3\n\
         A1 = tensor([N, 5])\n\
         A2 = tensor([N, 4])\n\
         C3 = contract(A1, A2, [1, 1])\n\
         l4 = build(C3)\n\
         l11 = skew(l4, 2, 3, -1)\n\
         l12 = unroll(l11, 2)\n\
         codegen(l12)\n",
    );
}
