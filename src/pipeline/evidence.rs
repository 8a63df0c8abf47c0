//! The verification record: what checked a kernel, at which size, and what checked the
//! full-size binary, the one that is timed (docs/verification.md). A kernel is *verified* only
//! when its full-size binary was compared with something independent of its own
//! transformation: the reference interpreter, the expression oracle, or the untransformed
//! program compiled on its own.

use serde::Serialize;
use std::path::PathBuf;

/// Where the reference interpreter ran the kernel's untransformed statements.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "at", rename_all = "snake_case")]
pub enum ReferenceCheck {
    /// At the full size: the binary that is timed was compared in full.
    FullSize,
    /// At a reduced size (`N=40`), where the program builds the same path (the same chain of
    /// builtin calls for every nest of the kernel).
    Reduced {
        /// The constants that were reduced.
        size: String,
    },
    /// Not used: at the reduced size the program builds another path than at full size.
    Refused {
        /// The constants that were reduced.
        size: String,
        /// How the paths differ.
        why: String,
    },
}

impl ReferenceCheck {
    /// Where the reference ran, in words: `full size`, `reduced size (N=40)`, `reduced size
    /// (N=30) not used: why` (`reduced size` alone for the reduced-size run's own report).
    pub fn describe(&self) -> String {
        match self {
            ReferenceCheck::FullSize => "full size".to_string(),
            ReferenceCheck::Reduced { size } if size.is_empty() => "reduced size".to_string(),
            ReferenceCheck::Reduced { size } => format!("reduced size ({size})"),
            ReferenceCheck::Refused { size, why } => format!("reduced size ({size}) not used: {why}"),
        }
    }
}

/// What compared the full-size binary's outputs with the program's meaning.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum FullSizeCheck {
    /// The reference interpreter, every element of every written tensor.
    Interpreter,
    /// The expression oracle, at sampled elements of every written tensor.
    Oracle {
        /// Elements compared, over all written tensors.
        samples: usize,
    },
    /// Every element, against the untransformed program compiled on its own with other flags
    /// (so that one compiler defect cannot pass both).
    Untransformed {
        /// The flags of that build.
        flags: String,
    },
    /// Every element, against the rewritten program (a lifted assignment as its sequence of
    /// single contractions, untransformed) compiled on its own with other flags: a chain, where
    /// the program as written is too costly to run and the rewrite itself was checked against
    /// it at a reduced size.
    Rewritten {
        /// The flags of that build.
        flags: String,
        /// Why the program as written could not check it.
        why: String,
    },
    /// Nothing: the full-size binary is not verified.
    Nothing {
        /// Why nothing could check it.
        why: String,
    },
}

impl FullSizeCheck {
    /// Something independent of the kernel's transformation checked the full-size binary.
    pub fn checked(&self) -> bool {
        !matches!(self, FullSizeCheck::Nothing { .. })
    }

    /// What checked the full-size binary, in words; `None` for the interpreter at full size
    /// (the report's "full size" says it).
    pub fn describe(&self) -> Option<String> {
        match self {
            FullSizeCheck::Interpreter => None,
            FullSizeCheck::Oracle { samples } => Some(format!(
                "full-size kernel checked at {samples} sampled elements against the expression oracle"
            )),
            FullSizeCheck::Untransformed { flags } => Some(format!(
                "full-size kernel checked in full against the untransformed program compiled on its own ({flags})"
            )),
            FullSizeCheck::Rewritten { flags, why } => Some(format!(
                "full-size kernel checked in full against the rewritten program (its single contractions, untransformed) \
                 compiled on its own ({flags}), the rewrite itself against the expression as written at a reduced size \
                 (verified as a chain: {why})"
            )),
            FullSizeCheck::Nothing { why } => Some(format!("full-size kernel not checked ({why})")),
        }
    }
}

impl CompilerDefect {
    /// The defect in words, for reports.
    pub fn describe(&self) -> String {
        let cc = self.working_compiler.as_ref().map_or(String::new(), |c| format!("CC={} ", c.display()));
        let what = if self.crashed {
            format!("built a binary that crashed ({})", self.mismatch)
        } else {
            format!("computed {}", self.mismatch)
        };
        let valid = if self.unoptimized_verifies { "valid C, which verifies at -O0" } else { "valid C" };
        format!(
            "compiler defect: {} with `{}` {what} from {valid} ({}); built with `{cc}{}` instead",
            self.compiler,
            self.failing_flags,
            self.reproducer.display(),
            self.working_flags.join(" ")
        )
    }
}

