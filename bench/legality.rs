//! How long the legality check takes on each optimization path: Table 2 (scripts/pluto/) and
//! Sec. 5.3 (scripts/paper/). For each file: the time to evaluate it with every step checked
//! (what a user waits for at `teml check`), against evaluating it unchecked, and the time of
//! one check of each kernel's final nests. Medians of several runs; no thresholds.
//!
//! `cargo bench --bench legality`

use std::time::{Duration, Instant};
use teml::ir::State;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    println!(
        "| path | steps checked | evaluate, checked | evaluate, unchecked | one check of the kernel's nests | verdict |"
    );
    println!("|---|---|---|---|---|---|");
    for dir in ["scripts/pluto", "scripts/paper"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("teml"))
            .collect();
        files.sort();
        for f in files {
            let reps = 5;
            let time = |unchecked: bool| {
                median(
                    (0..reps)
                        .map(|_| {
                            let t = Instant::now();
                            let s = State { unchecked, ..State::new() };
                            teml::pipeline::eval_file(&f, &s).unwrap_or_else(|e| panic!("{e}"));
                            t.elapsed()
                        })
                        .collect(),
                )
            };
            let (checked, unchecked) = (time(false), time(true));
            let state = teml::pipeline::eval_file(&f, &State::new()).unwrap();
            let src = std::fs::read_to_string(&f).unwrap();
            let steps = src
                .lines()
                .filter(|l| {
                    [
                        "stripmine",
                        "interchange",
                        "fuse_outer",
                        "fuse_inner",
                        "unroll",
                        "parallelize",
                        "vectorize",
                        "tile",
                    ]
                    .iter()
                    .any(|b| l.contains(&format!("{b}(")))
                })
                .count();
            let mut verdicts = Vec::new();
            let one = median(
                (0..reps)
                    .map(|_| {
                        verdicts.clear();
                        let t = Instant::now();
                        for req in &state.kernels {
                            for n in &req.nests {
                                verdicts.push(match teml::ops::explore::legal(&state, n) {
                                    Ok(v) => teml::ops::explore::describe(&v),
                                    Err(e) => e,
                                });
                            }
                        }
                        t.elapsed()
                    })
                    .collect(),
            );
            verdicts.dedup();
            println!(
                "| {} | {steps} | {:.1} ms | {:.1} ms | {:.1} ms | {} |",
                f.strip_prefix(root).unwrap().display(),
                checked.as_secs_f64() * 1e3,
                unchecked.as_secs_f64() * 1e3,
                one.as_secs_f64() * 1e3,
                verdicts.join("; ")
            );
        }
    }
}
