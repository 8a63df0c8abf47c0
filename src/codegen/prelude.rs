//! The translation unit's prelude: includes, the named constants' defines, and the helpers
//! the kernel's text asked for (integer min/max/floordiv, vector types, broadcasts, lane sums,
//! lane-wise fmax/fmin, streaming stores), each printed only where used.

use super::*;

/// The name of `fmax` (`max`) or `fmin` of vectors of `w` lanes of `dtype`.
pub(super) fn extreme_name(dtype: DType, w: usize, max: bool) -> String {
    format!("teml_{}_{}", if max { "fmax" } else { "fmin" }, vtype(dtype, w))
}

/// `fmax` or `fmin` lane by lane, in the vector extensions (a comparison is a mask of the
/// lanes): C's semantics, a NaN operand yielding the other one, so that the explicit vectors
/// agree with the scalar remainder and the reference to the bit.
pub(super) fn extreme_helper(dtype: DType, w: usize, max: bool) -> String {
    let vt = vtype(dtype, w);
    let (name, cmp) = (extreme_name(dtype, w, max), if max { ">=" } else { "<=" });
    format!(
        "static inline {vt} {name}({vt} a, {vt} b) {{ __typeof__(a < b) k = (a {cmp} b) | (b != b); \
         return ({vt})((k & (__typeof__(k))a) | (~k & (__typeof__(k))b)); }}\n"
    )
}

/// The allocation of a whole-tensor layout buffer: zeroed pages straight from the system, in
/// huge pages where it gives them. (With `calloc`, each call of a kernel took a page fault per
/// 4 KiB of a fresh buffer: a padded 4096 x 4104 input cost 100 ms where the stencil took 16.)
pub(super) const LAYOUT_BUFFER: &str = "#include <sys/mman.h>\n\n\
/* A layout's buffer: zeroed pages from the system (the padding reads as zero), in 2 MiB pages\n   \
where it gives them (one page fault per 2 MiB, not per 4 KiB). */\n\
static void *teml_buffer(size_t bytes)\n{\n  \
void *p = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);\n  \
if (p == MAP_FAILED) return 0;\n  madvise(p, bytes, MADV_HUGEPAGE);\n  return p;\n}\n";

/// `teml_stream_teml_d8(p, v)`: stores vector `v` at `p` (aligned to its size) with a
/// streaming (non-temporal) store where the target has one of its width, a plain store
/// otherwise (`stream`).
pub(super) fn stream_helper(dtype: DType, w: usize) -> String {
    let (ty, vt) = (dtype.c_name(), vtype(dtype, w));
    let bits = w * dtype.size() * 8;
    let (isa, prefix) = match bits {
        512 => ("__AVX512F__", "_mm512"),
        256 => ("__AVX__", "_mm256"),
        128 if dtype == DType::Double => ("__SSE2__", "_mm"),
        128 => ("__SSE__", "_mm"),
        _ => ("", ""),
    };
    let plain = format!("*({vt} *)p = v;");
    let body = if isa.is_empty() {
        format!("  {plain}\n")
    } else {
        let (suffix, m) = if dtype == DType::Double { ("pd", "d") } else { ("ps", "") };
        format!(
            "#if defined({isa})\n  {prefix}_stream_{suffix}(({ty} *)p, (__m{bits}{m})v);\n#else\n  {plain}\n#endif\n"
        )
    };
    format!("static inline void teml_stream_{vt}(void *p, {vt} v)\n{{\n{body}}}\n")
}

/// Orders a thread's streaming stores before what it does next (they are weakly ordered).
pub(super) const STREAM_FENCE: &str =
    "static inline void teml_stream_fence(void)\n{\n#if defined(__SSE__)\n  _mm_sfence();\n#endif\n}\n";

/// The name of the vector type of `w` lanes of `dtype`: `teml_d8` is 8 doubles.
pub(super) fn vtype(dtype: DType, w: usize) -> String {
    format!("teml_{}{w}", if dtype == DType::Float { "f" } else { "d" })
}

