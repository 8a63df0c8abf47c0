//! The integration tests, as one test binary: each module is what was once its own file under
//! `tests/` (and its own binary, linking the whole crate again). Run one module with
//! `cargo test --release --test it MODULE::`, e.g. `cargo test --release --test it fuzz::`.

mod common;

mod affine_results;
mod amx;
mod auto;
mod auto_names;
mod bench;
mod cli;
mod codegen_golden;
mod collapse;
mod dot;
mod errors;
mod examples;
mod export;
mod focus;
mod functions;
mod fuzz;
mod in_place;
mod interp;
mod lang_errors;
mod lang_eval;
mod lang_prop;
mod lang_syntax;
mod layouts;
mod legality;
mod lift;
mod oracle;
mod pack;
mod paper_figures;
mod polybench;
mod privatize;
mod prop_safety;
mod registers;
mod repl;
mod run_kernels;
mod runtime_cache;
mod runtime_exec;
mod runtime_npy;
mod schedule_golden;
mod script_frontend;
mod sink;
mod slurm;
mod state_json;
mod stdlib_loops;
mod stdlib_tensors;
mod storage;
mod stream;
mod transform;
mod troubleshooting;
mod trust;
mod tune;
mod tutorial;
mod types;
mod verification;
