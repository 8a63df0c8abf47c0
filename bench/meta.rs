//! Meta-level costs, measured with criterion: what a user waits for before any kernel runs.
//!
//! - `eval`: a whole meta-program through `teml::pipeline::eval_file`, checked (the default)
//!   and unchecked (`State { unchecked: true, .. }`).
//! - `transform`: each core transformation on a mm nest (3 loops, N=1200) through
//!   `teml::ops::call` (argument checks, rewrite and the isl legality check) and through the
//!   pure rewrite in `teml::ops::transform` (no check), so that the check's cost shows; `tile`
//!   through the Rhai standard library, from a checked and from an unchecked state.
//! - `codegen`: `teml::codegen::generate` of the Sec. 5.3 mttkrp and gconv kernels.
//! - `compile`: `teml::runtime::Compiler::compile`, a cache hit against a fresh compilation.
//! - `repl`: `Repl::handle` of a transformation line, `:c l`, `:run l` on a N=32 mm, each
//!   alone and the three in a row, with a warm compile cache.
//!
//! `cargo bench --bench meta --features criterion` (about 1.5 minutes; criterion is an optional
//! dependency, off for `cargo test`); `cargo bench --bench meta --features criterion -- repl`
//! runs one group. Figures only: nothing here asserts a time.

use criterion::{BatchSize, Criterion, SamplingMode};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;
use teml::ir::{Name, Nest, State, Value};
use teml::lang::Extensions as _;
use teml::ops::{ArgVal, transform};
use teml::repl::{Mode, Repl};
use teml::runtime::{Compiler, Flags};
use teml::script::Stdlib;

/// The mm nest `l` (i, j, k), its inner loop strip-mined by 8 (`s8`: i, j, ko, k) and two
/// element-wise nests over the same domain (`lx`, `ly`) to fuse.
const MM: &str = "\
N = 1200
A = tensor([N, N])
B = tensor([N, N])
C = tensor([N, N])
P = vmul(A, B, [[i, k], [k, j]])
C = add(C, P, [[i, j], ] -> [i, j])
l = build(C)
s8 = stripmine(l, 3, 8)
X = add(A, B, [[i, j], [i, j]] -> [i, j])
Y = mul(X, B, [[i, j], [i, j]] -> [i, j])
lx = build(X)
ly = build(Y)
";

/// The REPL session before the measured step: a N=32 mm.
const REPL_SETUP: &[&str] = &[
    "A = tensor([32, 32])",
    "B = tensor([32, 32])",
    "C = tensor([32, 32])",
    "init(C, 0)",
    "P = vmul(A, B, [[i, k], [k, j]])",
    "C = add(C, P, [[i, j], ] -> [i, j])",
    "l = build(C)",
];

/// The measured REPL step: a transformation line, then its C, then a verified run.
const REPL_STEP: [&str; 3] = ["l2 = interchange(l, 2, 3)", ":c l2", ":run l2"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn eval(src: &str, state: &State) -> State {
    teml::lang::eval_with(src, "bench.teml", state, &Stdlib::get()).unwrap_or_else(|e| panic!("{e}"))
}

fn nest(s: &State, name: &str) -> Nest {
    match s.get(name) {
        Some(Value::Nest(n)) => n.clone(),
        other => panic!("{name} is not a loop nest: {other:?}"),
    }
}

fn w(s: &str) -> ArgVal {
    ArgVal::Word(s.into())
}

fn i(x: i64) -> ArgVal {
    ArgVal::Int(x)
}

fn eval_files(c: &mut Criterion) {
    let mut g = c.benchmark_group("eval");
    g.sampling_mode(SamplingMode::Flat).sample_size(10);
    for file in ["scripts/pluto/bmm.teml", "scripts/paper/helm.teml"] {
        let path = root().join(file);
        let stem = file.trim_end_matches(".teml").replace('/', "_").replace("scripts_", "");
        for (mode, unchecked) in [("checked", false), ("unchecked", true)] {
            let state = State { unchecked, ..State::new() };
            // Ten runs of the slowest (bmm, checked: about 0.65 s) take their time.
            g.measurement_time(Duration::from_secs(if unchecked { 2 } else { 7 }));
            g.bench_function(format!("{stem}/{mode}"), |b| {
                b.iter(|| {
                    teml::pipeline::eval_file(&path, black_box(&state)).unwrap_or_else(|e| panic!("{e}"))
                })
            });
        }
    }
    g.finish();
}

fn transformations(c: &mut Criterion) {
    let s = eval(MM, &State::new());
    let unchecked = State { unchecked: true, ..s.clone() };
    let (l, s8, lx, ly) = (nest(&s, "l"), nest(&s, "s8"), nest(&s, "lx"), nest(&s, "ly"));
    let mut g = c.benchmark_group("transform");
    g.sampling_mode(SamplingMode::Flat).sample_size(10).measurement_time(Duration::from_secs(1));
    g.warm_up_time(Duration::from_millis(300));
    // (builtin, arguments of ops::call, the same rewrite without the check)
    type Pure<'a> = Box<dyn Fn() -> teml::Result<Nest> + 'a>;
    let cases: Vec<(&str, Vec<ArgVal>, Pure)> = vec![
        ("stripmine", vec![w("l"), i(1), i(32)], Box::new(|| transform::stripmine(&s, &l, 1, 32))),
        ("interchange", vec![w("l"), i(2), i(3)], Box::new(|| transform::interchange(&l, 2, 3))),
        ("fuse_outer", vec![w("lx"), w("ly"), i(2)], Box::new(|| transform::fuse_outer(&lx, &ly, 2))),
        ("unroll", vec![w("s8"), i(4)], Box::new(|| transform::unroll(&s, &s8, 4))),
        ("parallelize", vec![w("l"), i(1)], Box::new(|| transform::parallelize(&l, 1))),
        ("vectorize", vec![w("l"), i(3)], Box::new(|| transform::vectorize(&l, 3, 0))),
    ];
    for (name, args, pure) in &cases {
        g.bench_function(format!("{name}/call_checked"), |b| {
            b.iter(|| teml::ops::call(black_box(&s), name, black_box(args)).unwrap_or_else(|e| panic!("{e}")))
        });
        g.bench_function(format!("{name}/rewrite_only"), |b| {
            b.iter(|| pure().unwrap_or_else(|e| panic!("{e}")))
        });
    }
    // tile(l, 32): three strip-mines and the interchanges, each a core builtin, from Rhai.
    let lib = Stdlib::get();
    let args = [w("l"), i(32)];
    g.measurement_time(Duration::from_secs(3));
    for (mode, state) in [("stdlib_checked", &s), ("stdlib_unchecked", &unchecked)] {
        g.bench_function(format!("tile/{mode}"), |b| {
            b.iter(|| {
                lib.call(black_box(state), "tile", &args)
                    .expect("tile is in the stdlib")
                    .unwrap_or_else(|e| panic!("{e}"))
            })
        });
    }
    g.finish();
}

fn codegen(c: &mut Criterion) {
    let mut g = c.benchmark_group("codegen");
    g.sampling_mode(SamplingMode::Flat).sample_size(10).measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_millis(300));
    for k in ["mttkrp", "gconv"] {
        let s = teml::pipeline::eval_file(&root().join(format!("scripts/paper/{k}.teml")), &State::new())
            .unwrap_or_else(|e| panic!("{e}"));
        let req = &s.kernels[0];
        let named: Vec<(Name, Nest)> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
        g.bench_function(format!("paper_{k}"), |b| {
            b.iter(|| {
                teml::codegen::generate(black_box(&s), k, black_box(&named)).unwrap_or_else(|e| panic!("{e}"))
            })
        });
    }
    g.finish();
}

