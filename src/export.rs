//! `teml export`: a verified kernel taken home. For each kernel of a program, a directory
//! gets (docs/export.md):
//!
//! - `NAME.c` and `NAME.h`: `int NAME(int64_t N, ..., const double *A, ..., double *C)`, one
//!   `int64_t` per named constant the kernel uses, then one typed pointer per tensor (`const`
//!   for the ones it only reads), returning 0, or [`ERR_SIZE`] for sizes it was not made for,
//!   or [`ERR_NULL`] for a null pointer. The header documents each argument's shape, element
//!   type, layout and use, and the script, path, compiler and flags that made it.
//! - `libNAME.so` and `libNAME.a`, compiled with the compiler and flags teml verified with;
//!   `NAME.pc` (pkg-config) and a `Makefile` that rebuilds them;
//! - `NAME.py`: a Python module (ctypes, nothing to compile) whose `NAME(...)` takes numpy
//!   arrays, checks shapes, dtypes and contiguity, allocates outputs it is not given and
//!   returns them.
//!
//! **Sizes.** A kernel is generated at the program's sizes. It takes its sizes at run time
//! where the path allows: the program evaluated again at two other sizes (legality checked
//! there as everywhere) gives the same C, up to the `#define`s of the named constants, so the
//! C reads the sizes only through those names, which become the function's arguments (C99
//! variably modified types). Otherwise (a strip-mine without `min` whose factor must divide a
//! size, an unroll by a size, code generation choosing by size) the sizes are baked in and
//! checked at entry.
//!
//! **State.** The function is reentrant: every buffer it needs (packed panels, contracted
//! temporaries, layouts) is allocated per call by the generated code; OpenMP threads follow
//! `OMP_NUM_THREADS` (or `omp_set_num_threads`).

use crate::codegen::CKernel;
use crate::ir::{DType, Name, State};
use crate::pipeline::{self, Flags, KernelRef, Pipeline, Program, RunOptions};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The value an exported function returns for sizes it was not made for.
pub const ERR_SIZE: i32 = 1;
/// The value an exported function returns for a null pointer.
pub const ERR_NULL: i32 = 2;

/// What to export.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The meta-program.
    pub program: PathBuf,
    /// Named constants (`-D`).
    pub defines: BTreeMap<Name, i64>,
    /// Tuning parameters fixed by their text (`--param`).
    pub params: BTreeMap<String, String>,
    /// Skip the legality checks (verification still runs).
    pub unchecked: bool,
    /// The tensors `--result` and `--temporary` declared.
    pub roles: crate::ir::Roles,
    /// Only these kernels (their names), all when empty.
    pub kernels: Vec<String>,
    /// The directory to write.
    pub out: PathBuf,
    /// Compiler flags (teml's defaults unless given).
    pub flags: Flags,
    /// Also write a Rust crate with a safe wrapper.
    pub rust: bool,
    /// The exported function's name, for a single kernel (its own name otherwise).
    pub name: Option<String>,
}

/// How an exported kernel takes its sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sizes {
    /// Sizes given at run time, each from 1 to its maximum here (the largest value at which
    /// the path, its C `int` ranges and its stack buffers were checked), in the order of the
    /// kernel's constants; an empty list for a kernel without named constants.
    RunTime(Vec<(String, i64)>),
    /// Only these, checked at entry; why.
    Baked(Vec<(String, i64)>, String),
}

/// How a kernel takes its sizes, in words.
pub fn describe(sizes: &Sizes) -> String {
    match sizes {
        Sizes::RunTime(m) if m.is_empty() => "sizes at run time".to_string(),
        Sizes::RunTime(m) => {
            let l: Vec<String> = m.iter().map(|(n, v)| format!("{n}<={v}")).collect();
            format!("sizes at run time ({})", l.join(", "))
        }
        Sizes::Baked(b, why) => {
            let l: Vec<String> = b.iter().map(|(n, v)| format!("{n}={v}")).collect();
            format!("sizes baked in ({}): {why}", l.join(", "))
        }
    }
}

/// One exported kernel.
#[derive(Clone, Debug)]
pub struct Exported {
    /// The function's name.
    pub name: String,
    /// How it takes its sizes.
    pub sizes: Sizes,
    /// The files written.
    pub files: Vec<PathBuf>,
}

/// Where a kernel comes from, for its header.
#[derive(Clone, Debug, Default)]
pub struct About {
    /// The program (or the REPL session).
    pub program: String,
    /// The named constants and parameters it was evaluated with (`-D N=64`, `--param ...`).
    pub with: Vec<String>,
    /// Compiler flags.
    pub flags: Flags,
    /// Also write a Rust crate (`rust/NAME/`) with a safe wrapper over the static library.
    pub rust: bool,
    /// What verified the kernel (the verification record in words), for its header.
    pub verification: Option<String>,
}

