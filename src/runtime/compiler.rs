//! The C compiler driver and the on-disk cache of compiled kernels.
//!
//! [`Compiler::detect`] finds the system C compiler the way the `cc` crate does (honouring
//! `CC`); [`Compiler::compile`] turns one C translation unit into a shared library, or finds it
//! in the cache. The cache key is the SHA-256 of the source, the full list of compiler
//! arguments and the compiler's identity (its path and `--version` line; with `-march=native`,
//! also the host CPU), so a cached library is reused exactly when recompiling would produce the
//! same one.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

use super::RuntimeError;

/// Number of times this process has invoked the C compiler on a kernel.
static INVOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// How many times this process has run the C compiler on a kernel (cache hits do not count).
pub fn compiler_invocations() -> usize {
    INVOCATIONS.load(Ordering::SeqCst)
}

/// At most this many errors are shown with their generated source line.
const MAX_ANNOTATED_ERRORS: usize = 20;

/// Optimization flags of one compilation. The flags every kernel needs (`-fPIC -shared`) and
/// the words of the `CFLAGS` environment variable are added by [`Compiler::compile`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Flags {
    /// The optimization flags, in order (`-O3 -march=native -fopenmp` by default).
    pub opt: Vec<String>,
}

impl Default for Flags {
    fn default() -> Self {
        Flags { opt: ["-O3", "-march=native", "-fopenmp"].iter().map(|s| s.to_string()).collect() }
    }
}

impl Flags {
    /// Flags given as one string (a per-run override such as `"-O2 -fopenmp"`), split into
    /// words like a shell does (whitespace separates, quotes and backslashes group). `origin`
    /// names where the string comes from, for the error message.
    pub fn parse(words: &str, origin: &str) -> Result<Flags, RuntimeError> {
        let opt = split_words(words)
            .map_err(|message| RuntimeError::BadFlags { origin: origin.to_string(), message })?;
        Ok(Flags { opt })
    }
}

/// A compiled kernel in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compiled {
    /// The shared library.
    pub so_path: PathBuf,
    /// The C source it was compiled from (kept next to it, for inspection).
    pub c_path: PathBuf,
    /// Whether the library was found in the cache (the compiler was not run).
    pub cached: bool,
}

/// The system C compiler and the cache it compiles into.
#[derive(Clone, Debug)]
pub struct Compiler {
    /// The compiler executable.
    path: PathBuf,
    /// Environment variables to set when running it.
    env: Vec<(OsString, OsString)>,
    /// The path and the first line of `--version`.
    identity: String,
    /// The words of `CFLAGS`, appended to every compilation.
    env_flags: Vec<String>,
    /// Where compiled kernels are kept.
    cache_dir: PathBuf,
    /// How long one compile may take before the compiler is stopped (a compiler can take
    /// minutes on a 25-line kernel: gcc 12 on some vectorized stencils).
    timeout: std::time::Duration,
}

/// The default limit of one compile.
pub const COMPILE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