fn compile(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cc = Compiler::detect().unwrap_or_else(|e| panic!("{e}")).with_cache_dir(dir.path());
    let flags = Flags::default();
    let s = teml::pipeline::eval_file(&root().join("scripts/paper/mttkrp.teml"), &State::new())
        .unwrap_or_else(|e| panic!("{e}"));
    let req = &s.kernels[0];
    let named: Vec<(Name, Nest)> = req.names.iter().cloned().zip(req.nests.iter().cloned()).collect();
    let source = teml::codegen::generate(&s, "mttkrp", &named).unwrap_or_else(|e| panic!("{e}")).source;
    assert!(!cc.compile(&source, &flags).unwrap_or_else(|e| panic!("{e}")).cached);

    let mut g = c.benchmark_group("compile");
    g.sampling_mode(SamplingMode::Flat).sample_size(10).measurement_time(Duration::from_secs(2));
    g.warm_up_time(Duration::from_millis(300));
    g.bench_function("paper_mttkrp/cached", |b| {
        b.iter(|| {
            let r = cc.compile(black_box(&source), &flags).unwrap_or_else(|e| panic!("{e}"));
            assert!(r.cached);
        })
    });
    // A comment makes each source new: the key misses, the compiler runs.
    let mut n = 0u64;
    g.bench_function("paper_mttkrp/uncached", |b| {
        b.iter_batched(
            || {
                n += 1;
                format!("// bench {n}\n{source}")
            },
            |src| {
                let r = cc.compile(&src, &flags).unwrap_or_else(|e| panic!("{e}"));
                assert!(!r.cached);
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn repl(c: &mut Criterion) {
    let fresh = || {
        let mut r = Repl::new(State::new(), Mode::Teml);
        for line in REPL_SETUP {
            r.handle(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        }
        r
    };
    let after = |k: usize| {
        move || {
            let mut r = fresh();
            for line in &REPL_STEP[..k] {
                r.handle(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            }
            r
        }
    };
    // Warm the compile cache: the step measured is the one a user repeats.
    after(3)();

    let mut g = c.benchmark_group("repl");
    g.sampling_mode(SamplingMode::Flat).sample_size(10).measurement_time(Duration::from_secs(2));
    g.warm_up_time(Duration::from_millis(300));
    for (k, name) in ["transform_line", "c", "run"].iter().enumerate() {
        let line = REPL_STEP[k];
        g.bench_function(*name, |b| {
            b.iter_batched(
                after(k),
                |mut r| r.handle(line).unwrap_or_else(|e| panic!("{line}: {e}")),
                BatchSize::PerIteration,
            )
        });
    }
    g.bench_function("step", |b| {
        b.iter_batched(
            after(0),
            |mut r| {
                for line in REPL_STEP {
                    r.handle(line).unwrap_or_else(|e| panic!("{line}: {e}"));
                }
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn main() {
    // The REPL runs kernels with its default options: the worker and the cache come from the
    // environment. A private cache keeps the user's untouched.
    let cache = tempfile::tempdir().unwrap();
    // SAFETY: no other thread runs yet.
    unsafe {
        std::env::set_var("TEML_WORKER", env!("CARGO_BIN_EXE_teml"));
        std::env::set_var("TEML_CACHE_DIR", cache.path());
    }
    let mut c = Criterion::default().configure_from_args();
    eval_files(&mut c);
    transformations(&mut c);
    codegen(&mut c);
    compile(&mut c);
    repl(&mut c);
    c.final_summary();
}