#[derive(Default)]
pub(super) struct Helpers {
    pub(super) min: bool,
    pub(super) max: bool,
    pub(super) floordiv: bool,
    /// Vector types used: (element type, lanes).
    pub(super) vtypes: BTreeSet<(DType, usize)>,
    /// Broadcasts of a whole scalar expression used.
    pub(super) splats: BTreeSet<(DType, usize)>,
    /// Sums of the lanes of a vector used (partial sums stored).
    pub(super) hsums: BTreeSet<(DType, usize)>,
    /// `fmax` / `fmin` lane by lane: (element type, lanes, max).
    pub(super) extremes: BTreeSet<(DType, usize, bool)>,
    /// Streaming stores of vectors used (`stream`).
    pub(super) streams: BTreeSet<(DType, usize)>,
    /// A function of `<math.h>` is called (`sqrt`, `fmax`, ...).
    pub(super) math: bool,
    /// Some loop packs a tensor (the kernel allocates and copies).
    pub(super) packs: bool,
    /// Some tensor is laid out in a buffer of its own for the kernel ([`convert`]).
    pub(super) layouts: bool,
    /// The C spellings of the kernel's names.
    pub(super) names: Rc<CNames>,
}

/// The prelude: includes, the named constants' defines (an unbound one an `#error` that says
/// how to bind it), the integer helpers and the vector helpers the kernel asked for.
pub(super) fn prelude(helpers: &Helpers, state: &State, consts: &[Name], names: &CNames) -> String {
    let mut src = String::new();
    if helpers.math {
        src.push_str("#include <math.h>\n");
        if !helpers.packs && helpers.streams.is_empty() {
            src.push('\n');
        }
    }
    if !helpers.streams.is_empty() {
        src.push_str(
            "#include <stdint.h>\n#if defined(__x86_64__) || defined(__i386__)\n#include <immintrin.h>\n#endif\n",
        );
        if !helpers.packs {
            src.push('\n');
        }
    }
    if helpers.packs {
        src.push_str("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n");
        if helpers.layouts {
            src.push_str(LAYOUT_BUFFER);
        }
        src.push('\n');
    }
    for teml_name in consts {
        let c = names.var(teml_name);
        match state.constant(teml_name) {
            Some(v) => {
                let _ = writeln!(src, "#ifndef {c}\n#define {c} {v}\n#endif");
            }
            None => {
                let _ = writeln!(
                    src,
                    "#ifndef {c}\n#error \"named constant {c} is not bound: give -D {c}=INT\"\n#endif"
                );
            }
        }
    }
    if !consts.is_empty() {
        src.push('\n');
    }
    if helpers.min {
        src.push_str("static inline int teml_min(int a, int b) { return a < b ? a : b; }\n");
    }
    if helpers.max {
        src.push_str("static inline int teml_max(int a, int b) { return a > b ? a : b; }\n");
    }
    if helpers.floordiv {
        src.push_str(
            "static inline int teml_floordiv(int a, int b) { return (a >= 0 ? a : a - b + 1) / b; }\n",
        );
    }
    if helpers.min || helpers.max || helpers.floordiv {
        src.push('\n');
    }
    if !helpers.vtypes.is_empty() {
        src.push_str(
            "/* Explicit vectors (GCC/Clang vector extensions): unaligned, and allowed to alias their elements. */\n",
        );
        for (dtype, w) in &helpers.vtypes {
            let (ty, vt) = (dtype.c_name(), vtype(*dtype, *w));
            let bytes = w * dtype.size();
            let align = dtype.size();
            let _ = writeln!(
                src,
                "typedef {ty} {vt} __attribute__((vector_size({bytes}), aligned({align}), may_alias));"
            );
        }
        for (dtype, w) in &helpers.splats {
            let (ty, vt) = (dtype.c_name(), vtype(*dtype, *w));
            let _ = writeln!(src, "static inline {vt} teml_splat_{vt}({ty} x) {{ return x - ({vt}){{0}}; }}");
        }
        for (dtype, w) in &helpers.hsums {
            let (ty, vt) = (dtype.c_name(), vtype(*dtype, *w));
            let _ = writeln!(
                src,
                "static inline {ty} teml_hsum_{vt}({vt} v) {{ {ty} s = 0; for (int l = 0; l < {w}; l++) s += v[l]; return s; }}"
            );
        }
        for (dtype, w, max) in &helpers.extremes {
            src.push_str(&extreme_helper(*dtype, *w, *max));
        }
        for (dtype, w) in &helpers.streams {
            src.push_str(&stream_helper(*dtype, *w));
        }
        if !helpers.streams.is_empty() {
            src.push_str(STREAM_FENCE);
        }
        src.push('\n');
    }
    src
}
