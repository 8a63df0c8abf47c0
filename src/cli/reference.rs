//! The command-line reference (`docs/cli.md`), generated from the clap definitions themselves,
//! with the environment variables teml reads: `teml cli-reference` prints it, and a test fails
//! when the file is stale (`TEML_BLESS=1` rewrites it).

use super::Cli;
use clap::CommandFactory;
use std::fmt::Write;

/// The environment variables teml reads: name, meaning.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "TEML_MACHINE",
        "the machine the rules plan for, instead of this one: `\"512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB\"`, any of its fields, and `flags WORD ...` for the CPU flags the dot-product groups and AMX tiles follow (golden files and reproducible spaces)",
    ),
    (
        "TEML_VECTOR_BITS",
        "the vector width of the generated C (0, 128, 256 or 512; 0: no explicit vectors), where `TEML_MACHINE` names none",
    ),
    (
        "TEML_AMX_MODEL",
        "`1`: a kernel's AMX tile instructions (`amx`) are printed as C functions after Intel's pseudo-code, so that the tile form runs, and is verified, on a host without AMX (for testing teml's tile form: far slower than the instructions)",
    ),
    ("TEML_CACHE_DIR", "the compile cache's folder (default: `teml` in the user's cache folder)"),
    (
        "TEML_TUNING_DB",
        "the tuning database's file (default: `teml/tuning.jsonl` in the user's cache folder)",
    ),
    (
        "TEML_ISL",
        "the isl shared library to load for the legality checks (default: `libisl.so.23` where the system keeps it)",
    ),
    (
        "TEML_ISL_MAX_OPERATIONS",
        "isl operations a legality question may take before it is answered \"cannot decide\" (default 20000000)",
    ),
    (
        "TEML_POLLY_CC",
        "the clang that builds the Polly anchor of `teml tune` and `teml bench` (default `clang-16`)",
    ),
    ("TEML_PYTHON", "the Python with numpy that `teml bench` times numpy's anchors with (default `python3`)"),
    ("TEML_HISTORY", "the REPL's history file (default: `teml/history.txt` in the user's data folder)"),
    ("TEML_HUGE_PAGES", "`0`: kernels' large buffers are never copied into huge pages"),
    ("TEML_WORKER", "the executable that runs kernels in their worker process (default: this `teml`)"),
    ("CC, CFLAGS", "the C compiler and extra flags, as the `cc` crate reads them"),
];

/// `docs/cli.md`.
pub fn cli_reference() -> String {
    let mut out = String::from(
        "# Command-line reference\n\n<!-- Generated from the clap definitions by `teml cli-reference`; \
         a test fails when this file is stale (TEML_BLESS=1 cargo test --profile ci --test it cli:: rewrites it). -->\n\n",
    );
    let root = Cli::command();
    if let Some(about) = root.get_long_about().or(root.get_about()) {
        let _ = writeln!(out, "{}\n", one_paragraph(&about.to_string()));
    }
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        command(&mut out, sub, "teml");
    }
    out.push_str("## Environment\n\n| variable | meaning |\n|---|---|\n");
    for (name, what) in ENVIRONMENT {
        let _ = writeln!(out, "| `{name}` | {} |", what.replace('|', "\\|"));
    }
    out
}

fn command(out: &mut String, c: &clap::Command, parent: &str) {
    let name = format!("{parent} {}", c.get_name());
    let _ = writeln!(out, "## `{name}`\n");
    if let Some(about) = c.get_long_about().or(c.get_about()) {
        let _ = writeln!(out, "{}\n", one_paragraph(&about.to_string()));
    }
    let mut c = c.clone().bin_name(&name);
    let usage = c.render_usage().to_string();
    let _ = writeln!(out, "```text\n{}\n```\n", usage.trim_start_matches("Usage: ").trim());
    let args: Vec<&clap::Arg> = c
        .get_arguments()
        .filter(|a| !a.is_hide_set() && a.get_id() != "help" && a.get_id() != "version")
        .collect();
    if !args.is_empty() {
        out.push_str("| argument | meaning |\n|---|---|\n");
        for a in args {
            let _ = writeln!(out, "| {} | {} |", arg_name(a), arg_help(a));
        }
        out.push('\n');
    }
    for sub in c.get_subcommands().filter(|s| !s.is_hide_set()) {
        command(out, sub, &name);
    }
}

fn arg_name(a: &clap::Arg) -> String {
    let value = a.get_value_names().map(|v| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" "));
    let takes = a.get_num_args().is_none_or(|n| n.takes_values()) && a.get_action().takes_values();
    let value =
        if takes { value.unwrap_or_else(|| a.get_id().to_string().to_uppercase()) } else { String::new() };
    let mut names = Vec::new();
    if let Some(s) = a.get_short() {
        names.push(format!("-{s}"));
    }
    if let Some(l) = a.get_long() {
        names.push(format!("--{l}"));
    }
    if names.is_empty() {
        return format!("`{value}`");
    }
    let names = names.join(", ");
    if value.is_empty() { format!("`{names}`") } else { format!("`{names} {value}`") }
}

fn arg_help(a: &clap::Arg) -> String {
    let mut help =
        a.get_long_help().or(a.get_help()).map(|h| one_paragraph(&h.to_string())).unwrap_or_default();
    let defaults: Vec<String> =
        a.get_default_values().iter().map(|v| v.to_string_lossy().to_string()).collect();
    if !defaults.is_empty() && a.get_action().takes_values() && !help.contains("(default") {
        let _ = write!(help, " (default: `{}`)", defaults.join(" "));
    }
    help.replace('|', "\\|")
}

/// A help text on one line (a table cell).
fn one_paragraph(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
