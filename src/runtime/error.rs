//! The errors of compiling, loading, running and timing kernels, and of `.npy` I/O.

use std::path::PathBuf;

/// A failure of the runtime. Every message says what was being done and, where there is one,
/// the file it concerns.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The C compiler rejected the generated source (or could not be run on it). `message`
    /// holds the compiler's diagnostics followed by the generated C lines the errors point at.
    #[error("C compilation failed:\n{message}")]
    Compile {
        /// Diagnostics and the generated source lines they refer to.
        message: String,
    },

    /// The kernel (in its worker process) was killed by a signal: a segmentation fault, a
    /// floating-point exception, an abort, ...
    #[error(
        "kernel crashed: {}{}",
        signal_name(*.signal),
        if *.unoptimized {
            ", and so did the same C built at -O0: not a defect of the compiler's optimizer (the C \
             itself or a flag other than -O is at fault: an access out of bounds, a stack too small)"
        } else {
            ""
        }
    )]
    Crashed {
        /// The signal number.
        signal: i32,
        /// The same C built without optimization (`-O0`) crashed too.
        unoptimized: bool,
    },

    /// The kernel did not finish within the time allowed; its worker process was killed.
    #[error("timed out after {secs} s")]
    TimedOut {
        /// The time allowed, in seconds.
        secs: f64,
    },

    /// Ctrl-C stopped the compile or the kernel (see [`super::interrupt`]).
    #[error("interrupted (Ctrl-C): {0} was stopped")]
    Interrupted(String),

    /// The worker process failed for another reason (the library or the symbol could not be
    /// loaded, the worker exited with an error status, its report was unreadable, ...). The
    /// message includes what the worker wrote on its standard error.
    #[error("kernel worker failed: {0}")]
    Worker(String),

    /// A run was asked for with inconsistent arguments (as many initial arrays as buffers,
    /// sizes that agree, sensible timing parameters).
    #[error("invalid kernel run: {0}")]
    InvalidRun(String),

    /// A file-system operation failed.
    #[error("{what} `{}`: {source}", path.display())]
    Io {
        /// What was being done ("creating the kernel cache directory", ...).
        what: String,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A `.npy` file that cannot be read or written as asked: a missing file, an unsupported
    /// dtype or order, corrupt data.
    #[error("{}: {message}", path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        message: String,
    },

    /// Compiler flags that cannot be split into words (an unterminated quote, ...).
    #[error("bad compiler flags in {origin}: {message}")]
    BadFlags {
        /// Where the flags come from (`CFLAGS`, a run option, ...).
        origin: String,
        /// What is wrong with them.
        message: String,
    },

    /// No usable C compiler was found.
    #[error("no usable C compiler: {0} (install gcc or clang, or set CC)")]
    NoCompiler(String),

    /// The executable that runs kernels in a child process was not found.
    #[error("cannot find the teml worker executable: {0}")]
    NoWorker(String),
}

impl RuntimeError {
    /// An [`RuntimeError::Io`] error.
    pub(crate) fn io(what: impl Into<String>, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RuntimeError::Io { what: what.into(), path: path.into(), source }
    }
}

/// The conventional name of a signal number (`SIGSEGV`, ...), or `signal N` for the others.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGFPE => "SIGFPE",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("signal {signal}"),
    };
    name.to_string()
}
