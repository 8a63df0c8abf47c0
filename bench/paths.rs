//! Side-by-side comparison of optimization paths, measured in one run on one machine:
//! for each kernel, Pluto's path (Table 2, scripts/pluto/) and the paper's improved path
//! (Sec. 5.3, scripts/paper/), each verified against the reference and timed against the
//! untransformed build of the same statements. Reports ratios, never absolute thresholds.
//!
//! `cargo bench --bench paths` (sizes: the files' defaults; `BENCH_ARGS="-D N=64"` adds
//! arguments, `BENCH_THREADS=2` sets the threads).

use std::process::Command;

struct Run {
    median_s: f64,
    base_s: f64,
    verification: String,
}

fn run(file: &str) -> Result<Run, String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_teml"));
    cmd.args(["run", file, "--time", "--json", "--threads"]);
    cmd.arg(std::env::var("BENCH_THREADS").unwrap_or_else(|_| "2".into()));
    if let Ok(extra) = std::env::var("BENCH_ARGS") {
        cmd.args(extra.split_whitespace());
    }
    let o = cmd.output().map_err(|e| e.to_string())?;
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .map_err(|e| format!("{file}: {e}: {}", String::from_utf8_lossy(&o.stderr)))?;
    if v["ok"] != true {
        return Err(format!("{file}: {}", v["error"]));
    }
    // A path may have several kernels (a transposition first): add them up.
    let ks = v["kernels"].as_array().ok_or("no kernels")?;
    let mut run = Run { median_s: 0.0, base_s: 0.0, verification: String::new() };
    for k in ks {
        run.median_s += k["median_s"].as_f64().unwrap_or(f64::NAN);
        run.base_s += k["baseline"]["median_s"].as_f64().unwrap_or(f64::NAN);
        run.verification = k["verification"].as_str().unwrap_or("").to_string();
    }
    Ok(run)
}

fn main() {
    let kernels = ["mttkrp", "interp", "helm", "gconv"];
    println!(
        "| kernel | untransformed | Pluto path (Table 2) | paper path (Sec. 5.3) | paper vs Pluto | verified |"
    );
    println!("|---|---|---|---|---|---|");
    for k in kernels {
        let pluto = run(&format!("scripts/pluto/{k}.teml"));
        let paper = run(&format!("scripts/paper/{k}.teml"));
        match (pluto, paper) {
            (Ok(p), Ok(q)) => println!(
                "| {k} | {:.2} ms | {:.2} ms ({:.2}x) | {:.2} ms ({:.2}x) | {:.2}x | {} |",
                p.base_s * 1e3,
                p.median_s * 1e3,
                p.base_s / p.median_s,
                q.median_s * 1e3,
                q.base_s / q.median_s,
                p.median_s / q.median_s,
                q.verification
            ),
            (a, b) => println!("| {k} | error: {:?} {:?} |", a.err(), b.err()),
        }
    }
}