/// The binary that was checked: timing runs exactly this one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Artifact {
    /// The shared object.
    pub so_path: PathBuf,
    /// Its C source.
    pub c_path: PathBuf,
    /// SHA-256 of the C source (hex, first 16 digits).
    pub source_hash: String,
    /// SHA-256 of the data the kernel started from (hex, first 16 digits): timing starts from
    /// the same.
    pub inputs_hash: String,
    /// The compiler's path and version line.
    pub compiler: String,
    /// The optimization flags it was built with.
    pub flags: String,
}

/// The C compiler computed a wrong result from valid C, or built a binary that crashed: the same
/// source built with other flags verified, and the kernel runs (and is timed) with those.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CompilerDefect {
    /// The compiler (path and version line).
    pub compiler: String,
    /// The flags whose build did not verify.
    pub failing_flags: String,
    /// The first mismatch of that build, or its crash (`kernel crashed: SIGSEGV`).
    pub mismatch: String,
    /// That build crashed (`mismatch` says how) instead of computing wrong values.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub crashed: bool,
    /// The flags whose build verified, and that the kernel now uses (their words).
    pub working_flags: Vec<String>,
    /// The compiler of that build where it is another one (clang), else `None`: the same.
    pub working_compiler: Option<PathBuf>,
    /// The reproducer: the C source both builds were made from.
    pub reproducer: PathBuf,
    /// The same C built without optimization (`-O0`) verified; false where that build could
    /// not tell (it ran past the time limit).
    pub unoptimized_verifies: bool,
}

/// Everything that was checked of one kernel.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evidence {
    /// Where the reference interpreter ran.
    pub reference: ReferenceCheck,
    /// What checked the full-size binary.
    pub full_size: FullSizeCheck,
    /// The full-size binary.
    pub artifact: Option<Artifact>,
    /// A compiler defect found and avoided on the way, if any.
    pub compiler_defect: Option<CompilerDefect>,
}

impl Evidence {
    /// One line for reports: what checked the kernel, at which size.
    pub fn describe(&self) -> String {
        let reference = self.reference.describe();
        let mut s = match self.full_size.describe() {
            Some(f) => format!("{reference}; {f}"),
            None => reference,
        };
        if let Some(d) = &self.compiler_defect {
            s.push_str(&format!("; {}", d.describe()));
        }
        s
    }
}

/// SHA-256 of `source`, the first 16 hex digits.
pub fn source_hash(source: &str) -> String {
    use sha2::Digest;
    short(sha2::Sha256::digest(source.as_bytes()).as_slice())
}

/// SHA-256 (the first 16 hex digits) of the data each parameter of `kernel` starts from in
/// `store` (name, extents and values, in parameter order).
pub fn inputs_hash(kernel: &crate::codegen::CKernel, store: &crate::interp::Buffers) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for p in &kernel.params {
        let from = p.accessed();
        h.update(from.as_bytes());
        if let Some(t) = store.get(from) {
            for d in &t.dims {
                h.update((*d as u64).to_le_bytes());
            }
            for x in &t.data {
                h.update(x.to_le_bytes());
            }
        }
    }
    short(h.finalize().as_slice())
}

/// The first 8 bytes of a digest, in hex.
fn short(digest: &[u8]) -> String {
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_not_checked_and_says_why() {
        let e = Evidence {
            reference: ReferenceCheck::Reduced { size: "N=40".into() },
            full_size: FullSizeCheck::Nothing { why: "no checker".into() },
            artifact: None,
            compiler_defect: None,
        };
        assert!(!e.full_size.checked());
        assert_eq!(e.describe(), "reduced size (N=40); full-size kernel not checked (no checker)");
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["reference"]["at"], "reduced");
        assert_eq!(j["full_size"]["by"], "nothing");
    }

    #[test]
    fn source_hash_is_sixteen_hex_digits() {
        let h = source_hash("int x;");
        assert_eq!(h.len(), 16);
        assert!(h.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(h, source_hash("int y;"));
    }
}
