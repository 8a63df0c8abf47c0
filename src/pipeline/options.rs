//! How kernels run ([`RunOptions`]) and what can stop one from being reported ([`RunError`]).

use crate::ir::Name;
use crate::runtime::{self, Flags, RuntimeError, Timing};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can stop a kernel from being reported.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The meta-program cannot be turned into a kernel (an illegal mark, a missing constant).
    #[error("{0}")]
    Meta(#[from] crate::Error),
    /// Compiling, loading or running failed (compile error, crash, time-out).
    #[error("{0}")]
    Runtime(#[from] RuntimeError),
    /// Input data that does not fit, or the reference could not run.
    #[error("{0}")]
    Data(String),
}

impl RunError {
    /// An illegal transformation or a mark code generation cannot realise: the path, not the
    /// program or the machine, is at fault.
    pub fn is_refusal(&self) -> bool {
        match self {
            RunError::Meta(e) => e.is_refusal(),
            _ => false,
        }
    }
}

/// How to run kernels.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunOptions {
    /// Optimization flags (the `CFLAGS` environment variable is added by the compiler).
    pub flags: Flags,
    /// `OMP_NUM_THREADS` for the kernels.
    pub threads: Option<usize>,
    /// Timing of the kernel and of the untransformed baseline; `None` runs and verifies only.
    pub timing: Option<Timing>,
    /// Limit for one worker run (verification run, warm-up and timed runs).
    pub timeout: Duration,
    /// Input tensors from `.npy` files (`-i NAME=PATH`); they override `init` statements.
    pub inputs: BTreeMap<Name, PathBuf>,
    /// Seed of the generator that fills tensors without other data.
    pub seed: u64,
    /// The most statement instances the reference interpreter runs for one kernel.
    pub max_reference_instances: u64,
    /// The worker executable (default: found next to the current executable).
    pub worker: Option<PathBuf>,
    /// Where the C sources and shared objects are cached (default: the user's cache).
    pub cache_dir: Option<PathBuf>,
    /// A C compiler to use instead of the system's (e.g. `clang-16` for the Polly anchor of
    /// `teml bench`); `flags` go with it.
    pub compiler: Option<PathBuf>,
    /// With `timing`, also time the untransformed build of the same statements (the speedup's
    /// denominator); `teml bench` times its baseline once, on its own.
    pub time_untransformed: bool,
    /// How long one compile may take (`teml tune` gives candidates less).
    pub compile_timeout: Duration,
    /// Tensors kept whole (`-o` saves them): code generation never stores one of them per
    /// iteration of a loop (storage contraction).
    pub keep: std::collections::BTreeSet<Name>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            flags: Flags::default(),
            threads: None,
            timing: None,
            timeout: Duration::from_secs(120),
            inputs: BTreeMap::new(),
            seed: 42,
            max_reference_instances: 400_000_000,
            worker: None,
            cache_dir: None,
            compiler: None,
            time_untransformed: true,
            compile_timeout: runtime::compiler::COMPILE_TIMEOUT,
            keep: Default::default(),
        }
    }
}