/// Exports the kernels of `o.program`: each is verified first (a kernel that does not verify is
/// not exported), then written and compiled into `o.out`.
pub fn export(o: &ExportOptions) -> Result<Vec<Exported>, String> {
    let program = Program::declaring(
        &o.program,
        o.defines.clone(),
        o.unchecked,
        crate::ir::Params { values: o.params.clone(), ..Default::default() },
        pipeline::script_env_with(RunOptions::default(), true),
        o.roles.clone(),
    );
    let opts = RunOptions { flags: o.flags.clone(), ..RunOptions::default() };
    let pipe = Pipeline::new(program, opts).map_err(|e| e.with_hint().to_string())?;
    let state = pipe.state().clone();
    if state.kernels.is_empty() {
        return Err(format!(
            "{}: the program has no codegen statement: nothing to export",
            o.program.display()
        ));
    }
    let names: Vec<String> = (0..state.kernels.len()).map(|k| public_name(&state, k)).collect();
    for want in &o.kernels {
        if !names.contains(want) {
            return Err(format!("--kernel: expected one of {}, found `{want}`", names.join(", ")));
        }
    }
    let mut with: Vec<String> = o.defines.iter().map(|(n, v)| format!("-D {n}={v}")).collect();
    with.extend(o.params.iter().map(|(n, v)| format!("--param {n}={v}")));
    let about = About {
        program: o.program.display().to_string(),
        with,
        flags: o.flags.clone(),
        rust: o.rust,
        verification: None,
    };
    let chosen: Vec<usize> =
        (0..names.len()).filter(|k| o.kernels.is_empty() || o.kernels.contains(&names[*k])).collect();
    if o.name.is_some() && chosen.len() != 1 {
        return Err(format!(
            "--name: expected one kernel to name, found {} ({}); choose one with --kernel",
            chosen.len(),
            chosen.iter().map(|k| names[*k].as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut out = Vec::new();
    for k in chosen {
        let name = o.name.as_ref().unwrap_or(&names[k]);
        out.push(export_one(&pipe, &KernelRef::Codegen(k), name, &o.out, &about)?);
    }
    Ok(out)
}

/// Exports one kernel of a pipeline (a program's `codegen`, or a REPL session's nest) as `name`
/// into `dir`, after verifying it.
pub fn export_one(
    pipe: &Pipeline,
    which: &KernelRef,
    name: &str,
    dir: &Path,
    about: &About,
) -> Result<Exported, String> {
    if !crate::ir::is_c_ident(name) {
        return Err(format!("expected a C identifier as the kernel's name, found `{name}`"));
    }
    let state = pipe.state();
    let req = which.request(state).map_err(|e| e.to_string())?;
    let at = req.at.clone().unwrap_or_else(|| format!("`{name}`"));
    let run = pipe.run(which).map_err(|e| format!("{at}: kernel `{name}`: {e}"))?;
    if run.verified.is_none() {
        let what =
            if run.report.worst.is_some() { "does not match the reference" } else { "was not verified" };
        return Err(format!("{at}: kernel `{name}` {what} ({}): not exported", run.report.summary().trim()));
    }
    // The libraries are built as the kernel was verified: with the flags that avoided a
    // compiler defect, where one was found.
    let mut about = about.clone();
    about.verification = Some(run.report.verification.clone());
    if let Some(d) = &run.report.evidence.compiler_defect {
        if let Some(cc) = &d.working_compiler {
            return Err(format!(
                "{at}: kernel `{name}` verifies only when built by another compiler ({}): not exported; export it \
                 with that compiler as `cc`",
                cc.display()
            ));
        }
        about.flags = Flags { opt: d.working_flags.clone() };
    }
    let about = &about;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let compiler = crate::runtime::Compiler::detect().map_err(|e| e.to_string())?;
    let inner = format!("{name}_kernel");
    let kernel = generated(state, which, &inner)?;
    let sizes = sizes_of(pipe, which, &inner, &kernel)?;
    let files = write(about, dir, &req, name, &kernel, &sizes, &compiler)?;
    Ok(Exported { name: name.to_string(), sizes, files })
}

/// The exported function's name: the kernel's (`codegen(l, "mm")`, else its nests'), else
/// `kernelK`.
fn public_name(state: &State, k: usize) -> String {
    let label = state.kernel_label(k);
    if crate::ir::is_c_ident(&label) { label } else { format!("kernel{}", k + 1) }
}

/// The C of kernel `which` of `state`, its function named `inner`.
fn generated(state: &State, which: &KernelRef, inner: &str) -> Result<CKernel, String> {
    let req = which.request(state).map_err(|e| e.to_string())?;
    crate::codegen::generate(state, inner, &req.named()).map_err(|e| e.to_string())
}

/// The kernel's C without the `#ifndef C / #define C v / #endif` blocks of its named constants.
fn without_defines(kernel: &CKernel) -> String {
    let mut s = kernel.source.clone();
    for c in &kernel.const_c_names {
        if let Some(at) = s.find(&format!("#ifndef {c}\n#define {c} ")) {
            let end = s[at..].find("#endif\n").map_or(at, |e| at + e + "#endif\n".len());
            s.replace_range(at..end, "");
        }
    }
    s
}

/// Whether kernel `which` takes its sizes at run time (see the module's doc).
fn sizes_of(pipe: &Pipeline, which: &KernelRef, inner: &str, kernel: &CKernel) -> Result<Sizes, String> {
    let state = pipe.state();
    let bound: Vec<(String, i64)> =
        kernel.consts.iter().map(|c| (c.to_string(), state.constant(c).unwrap_or(0))).collect();
    if bound.is_empty() {
        return Ok(Sizes::RunTime(Vec::new()));
    }
    let baked = |why: String| Ok(Sizes::Baked(bound.clone(), why));
    // Legality for every size: isl, parametric in the named constants.
    if state.unchecked {
        return baked("the path was not checked (--unchecked)".into());
    }
    let req = which.request(state).map_err(|e| e.to_string())?;
    for (n, nest) in req.names.iter().zip(&req.nests) {
        match crate::analysis::decide(state, nest) {
            Ok(Ok(crate::analysis::Verdict::AllSizes)) => {}
            Ok(Ok(crate::analysis::Verdict::TheseSizes(at))) => {
                return baked(format!("`{n}` is proven legal at {at} only"));
            }
            Ok(Err(e)) => return baked(format!("`{n}` is not legal for every size: {}", e.message)),
            Err(e) => return baked(format!("the legality of `{n}` for every size cannot be decided: {e}")),
        }
    }
    let here = without_defines(kernel);
    // The same C at other sizes, evaluated again (its `int` ranges and stack buffers checked
    // there): `at(scale)` is `None` where it holds, else why not.
    let at = |other: &dyn Fn(i64) -> i64| -> Option<String> {
        let consts: BTreeMap<Name, i64> =
            bound.iter().map(|(n, v)| (Name::from(n.as_str()), other(*v).max(1))).collect();
        let words: Vec<String> = consts.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let there = match pipe.program().eval_with(&consts) {
            Ok(s) => s,
            Err(e) => {
                let first = e.to_string().lines().next().unwrap_or_default().to_string();
                return Some(format!("the path does not hold at {}: {first}", words.join(", ")));
            }
        };
        match generated(&there, which, inner) {
            Ok(c) if without_defines(&c) == here => None,
            Ok(_) => Some(format!("code generation writes other C at {}", words.join(", "))),
            Err(e) => Some(format!("no kernel at {}: {e}", words.join(", "))),
        }
    };
    for other in [|v: i64| v + 1, |v: i64| v / 2 + 3] {
        if let Some(why) = at(&other) {
            return baked(why);
        }
    }
    // The largest sizes that hold: the program's doubled while the same C is generated and
    // every check passes there (at most 2^31 - 1 each); the exported function refuses larger
    // ones with TEML_ERR_SIZE.
    let max = i32::MAX as i64;
    let mut k = 0u32;
    let started = std::time::Instant::now();
    while k < 31 && started.elapsed() < std::time::Duration::from_secs(10) {
        let next = k + 1;
        if bound.iter().any(|(_, v)| v.max(&1).checked_shl(next).is_none_or(|x| x > max)) {
            break;
        }
        if at(&|v: i64| v.max(1) << next).is_some() {
            break;
        }
        k = next;
    }
    // The last doubling that held: nothing larger was checked.
    let maxima = bound.iter().map(|(n, v)| (n.clone(), v.max(&1) << k)).collect();
    Ok(Sizes::RunTime(maxima))
}

/// The C spelling of a parameter's pointer type in the public function.
fn c_pointer(dtype: DType, written: bool) -> String {
    format!("{}{} *", if written { "" } else { "const " }, public_c_type(dtype))
}

/// The C type of an element in the public header: a 16-bit float is its pattern, `uint16_t`
/// (docs/types.md); the others as the kernel stores them.
fn public_c_type(dtype: DType) -> &'static str {
    match dtype {
        DType::Bf16 | DType::F16 => "uint16_t",
        d => d.c_name(),
    }
}

/// The element type in the header's words: `bf16 (uint16_t patterns)`, `float`.
fn public_type_words(dtype: DType) -> String {
    match dtype {
        DType::Bf16 | DType::F16 => format!("{dtype} (uint16_t patterns)"),
        d => d.c_name().to_string(),
    }
}

/// A parameter's shape in words, e.g. `[N][N]`.
fn shape(p: &crate::codegen::Param) -> String {
    if p.dims.is_empty() {
        "scalar (one element)".into()
    } else {
        p.dims.iter().map(|d| format!("[{d}]")).collect()
    }
}

fn write(
    about: &About,
    dir: &Path,
    req: &crate::ir::KernelRequest,
    name: &str,
    kernel: &CKernel,
    sizes: &Sizes,
    compiler: &crate::runtime::Compiler,
) -> Result<Vec<PathBuf>, String> {
    let flags: Vec<String> = about.flags.opt.clone();
    let c = library_source(name, kernel, sizes)?;
    let h = header(about, req, name, kernel, sizes, compiler);
    let put = |file: &str, text: &str| -> Result<PathBuf, String> {
        let p = dir.join(file);
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        Ok(p)
    };
    let mut files = vec![put(&format!("{name}.c"), &c)?, put(&format!("{name}.h"), &h)?];
    // The libraries, with the compiler and flags the kernel was verified with.
    files.extend(libraries(dir, name, compiler, &flags)?);
    let cc = compiler.path().display().to_string();
    let openmp = if flags.iter().any(|f| f.contains("openmp")) { " -fopenmp" } else { "" };
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    files.push(put(
        &format!("{name}.pc"),
        &format!(
            "prefix={}\n\nName: {name}\nDescription: the teml kernel {name} (see {name}.h)\nVersion: {}\n\
             Cflags: -I${{prefix}}\nLibs: -L${{prefix}} -Wl,-rpath,${{prefix}} -l{name}{openmp} -lm\n",
            abs.display(),
            env!("CARGO_PKG_VERSION")
        ),
    )?);
    files.push(put("Makefile", &makefile(&kernel_names_in(dir, name)?, &cc, &flags, openmp))?);
    files.push(put(&format!("{name}.py"), &python(name, kernel, sizes))?);
    if about.rust {
        files.extend(rust_crate(dir, name, kernel, sizes, openmp)?);
    }
    Ok(files)
}

/// The library's C: the kernel's function made static (no entry point; the sizes its first
/// arguments where they are given at run time), then the public function, which checks the
/// sizes and the pointers before it calls it.
fn library_source(name: &str, kernel: &CKernel, sizes: &Sizes) -> Result<String, String> {
    let inner = &kernel.name;
    let run_time = matches!(sizes, Sizes::RunTime(_));
    let mut body = if run_time { without_defines(kernel) } else { kernel.source.clone() };
    if let Some(at) = body.find(&format!("void {}(void **args)", crate::codegen::ENTRY)) {
        body.truncate(at);
    }
    let size_params: Vec<String> = kernel.const_c_names.iter().map(|c| format!("int {c}, ")).collect();
    let from = format!("\nvoid {inner}(");
    let to = format!("\nstatic void {inner}({}", if run_time { size_params.concat() } else { String::new() });
    if !body.contains(&from) {
        return Err(format!("internal error: the generated C has no function `{inner}`"));
    }
    body = body.replacen(&from, &to, 1);

    // The public function.
    let arg = |c: &str| if run_time { c.to_string() } else { format!("teml_{c}") };
    let mut args: Vec<String> = kernel.const_c_names.iter().map(|c| format!("int64_t {}", arg(c))).collect();
    args.extend(kernel.params.iter().map(|p| format!("{}{}", c_pointer(p.dtype, p.written), p.c_name)));
    let mut c = String::new();
    let _ = writeln!(c, "/* {name}: exported by teml {} (see {name}.h). */", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(c, "#include <stdint.h>\n#include \"{name}.h\"\n");
    c.push_str(&body);
    let _ = writeln!(c, "int {name}({})\n{{", args.join(", "));
    match sizes {
        Sizes::RunTime(maxima) => {
            for (cn, (_, top)) in kernel.const_c_names.iter().zip(maxima) {
                let _ = writeln!(c, "  if ({cn} < 1 || {cn} > {top}) return TEML_ERR_SIZE;");
            }
        }
        Sizes::Baked(b, _) => {
            for (cn, (_, v)) in kernel.const_c_names.iter().zip(b) {
                let _ = writeln!(c, "  if (teml_{cn} != {v}) return TEML_ERR_SIZE;");
            }
        }
    }
    if !kernel.params.is_empty() {
        let nulls: Vec<String> = kernel.params.iter().map(|p| format!("!{}", p.c_name)).collect();
        let _ = writeln!(c, "  if ({}) return TEML_ERR_NULL;", nulls.join(" || "));
    }
    let mut call: Vec<String> = if run_time {
        kernel.const_c_names.iter().map(|c| format!("(int){c}")).collect()
    } else {
        Vec::new()
    };
    call.extend(
        kernel.params.iter().zip(&kernel.casts).map(|(p, t)| format!("({t})(uintptr_t){}", p.c_name)),
    );
    let _ = writeln!(c, "  {inner}({});\n  return TEML_OK;\n}}", call.join(", "));

    Ok(c)
}

/// The header: the program, the path, the compiler and flags, the verification, the sizes, each
/// argument, and the public function's declaration.
fn header(
    about: &About,
    req: &crate::ir::KernelRequest,
    name: &str,
    kernel: &CKernel,
    sizes: &Sizes,
    compiler: &crate::runtime::Compiler,
) -> String {
    let flags = &about.flags.opt;
    let header_args: Vec<String> = kernel
        .const_c_names
        .iter()
        .map(|c| format!("int64_t {c}"))
        .chain(kernel.params.iter().map(|p| format!("{}{}", c_pointer(p.dtype, p.written), p.c_name)))
        .collect();
    let mut h = String::new();
    let guard = format!("TEML_EXPORT_{}_H", name.to_uppercase());
    let _ = writeln!(h, "/* {name}: a kernel exported by teml {}.", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(h, " *");
    let _ = writeln!(h, " * Program: {} ({})", about.program, req.at.as_deref().unwrap_or("its nest"));
    if !about.with.is_empty() {
        let _ = writeln!(h, " * With: {}", about.with.join(" "));
    }
    let _ = writeln!(h, " * Path (verified against the untransformed program before export):");
    let none = std::collections::BTreeSet::new();
    for (n, nest) in req.names.iter().zip(&req.nests) {
        let mut w = crate::ir::history::Writer::new(&none);
        match w.name_as(&nest.history, n) {
            Some(_) => {
                for l in &w.lines {
                    let _ = writeln!(h, " *   {}", l.replace("*/", "* /"));
                }
            }
            None => {
                let _ = writeln!(h, " *   {n}: (no history)");
            }
        }
    }
    let _ = writeln!(h, " * Compiler: {}", compiler.identity().replace("*/", "* /"));
    let _ = writeln!(h, " * Flags: {} -fPIC", flags.join(" "));
    if let Some(v) = &about.verification {
        let _ = writeln!(h, " * Verification: {}", v.replace("*/", "* /"));
    }
    match sizes {
        Sizes::RunTime(maxima) => {
            let list: Vec<String> = maxima.iter().map(|(n, v)| format!("1 <= {n} <= {v}")).collect();
            let _ = writeln!(
                h,
                " * Sizes: given at run time, {} (legality proven for every size by isl; the C `int` ranges and \
                 stack buffers checked up to these maxima); other values return TEML_ERR_SIZE and touch nothing.",
                if list.is_empty() { "none".to_string() } else { list.join(", ") }
            );
        }
        Sizes::Baked(b, why) => {
            let list: Vec<String> = b.iter().map(|(n, v)| format!("{n} = {v}")).collect();
            let _ = writeln!(
                h,
                " * Sizes: baked in, {} only ({}); other values return TEML_ERR_SIZE and touch nothing.",
                list.join(", "),
                why.replace("*/", "* /")
            );
        }
    }
    let _ = writeln!(
        h,
        " * Threads: OpenMP (OMP_NUM_THREADS, or omp_set_num_threads). Reentrant: every buffer it\n \
         * needs is allocated per call.\n *\n * Arguments (every tensor row-major and contiguous):"
    );
    for c in &kernel.const_c_names {
        let _ = writeln!(h, " *   {c}: the named constant {c}");
    }
    for p in &kernel.params {
        let usage = match (p.written, p.fresh) {
            (false, _) => "read".to_string(),
            (true, true) => "written (its values at entry are not read)".to_string(),
            (true, false) => "read and written".to_string(),
        };
        let over =
            p.holds.as_ref().map(|x| format!("; holds {x} at entry, {} at exit", p.name)).unwrap_or_default();
        let _ = writeln!(h, " *   {}: {} {}, {usage}{over}", p.c_name, public_type_words(p.dtype), shape(p));
    }
    let _ =
        writeln!(h, " * Returns TEML_OK (0), TEML_ERR_SIZE ({ERR_SIZE}) or TEML_ERR_NULL ({ERR_NULL}).\n */");
    let _ = writeln!(h, "#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n");
    let _ = writeln!(
        h,
        "#ifndef TEML_OK\n#define TEML_OK 0\n#define TEML_ERR_SIZE {ERR_SIZE}\n#define TEML_ERR_NULL {ERR_NULL}\n#endif\n"
    );
    let _ = writeln!(h, "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");
    let _ = writeln!(h, "int {name}({});\n", header_args.join(", "));
    let _ = writeln!(h, "#ifdef __cplusplus\n}}\n#endif\n\n#endif");

    h
}

/// The shared and the static library, built in `dir` with the compiler and flags the kernel was
/// verified with.
fn libraries(
    dir: &Path,
    name: &str,
    compiler: &crate::runtime::Compiler,
    flags: &[String],
) -> Result<Vec<PathBuf>, String> {
    let cc = compiler.path().display().to_string();
    let so = format!("lib{name}.so");
    let a = format!("lib{name}.a");
    let obj = format!("{name}.o");
    let run = |args: Vec<String>| -> Result<(), String> {
        let out = std::process::Command::new(&args[0])
            .args(&args[1..])
            .current_dir(dir)
            .output()
            .map_err(|e| format!("cannot run `{}`: {e}", args[0]))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("`{}` failed:\n{}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
        }
    };
    let base: Vec<String> =
        std::iter::once(cc.clone()).chain(flags.iter().cloned()).chain(["-fPIC".into()]).collect();
    run([base.clone(), vec!["-shared".into(), "-o".into(), so.clone(), format!("{name}.c"), "-lm".into()]]
        .concat())?;
    run([base.clone(), vec!["-c".into(), "-o".into(), obj.clone(), format!("{name}.c")]].concat())?;
    run(vec!["ar".into(), "rcs".into(), a.clone(), obj.clone()])?;
    let _ = std::fs::remove_file(dir.join(&obj));
    Ok(vec![dir.join(&so), dir.join(&a)])
}

/// The kernels already exported to `dir` (their `.c` files with a `.h` beside), `name` included.
fn kernel_names_in(dir: &Path, name: &str) -> Result<Vec<String>, String> {
    let mut names = vec![name.to_string()];
    let entries = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) == Some("c")
            && p.with_extension("h").is_file()
            && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
            && !names.iter().any(|n| n == stem)
        {
            names.push(stem.to_string());
        }
    }
    names.sort();
    Ok(names)
}

fn makefile(names: &[String], cc: &str, flags: &[String], openmp: &str) -> String {
    let mut m = format!(
        "# Rebuilds the exported kernels' libraries with the compiler and flags teml verified with.\n\
         # A C program links one in one line: cc prog.c $(pkg-config --cflags --libs ./NAME.pc)\n\
         CC = {cc}\nCFLAGS = {} -fPIC\nLDLIBS ={openmp} -lm\n\n",
        flags.join(" ")
    );
    let libs: Vec<String> = names.iter().flat_map(|n| [format!("lib{n}.so"), format!("lib{n}.a")]).collect();
    let _ = writeln!(m, "all: {}\n", libs.join(" "));
    for n in names {
        let _ = writeln!(
            m,
            "lib{n}.so: {n}.c {n}.h\n\t$(CC) $(CFLAGS) -shared -o $@ {n}.c $(LDLIBS)\n\n\
             lib{n}.a: {n}.c {n}.h\n\t$(CC) $(CFLAGS) -c -o {n}.o {n}.c\n\tar rcs $@ {n}.o\n\trm -f {n}.o\n"
        );
    }
    let _ = writeln!(m, "clean:\n\trm -f {}\n\n.PHONY: all clean", libs.join(" "));
    m
}

/// A Rust `i64` expression for extent `d`, the named constants being variables.
fn rust_expr(d: &crate::ir::Expr) -> String {
    let mut s = String::new();
    let _ = d.write_with(&mut s, &|a, f| match a {
        crate::ir::Atom::Var(v) => write!(f, "{v}"),
        crate::ir::Atom::Min(xs) | crate::ir::Atom::Max(xs) => {
            let n = if matches!(a, crate::ir::Atom::Min(_)) { "min" } else { "max" };
            let mut it = xs.iter().map(rust_expr);
            let first = it.next().unwrap_or_default();
            write!(f, "({first}){}", it.map(|x| format!(".{n}({x})")).collect::<String>())
        }
        crate::ir::Atom::FloorDiv(x, k) => write!(f, "({}).div_euclid({k})", rust_expr(x)),
    });
    format!("({s})")
}

/// `rust/NAME/`: a crate whose `NAME(sizes, slices)` checks the sizes and the slices' lengths
/// and calls the static library (linked by its build script from the directory above).
fn rust_crate(
    dir: &Path,
    name: &str,
    kernel: &CKernel,
    sizes: &Sizes,
    openmp: &str,
) -> Result<Vec<PathBuf>, String> {
    let root = dir.join("rust").join(name);
    std::fs::create_dir_all(root.join("src"))
        .map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let abs = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let rs_type = |d: DType| match d {
        DType::Double => "f64",
        DType::Float => "f32",
        DType::Bf16 | DType::F16 => "u16",
        DType::I32 => "i32",
        DType::I8 => "i8",
        DType::U8 => "u8",
    };
    let consts: Vec<String> = kernel.const_c_names.clone();
    let mut ffi: Vec<String> = consts.iter().map(|c| format!("{c}: i64")).collect();
    ffi.extend(
        kernel.params.iter().map(|p| {
            format!("{}: *{} {}", p.c_name, if p.written { "mut" } else { "const" }, rs_type(p.dtype))
        }),
    );
    let mut args: Vec<String> = consts.iter().map(|c| format!("{c}: i64")).collect();
    args.extend(
        kernel
            .params
            .iter()
            .map(|p| format!("{}: &{}[{}]", p.c_name, if p.written { "mut " } else { "" }, rs_type(p.dtype))),
    );
    let mut lib = format!(
        "//! `{name}`: a kernel exported by teml {} (its header `{name}.h`, one directory up, says\n\
         //! which path made it, with which compiler and flags). Every tensor is a row-major,\n\
         //! contiguous slice.\n#![allow(non_snake_case)]\n\n\
         /// Why a call was refused.\n#[derive(Debug, Clone, PartialEq, Eq)]\npub enum Error {{\n\
         \x20   /// A size the kernel does not take (below 1, or not the one it was made for).\n\
         \x20   Size {{ name: &'static str, found: i64, expected: String }},\n\
         \x20   /// A slice whose length is not its tensor's number of elements.\n\
         \x20   Length {{ name: &'static str, found: usize, expected: i64 }},\n\
         \x20   /// The kernel returned this code.\n    Kernel(i32),\n}}\n\n\
         impl std::fmt::Display for Error {{\n    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{\n\
         \x20       match self {{\n\
         \x20           Error::Size {{ name, found, expected }} => write!(f, \"size {{name}}={{found}}: expected {{expected}}\"),\n\
         \x20           Error::Length {{ name, found, expected }} => write!(f, \"{{name}}: expected {{expected}} elements, found {{found}}\"),\n\
         \x20           Error::Kernel(c) => write!(f, \"the kernel returned {{c}}\"),\n        }}\n    }}\n}}\n\n\
         impl std::error::Error for Error {{}}\n\n\
         unsafe extern \"C\" {{\n    #[link_name = \"{name}\"]\n    fn teml_{name}({}) -> i32;\n}}\n\n",
        env!("CARGO_PKG_VERSION"),
        ffi.join(", ")
    );
    let _ = writeln!(lib, "/// Runs `{name}` (see its header for each argument's shape and use).");
    let _ = writeln!(lib, "pub fn {name}({}) -> Result<(), Error> {{", args.join(", "));
    for c in &consts {
        match sizes {
            Sizes::Baked(b, _) => {
                let v = b.iter().find(|(n, _)| n == c).map_or(0, |(_, v)| *v);
                let _ = writeln!(
                    lib,
                    "    if {c} != {v} {{\n        return Err(Error::Size {{ name: \"{c}\", found: {c}, expected: \"{v} (baked in)\".into() }});\n    }}"
                );
            }
            Sizes::RunTime(maxima) => {
                let top = maxima.iter().find(|(n, _)| n == c).map_or(i32::MAX as i64, |(_, v)| *v);
                let _ = writeln!(
                    lib,
                    "    if !(1..={top}).contains(&{c}) {{\n        return Err(Error::Size {{ name: \"{c}\", found: {c}, expected: \"1..={top}\".into() }});\n    }}"
                );
            }
        }
    }
    for p in &kernel.params {
        let n = if p.dims.is_empty() {
            "1".to_string()
        } else {
            p.dims.iter().map(rust_expr).collect::<Vec<_>>().join(" * ")
        };
        let _ = writeln!(
            lib,
            "    if {0}.len() as i64 != {n} {{\n        return Err(Error::Length {{ name: \"{0}\", found: {0}.len(), expected: {n} }});\n    }}",
            p.c_name
        );
    }
    let mut call: Vec<String> = consts.clone();
    call.extend(
        kernel
            .params
            .iter()
            .map(|p| format!("{}.{}()", p.c_name, if p.written { "as_mut_ptr" } else { "as_ptr" })),
    );
    let _ = writeln!(
        lib,
        "    // SAFETY: every slice holds its tensor's elements (checked above), and the kernel\n    \
         // touches nothing else.\n    match unsafe {{ teml_{name}({}) }} {{\n        0 => Ok(()),\n        c => Err(Error::Kernel(c)),\n    }}\n}}",
        call.join(", ")
    );
    let omp = if openmp.is_empty() {
        String::new()
    } else {
        "    println!(\"cargo:rustc-link-lib=gomp\");\n".to_string()
    };
    let build = format!(
        "// Links the static library teml built (lib{name}.a) from the export directory.\nfn main() {{\n    \
         println!(\"cargo:rustc-link-search=native={}\");\n    println!(\"cargo:rustc-link-lib=static={name}\");\n{omp}    \
         println!(\"cargo:rustc-link-lib=m\");\n    println!(\"cargo:rerun-if-changed={}\");\n}}\n",
        abs.display(),
        abs.join(format!("lib{name}.a")).display()
    );
    let cargo = format!(
        "[package]\nname = \"{}\"\nversion = \"0.1.0\"\nedition = \"2024\"\ndescription = \"The teml kernel {name} (safe wrapper)\"\n\
         build = \"build.rs\"\n\n[lib]\npath = \"src/lib.rs\"\n\n[workspace]\n",
        name.replace('_', "-")
    );
    let mut files = Vec::new();
    for (f, text) in [("Cargo.toml", cargo), ("build.rs", build), ("src/lib.rs", lib)] {
        let p = root.join(f);
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        files.push(p);
    }
    Ok(files)
}

/// A Python expression for extent `d` from the sizes dict `s`.
fn py_expr(d: &crate::ir::Expr) -> String {
    let mut s = String::new();
    let _ = d.write_with(&mut s, &|a, f| match a {
        crate::ir::Atom::Var(v) => write!(f, "s[{:?}]", v.to_string()),
        crate::ir::Atom::Min(xs) | crate::ir::Atom::Max(xs) => {
            let n = if matches!(a, crate::ir::Atom::Min(_)) { "min" } else { "max" };
            let inner: Vec<String> = xs.iter().map(py_expr).collect();
            write!(f, "{n}({})", inner.join(", "))
        }
        crate::ir::Atom::FloorDiv(x, k) => write!(f, "(({}) // {k})", py_expr(x)),
    });
    s
}

fn python(name: &str, kernel: &CKernel, sizes: &Sizes) -> String {
    // bf16 has no NumPy type: its arrays are uint16 patterns (docs/types.md).
    let np_type = |d: DType| match d {
        DType::Double => "float64",
        DType::Float => "float32",
        DType::Bf16 => "uint16",
        DType::F16 => "float16",
        DType::I32 => "int32",
        DType::I8 => "int8",
        DType::U8 => "uint8",
    };
    let consts: Vec<String> = kernel.consts.iter().map(|c| c.to_string()).collect();
    let outputs: Vec<&crate::codegen::Param> = kernel.params.iter().filter(|p| p.written).collect();
    let mut py = String::new();
    let _ = writeln!(
        py,
        "\"\"\"{name}: a kernel exported by teml {} (see {name}.h for its path and flags).\n\n\
         Call `{name}({})` with numpy arrays (C-contiguous, the dtype and shape of {name}.h);\n\
         arrays it writes that are not given are allocated (zeroed) and returned.\n\"\"\"\n\
         import ctypes\nimport mmap\nimport os\n\nimport numpy as np\n\n\
         _lib = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), \"lib{name}.so\"))\n\
         _fn = _lib.{name}\n_fn.restype = ctypes.c_int\n_fn.argtypes = [{}]\n",
        env!("CARGO_PKG_VERSION"),
        kernel.params.iter().map(|p| p.name.to_string()).collect::<Vec<_>>().join(", "),
        std::iter::repeat_n("ctypes.c_int64", consts.len())
            .chain(std::iter::repeat_n("ctypes.c_void_p", kernel.params.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let params: Vec<(String, String, Vec<String>, bool, bool)> = kernel
        .params
        .iter()
        .map(|p| {
            let dims: Vec<String> = p.dims.iter().map(|d| format!("{d}")).collect();
            (p.name.to_string(), np_type(p.dtype).to_string(), dims, p.written, p.fresh)
        })
        .collect();
    let _ = writeln!(py, "_CONSTS = {consts:?}");
    let _ = writeln!(
        py,
        "_BAKED = {}",
        match sizes {
            Sizes::Baked(b, _) =>
                format!("{{{}}}", b.iter().map(|(n, v)| format!("{n:?}: {v}")).collect::<Vec<_>>().join(", ")),
            Sizes::RunTime(_) => "None".into(),
        }
    );
    let _ = writeln!(
        py,
        "# name, dtype, shape (in the named constants), written, written before read\n_PARAMS = ["
    );
    for ((n, t, dims, w, f), p) in params.iter().zip(&kernel.params) {
        let exprs: Vec<String> = p.dims.iter().map(|d| format!("lambda s: {}", py_expr(d))).collect();
        let _ = writeln!(
            py,
            "    ({n:?}, np.{t}, [{}], {:?}, {}, {}),",
            exprs.join(", "),
            dims,
            if *w { "True" } else { "False" },
            if *f { "True" } else { "False" }
        );
    }
    py.push_str("]\n\n");
    // The arrays it reads first, then those it only writes (optional: allocated when not
    // given), then the sizes, by keyword only.
    let mut sig: Vec<String> =
        kernel.params.iter().filter(|p| !(p.written && p.fresh)).map(|p| p.name.to_string()).collect();
    sig.extend(kernel.params.iter().filter(|p| p.written && p.fresh).map(|p| format!("{}=None", p.name)));
    if !consts.is_empty() {
        sig.push("*".into());
        sig.extend(consts.iter().map(|c| format!("{c}=None")));
    }
    let _ = writeln!(py, "def {name}({}):", sig.join(", "));
    let _ = writeln!(
        py,
        "    \"\"\"Runs the kernel; returns the arrays it writes ({}).\"\"\"",
        outputs.iter().map(|p| p.name.to_string()).collect::<Vec<_>>().join(", ")
    );
    let _ = writeln!(
        py,
        "    given = {{{}}}",
        kernel
            .params
            .iter()
            .map(|p| format!("{:?}: {}", p.name.to_string(), p.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        py,
        "    s = {{{}}}",
        consts.iter().map(|c| format!("{c:?}: {c}")).collect::<Vec<_>>().join(", ")
    );
    py.push_str(PY_BODY);
    py
}

/// The body of every exported Python function: sizes from the shapes, checks, the call.
const PY_BODY: &str = r#"    return _call(given, s)


def aligned_zeros(shape, dtype=np.float64, align=64):
    """A zeroed C-contiguous array whose data starts at a page boundary (so at a multiple of
    `align` bytes) and, where the system allows, on transparent huge pages: the same memory teml
    times its kernels on. numpy's own arrays start at 16 bytes here: the kernel's 64-byte vectors
    then split cache lines, a few per cent slower. Outputs the function allocates are made this
    way."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if 4096 % align == 0 and n >= 1 << 20:
        m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                m.madvise(mmap.MADV_HUGEPAGE)
            except OSError:
                pass
        return np.frombuffer(m, dtype=np.uint8, count=n).view(dtype).reshape(shape)
    buf = np.zeros(n + align, dtype=np.uint8)
    off = (-buf.ctypes.data) % align
    return buf[off:off + n].view(dtype).reshape(shape)


def _call(given, s):
    # Sizes not given come from the shapes of the arrays given (a dimension that is one named
    # constant), else from the baked-in sizes.
    for name, dtype, shape, dims, written, fresh in _PARAMS:
        a = given[name]
        if a is None:
            continue
        a = np.asarray(a) if not isinstance(a, np.ndarray) else a
        if a.ndim != max(len(dims), 1) and not (len(dims) == 0 and a.size == 1):
            raise ValueError(f"{name}: expected {len(dims)} dimensions {dims}, found shape {a.shape}")
        for d, n in zip(dims, a.shape):
            if d in _CONSTS:
                if s.get(d) is None:
                    s[d] = n
    for c in _CONSTS:
        if s.get(c) is None:
            if _BAKED is not None:
                s[c] = _BAKED[c]
            else:
                raise ValueError(f"size {c}: not given and no array shows it; pass {c}=...")
        if _BAKED is not None and s[c] != _BAKED[c]:
            raise ValueError(f"size {c}={s[c]}: this kernel was made for {c}={_BAKED[c]} only (see its header)")
        if s[c] < 1:
            raise ValueError(f"size {c}={s[c]}: expected at least 1")
    args = [ctypes.c_int64(s[c]) for c in _CONSTS]
    out = []
    keep = []
    for name, dtype, shape, dims, written, fresh in _PARAMS:
        want = tuple(int(f(s)) for f in shape) or (1,)
        a = given[name]
        if a is None:
            a = aligned_zeros(want, dtype)
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{name}: expected a numpy array, found {type(a).__name__}")
        if a.dtype != dtype:
            raise TypeError(f"{name}: expected dtype {np.dtype(dtype).name}, found {a.dtype.name}")
        if a.shape != want and not (len(dims) == 0 and a.size == 1):
            raise ValueError(f"{name}: expected shape {want} ({', '.join(dims) or 'a scalar'}), found {a.shape}")
        if not a.flags["C_CONTIGUOUS"]:
            raise ValueError(f"{name}: expected a C-contiguous array (np.ascontiguousarray), found strides {a.strides}")
        if written and not a.flags["WRITEABLE"]:
            raise ValueError(f"{name}: the kernel writes it, found a read-only array")
        keep.append(a)
        args.append(a.ctypes.data_as(ctypes.c_void_p))
        if written:
            out.append(a)
    rc = _fn(*args)
    if rc != 0:
        raise RuntimeError(f"the kernel returned {rc} (1: sizes it was not made for, 2: a null pointer)")
    return out[0] if len(out) == 1 else tuple(out)
"#;