impl Compiler {
    /// Finds the C compiler with the `cc` crate's rules (the `CC` variable, else the platform's
    /// default), reads `CFLAGS`, and chooses the cache directory: `$TEML_CACHE_DIR` if set,
    /// else `teml` in the user's cache directory, else `teml-cache` in the temporary directory.
    pub fn detect() -> Result<Compiler, RuntimeError> {
        let tool = cc::Build::new()
            .cargo_metadata(false)
            .cargo_warnings(false)
            .emit_rerun_if_env_changed(false)
            .target(env!("TEML_TARGET"))
            .host(env!("TEML_TARGET"))
            .opt_level(3)
            .debug(false)
            .try_get_compiler()
            .map_err(|e| RuntimeError::NoCompiler(e.to_string()))?;
        let env_flags = match std::env::var("CFLAGS") {
            Ok(words) => split_words(&words)
                .map_err(|message| RuntimeError::BadFlags { origin: "CFLAGS".into(), message })?,
            Err(_) => Vec::new(),
        };
        let cache_dir = match std::env::var_os("TEML_CACHE_DIR") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => match dirs::cache_dir() {
                Some(dir) => dir.join("teml"),
                None => std::env::temp_dir().join("teml-cache"),
            },
        };
        let env = tool.get_envs().map(|(k, v)| (k.to_os_string(), v.to_os_string())).collect();
        Compiler::new(tool.path().to_path_buf(), env, env_flags, cache_dir)
    }

    /// A compiler at `path`, run with the environment variables `env`, given `env_flags` after
    /// the flags of each compilation, and caching into `cache_dir`. Fails if `path --version`
    /// cannot be run.
    pub fn new(
        path: PathBuf,
        env: Vec<(OsString, OsString)>,
        env_flags: Vec<String>,
        cache_dir: PathBuf,
    ) -> Result<Compiler, RuntimeError> {
        let output = Command::new(&path)
            .arg("--version")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| RuntimeError::NoCompiler(format!("cannot run `{}`: {e}", path.display())))?;
        if !output.status.success() {
            return Err(RuntimeError::NoCompiler(format!(
                "`{} --version` failed ({}): {}",
                path.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let version = stdout.lines().next().unwrap_or("").trim();
        let identity = format!("{} ({version})", path.display());
        Ok(Compiler { path, env, identity, env_flags, cache_dir, timeout: COMPILE_TIMEOUT })
    }

    /// The same compiler, caching into `dir` instead.
    pub fn with_timeout(mut self, timeout: std::time::Duration) -> Compiler {
        self.timeout = timeout;
        self
    }

    /// The same compiler with another cache directory.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Compiler {
        self.cache_dir = dir.into();
        self
    }

    /// The compiler executable.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The compiler's path and version line, part of every cache key.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The compiler arguments (before `-o`) of a compilation with `flags`: the optimization
    /// flags, `-fPIC -shared`, then the words of `CFLAGS`.
    pub fn arguments(&self, flags: &Flags) -> Vec<String> {
        let mut args = flags.opt.clone();
        args.push("-fPIC".into());
        args.push("-shared".into());
        args.extend(self.env_flags.iter().cloned());
        args
    }

    /// The cache key (hex SHA-256) of compiling `source` with `flags`.
    pub fn cache_key(&self, source: &str, flags: &Flags) -> String {
        let args = self.arguments(flags);
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(b"teml-kernel-cache-v1");
        field(self.identity.as_bytes());
        if args.iter().any(|a| a.contains("native")) {
            field(super::machine::Machine::host().cpu_key().as_bytes());
        }
        field(&(args.len() as u64).to_le_bytes());
        for arg in &args {
            field(arg.as_bytes());
        }
        field(source.as_bytes());
        hasher.finalize().iter().fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    /// Compiles `source` into a shared library with `flags`, or returns the cached one (without
    /// running the compiler) when this source was already compiled with these flags by this
    /// compiler. Files are written under temporary names and renamed into place, so processes
    /// sharing the cache never see a partial file.
    ///
    /// A rejected source gives [`RuntimeError::Compile`], whose message shows the diagnostics
    /// and, under them, the generated C line of each error with a caret under its column.
    pub fn compile(&self, source: &str, flags: &Flags) -> Result<Compiled, RuntimeError> {
        let key = self.cache_key(source, flags);
        let dir = &self.cache_dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| RuntimeError::io("cannot create the kernel cache directory", dir, e))?;
        let c_path = dir.join(format!("{key}.c"));
        let so_path = dir.join(format!("{key}.so"));
        if so_path.is_file() {
            if !c_path.is_file() {
                write_atomic(&c_path, source.as_bytes())?;
            }
            return Ok(Compiled { so_path, c_path, cached: true });
        }
        write_atomic(&c_path, source.as_bytes())?;

        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{key}."))
            .suffix(".so.tmp")
            .tempfile_in(dir)
            .map_err(|e| RuntimeError::io("cannot create a temporary file in", dir, e))?
            .into_temp_path();
        INVOCATIONS.fetch_add(1, Ordering::SeqCst);
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(&self.path)
            .args(self.arguments(flags))
            .arg("-o")
            .arg(&*tmp)
            .arg(&c_path)
            .arg("-lm")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            // Its own process group: a compile that runs too long is stopped with the passes
            // the driver started.
            .process_group(0)
            .spawn()
            .map_err(|e| RuntimeError::NoCompiler(format!("cannot run `{}`: {e}", self.path.display())))?;
        let stderr = child.stderr.take();
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut e) = stderr {
                let _ = std::io::Read::read_to_end(&mut e, &mut bytes);
            }
            bytes
        });
        let start = std::time::Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if super::interrupt::requested() || start.elapsed() >= self.timeout => {
                    // SAFETY: a plain system call; the group is the compiler's own.
                    unsafe {
                        libc::kill(-(child.id() as i32), libc::SIGKILL);
                    }
                    let _ = child.wait();
                    if super::interrupt::requested() {
                        return Err(RuntimeError::Interrupted(format!(
                            "the compile of {}",
                            c_path.display()
                        )));
                    }
                    return Err(RuntimeError::Compile {
                        message: format!(
                            "`{}` ran past {:.0} s on {} and was stopped (the compiler's own slowness on this kernel)",
                            self.path.display(),
                            self.timeout.as_secs_f64(),
                            c_path.display()
                        ),
                    });
                }
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(5)),
                Err(e) => {
                    return Err(RuntimeError::NoCompiler(format!(
                        "cannot wait for `{}`: {e}",
                        self.path.display()
                    )));
                }
            }
        };
        let output =
            std::process::Output { status, stdout: Vec::new(), stderr: reader.join().unwrap_or_default() };
        if !output.status.success() {
            let diagnostics = String::from_utf8_lossy(&output.stderr);
            let mut message = annotate_diagnostics(&diagnostics, &c_path, source);
            if message.trim().is_empty() {
                message = format!("`{}` {} without a diagnostic", self.path.display(), output.status);
            }
            if let Some(hint) = openmp_hint(&diagnostics, &self.arguments(flags)) {
                message.push_str(&hint);
            }
            return Err(RuntimeError::Compile { message });
        }
        tmp.persist(&so_path)
            .map_err(|e| RuntimeError::io("cannot move the compiled kernel to", &so_path, e.error))?;
        Ok(Compiled { so_path, c_path, cached: false })
    }
}

/// When a compile asked for OpenMP and the compiler's complaint is about it (Apple's clang
/// refuses `-fopenmp`; a clang without libomp cannot find `omp.h` or `-lomp`), how to go on.
fn openmp_hint(diagnostics: &str, args: &[String]) -> Option<String> {
    let asked = args.iter().any(|a| a.starts_with("-fopenmp") || a.starts_with("-qopenmp"));
    let d = diagnostics.to_lowercase();
    let about_omp = ["openmp", "omp.h", "-lomp", "-lgomp", "libomp", "libgomp"].iter().any(|k| d.contains(k));
    (asked && about_omp).then(|| {
        "\nhint: this C compiler has no usable OpenMP. Install it (Debian/Ubuntu: `apt install libomp-dev` \
         for clang, or use gcc: `CC=gcc`; macOS: `brew install libomp` and \
         `--cflags \"-O3 -Xpreprocessor -fopenmp -lomp\"`), or compile without it: \
         `--cflags \"-O3 -march=native\"` (parallel loops then run on one thread)."
            .to_string()
    })
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RuntimeError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::Builder::new()
        .prefix(".teml-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| RuntimeError::io("cannot create a temporary file in", dir, e))?;
    file.write_all(bytes).map_err(|e| RuntimeError::io("cannot write", file.path().to_path_buf(), e))?;
    file.persist(path).map_err(|e| RuntimeError::io("cannot write", path, e.error))?;
    Ok(())
}

/// The compiler's diagnostics, followed by the generated source line of each error in
/// `c_path` with a caret under the reported column.
fn annotate_diagnostics(diagnostics: &str, c_path: &Path, source: &str) -> String {
    let mut out = diagnostics.trim_end().to_string();
    let prefix = format!("{}:", c_path.display());
    let lines: Vec<&str> = source.lines().collect();
    let mut shown = 0;
    let mut omitted = 0;
    for diag in diagnostics.lines() {
        let Some(rest) = diag.strip_prefix(&prefix) else { continue };
        let Some((line, col)) = error_position(rest) else { continue };
        let Some(text) = line.checked_sub(1).and_then(|i| lines.get(i)) else { continue };
        if shown == MAX_ANNOTATED_ERRORS {
            omitted += 1;
            continue;
        }
        if shown == 0 {
            let _ = write!(out, "\n\nthe generated C at each error ({}):", c_path.display());
        }
        shown += 1;
        let _ = write!(out, "\n{}\n{line:>6} | {text}", rest.trim_start());
        if let Some(col) = col {
            // Keep the tabs of the line so that the caret lines up however tabs are shown.
            let pad: String = text
                .chars()
                .take(col.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let _ = write!(out, "\n{:>6} | {pad}^", "");
        }
    }
    if omitted > 0 {
        let _ = write!(out, "\n({omitted} more errors not shown)");
    }
    out
}

/// The line and column of a diagnostic `LINE:COL: error: ...` or `LINE: error: ...` (the part
/// after `file:`); `None` for warnings, notes and other lines.
fn error_position(rest: &str) -> Option<(usize, Option<usize>)> {
    let (line, rest) = rest.split_once(':')?;
    let line: usize = line.trim().parse().ok()?;
    let (col, rest) = match rest.split_once(':') {
        Some((col, after)) if col.trim().parse::<usize>().is_ok() => (col.trim().parse().ok(), after),
        _ => (None, rest),
    };
    let kind = rest.trim_start();
    (kind.starts_with("error:") || kind.starts_with("fatal error:")).then_some((line, col))
}

/// Splits `s` into words as a POSIX shell does, without expansions: unquoted whitespace
/// separates words, single quotes keep everything literally, double quotes keep everything but
/// `\"`, `\\`, `` \` ``, `\$` and `\<newline>`, and a backslash outside quotes keeps the next
/// character.
pub(crate) fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated single quote in `{s}`")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '`' | '$')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(format!("unterminated double quote in `{s}`")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(format!("unterminated double quote in `{s}`")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    word.push(c);
                }
                None => return Err(format!("trailing backslash in `{s}`")),
            },
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// The Polly anchor: the untransformed C through LLVM's polyhedral optimizer, as a user of
/// Polly would build it (Debian: `apt-get install clang-16 libpolly-16-dev libomp-16-dev`).
pub const POLLY_FLAGS: &str =
    "-O3 -march=native -mllvm -polly -mllvm -polly-parallel -mllvm -polly-vectorizer=stripmine -fopenmp";

/// The clang that runs Polly (`TEML_POLLY_CC`, else `clang-16`), if it compiles with Polly;
/// else why not.
pub fn polly() -> Result<PathBuf, String> {
    let cc = std::env::var("TEML_POLLY_CC").unwrap_or_else(|_| "clang-16".into());
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let src = dir.path().join("p.c");
    std::fs::write(&src, "void f(double *a, int n) { for (int i = 0; i < n; i++) a[i] += 1.0; }\n")
        .map_err(|e| e.to_string())?;
    let mut args: Vec<&str> = POLLY_FLAGS.split_whitespace().collect();
    args.extend(["-fPIC", "-shared", "-o"]);
    let out = std::process::Command::new(&cc)
        .args(&args)
        .arg(dir.path().join("p.so"))
        .arg(&src)
        .output()
        .map_err(|e| format!("`{cc}` cannot run ({e})"))?;
    if !out.status.success() {
        return Err(format!(
            "`{cc}` cannot compile with Polly: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(PathBuf::from(cc))
}

/// [`POLLY_FLAGS`] as flags.
pub fn polly_flags() -> Flags {
    Flags::parse(POLLY_FLAGS, "Polly").unwrap_or_default()
}

/// A clang on the `PATH` (the newest `clang-N`, else `clang`), if one is installed: the second
/// compiler a kernel that did not match is built with, to tell a compiler defect from a wrong
/// path.
pub fn installed_clang() -> Option<PathBuf> {
    (14..=20).rev().map(|v| format!("clang-{v}")).chain(["clang".to_string()]).find_map(|c| on_path(&c))
}

/// The file `name` in the first folder of `$PATH` that has it.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// The line that installs Polly on Debian.
pub const POLLY_INSTALL: &str = "apt-get install clang-16 libpolly-16-dev libomp-16-dev";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_a_shell() {
        assert_eq!(split_words("  -O2   -g ").unwrap(), ["-O2", "-g"]);
        assert_eq!(split_words(r#"-DX="a b" -DY='c d' e\ f ''"#).unwrap(), ["-DX=a b", "-DY=c d", "e f", ""]);
        assert_eq!(split_words(r#""a\"b\n""#).unwrap(), ["a\"b\\n"]);
        assert!(split_words("'open").is_err());
        assert!(split_words("\"open").is_err());
        assert!(split_words("end\\").is_err());
        assert_eq!(split_words("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn parses_error_positions() {
        assert_eq!(error_position("3:5: error: x"), Some((3, Some(5))));
        assert_eq!(error_position("3: error: x"), Some((3, None)));
        assert_eq!(error_position("10:1: fatal error: foo.h: No such file"), Some((10, Some(1))));
        assert_eq!(error_position("3:5: warning: x"), None);
        assert_eq!(error_position(" In function 'k':"), None);
    }

    #[test]
    fn annotates_errors_with_their_source_line() {
        let source = "int a;\n\tint b = c;\n";
        let diag = "/x/k.c: In function 'f':\n/x/k.c:2:10: error: 'c' undeclared\n/x/k.c:1:1: warning: w\n";
        let msg = annotate_diagnostics(diag, Path::new("/x/k.c"), source);
        assert!(msg.starts_with("/x/k.c: In function"), "{msg}");
        assert!(msg.contains("     2 | \tint b = c;\n       | \t        ^"), "{msg}");
        assert!(!msg.contains("     1 | int a;"), "{msg}");
    }
}
