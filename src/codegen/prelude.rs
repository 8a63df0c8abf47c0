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
        128 if dtype == DType::Double || dtype.is_integer() => ("__SSE2__", "_mm"),
        128 => ("__SSE__", "_mm"),
        _ => ("", ""),
    };
    let plain = format!("*({vt} *)p = v;");
    let body = if isa.is_empty() {
        format!("  {plain}\n")
    } else {
        let (suffix, m) = match dtype {
            DType::Double => ("pd", "d"),
            DType::Float => ("ps", ""),
            _ => (
                if bits == 128 {
                    "si128"
                } else if bits == 256 {
                    "si256"
                } else {
                    "si512"
                },
                "i",
            ),
        };
        format!(
            "#if defined({isa})\n  {prefix}_stream_{suffix}(({ptr} *)p, (__m{bits}{m})v);\n#else\n  {plain}\n#endif\n",
            ptr = if dtype.is_integer() { format!("__m{bits}i") } else { ty.to_string() }
        )
    };
    format!("static inline void teml_stream_{vt}(void *p, {vt} v)\n{{\n{body}}}\n")
}

/// Orders a thread's streaming stores before what it does next (they are weakly ordered).
pub(super) const STREAM_FENCE: &str =
    "static inline void teml_stream_fence(void)\n{\n#if defined(__SSE__)\n  _mm_sfence();\n#endif\n}\n";

/// The name of the vector type of `w` lanes of `dtype`: `teml_d8` is 8 doubles, `teml_f16` 16
/// floats, `teml_i32x8` 8 i32s.
pub(super) fn vtype(dtype: DType, w: usize) -> String {
    match dtype {
        DType::Float => format!("teml_f{w}"),
        DType::Double => format!("teml_d{w}"),
        other => format!("teml_{}x{w}", other.name()),
    }
}

/// The function that reads `w` contiguous elements of `from` as a vector of `to` lanes:
/// `teml_widen_bf16_f8`.
pub(super) fn widen_name(from: DType, to: DType, w: usize) -> String {
    format!("teml_widen_{}_{}", from.name(), vtype(to, w).trim_start_matches("teml_"))
}

/// The C of [`widen_name`]: the elements loaded as a vector of their own type (unaligned, may
/// alias), converted lane by lane (`__builtin_convertvector`: GCC 9 and Clang); a bf16 is the
/// high half of its float, so widened by a shift. With AVX2 this is one `vpmovzxwd` and one
/// `vpslld` per 8 bf16s, one `vpmovsxbd` (i8) or `vpmovzxbd` (u8) per 8 bytes.
pub(super) fn widen_helper(from: DType, to: DType, w: usize) -> String {
    let (vt, name) = (vtype(to, w), widen_name(from, to, w));
    let (src, bytes, align) = (from.c_name(), w * from.size(), from.size());
    let narrow = format!("teml_{}x{w}_in_memory", from.name());
    let mut c = format!(
        "typedef {src} {narrow} __attribute__((vector_size({bytes}), aligned({align}), may_alias));
"
    );
    if from == DType::Bf16 {
        let wide = format!("teml_u32x{w}_bits");
        let _ = writeln!(c, "typedef uint32_t {wide} __attribute__((vector_size({})));", w * 4);
        let _ = writeln!(
            c,
            "static inline {vt} {name}(const {src} *p) {{ return ({vt})(__builtin_convertvector(*(const {narrow} *)p, {wide}) << 16); }}"
        );
    } else {
        let _ = writeln!(
            c,
            "static inline {vt} {name}(const {src} *p) {{ return __builtin_convertvector(*(const {narrow} *)p, {vt}); }}"
        );
    }
    c
}

/// `text` (an element of `dtype` as stored) as a value of its compute type: a 16-bit float
/// converted to float; an integer or a float is its own value (C widens the 8-bit integers).
pub(super) fn loaded(dtype: DType, text: &str) -> String {
    match dtype {
        DType::Bf16 => format!("teml_bf16_to_float({text})"),
        DType::F16 => format!("teml_fp16_to_float({text})"),
        _ => text.to_string(),
    }
}

/// `value` (of `dtype`'s compute type) as stored in an element of `dtype`: a 16-bit float
/// rounded to nearest even; an integer narrowed as C converts.
pub(super) fn stored(dtype: DType, value: &str) -> String {
    match dtype {
        DType::Bf16 => format!("teml_float_to_bf16({value})"),
        DType::F16 => format!("teml_float_to_fp16({value})"),
        _ => value.to_string(),
    }
}

/// The 16-bit float types' patterns and their conversions (docs/types.md). bf16 is the high
/// half of a float: widening is a shift, narrowing rounds to nearest even (a NaN stays NaN).
pub(super) const BF16: &str = "typedef uint16_t teml_bf16;  /* a bfloat16's 16-bit pattern */\n\
static inline float teml_bf16_to_float(teml_bf16 x) { union { uint32_t u; float f; } c = { (uint32_t)x << 16 }; return c.f; }\n\
static inline teml_bf16 teml_float_to_bf16(float f)\n{\n  \
union { float f; uint32_t u; } c = { f };\n  \
if ((c.u & 0x7fffffffu) > 0x7f800000u) return (teml_bf16)((c.u >> 16) | 0x40u);  /* NaN */\n  \
return (teml_bf16)((c.u + 0x7fffu + ((c.u >> 16) & 1u)) >> 16);  /* to nearest, ties to even */\n}\n";

/// IEEE half: through the compiler's `_Float16` where it has one (F16C or AVX512-FP16
/// instructions at `-march=native`), else in integer arithmetic.
pub(super) const F16: &str = "typedef uint16_t teml_fp16;  /* an IEEE half's 16-bit pattern */\n\
#if defined(__FLT16_MAX__)\n\
static inline float teml_fp16_to_float(teml_fp16 x) { union { teml_fp16 u; _Float16 h; } c = { x }; return (float)c.h; }\n\
static inline teml_fp16 teml_float_to_fp16(float f) { union { _Float16 h; teml_fp16 u; } c = { (_Float16)f }; return c.u; }\n\
#else\n\
static inline float teml_fp16_to_float(teml_fp16 x)\n{\n  \
uint32_t s = (uint32_t)(x & 0x8000u) << 16, e = (x >> 10) & 0x1fu, m = x & 0x3ffu;\n  \
union { uint32_t u; float f; } c;\n  \
if (e == 0) { float v = (float)m * 5.9604644775390625e-8f; return s ? -v : v; }\n  \
c.u = s | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13));\n  \
return c.f;\n}\n\
static inline teml_fp16 teml_float_to_fp16(float f)\n{\n  \
union { float f; uint32_t u; } c = { f };\n  \
uint32_t s = (c.u >> 16) & 0x8000u, a = c.u & 0x7fffffffu;\n  \
if (a > 0x7f800000u) return (teml_fp16)(s | 0x7e00u);\n  \
if (a >= 0x477ff000u) return (teml_fp16)(s | 0x7c00u);\n  \
if (a < 0x38800000u) {\n    \
float v = (c.f < 0 ? -c.f : c.f) * 16777216.0f; uint32_t m = (uint32_t)v; float r = v - (float)m;\n    \
if (r > 0.5f || (r == 0.5f && (m & 1u))) m++;\n    \
return (teml_fp16)(s | m);\n  }\n  \
return (teml_fp16)(s | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));\n}\n\
#endif\n";

#[derive(Default)]
pub(super) struct Helpers {
    /// The element types of the kernel's tensors (their typedefs and conversions).
    pub(super) types: BTreeSet<DType>,
    pub(super) min: bool,
    pub(super) max: bool,
    pub(super) floordiv: bool,
    /// Vector types used: (element type, lanes).
    pub(super) vtypes: BTreeSet<(DType, usize)>,
    /// Broadcasts of a whole scalar expression used.
    pub(super) splats: BTreeSet<(DType, usize)>,
    /// Sums of the lanes of a vector used (partial sums stored).
    pub(super) hsums: BTreeSet<(DType, usize)>,
    /// Reads widened into lanes of a wider type: (stored type, lane type, lanes).
    pub(super) widens: BTreeSet<(DType, DType, usize)>,
    /// Dot-product groups (`dot`): (broadcast operand's type, lanes operand's type, lanes).
    pub(super) dots: BTreeSet<(DType, DType, usize)>,
    /// Dot-product groups read from a buffer packed in groups: as `dots`.
    pub(super) grouped_dots: BTreeSet<(DType, DType, usize)>,
    /// AMX tile products used (`amx`): "BF16", "INT8".
    pub(super) amx: BTreeSet<&'static str>,
    /// A zero of these types (the elements of a last, partial group past its end).
    pub(super) zeros: BTreeSet<DType>,
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
    if helpers.types.iter().any(|d| !matches!(d, DType::Double | DType::Float)) {
        src.push_str("#include <stdint.h>\n");
        if helpers.types.contains(&DType::Bf16) {
            src.push_str(BF16);
        }
        if helpers.types.contains(&DType::F16) {
            src.push_str(F16);
        }
        src.push('\n');
    }
    if helpers.math {
        src.push_str("#include <math.h>\n");
        if !helpers.packs && helpers.streams.is_empty() {
            src.push('\n');
        }
    }
    if !helpers.streams.is_empty() || !helpers.dots.is_empty() || !helpers.grouped_dots.is_empty() {
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
    src.push_str(&super::amx::prelude(&helpers.amx, super::amx::model()));
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
        for (from, to, w) in &helpers.widens {
            src.push_str(&widen_helper(*from, *to, *w));
        }
        for (x, y, w) in &helpers.dots {
            src.push_str(&super::dot::dot_helper(*x, *y, *w));
        }
        for x in &helpers.zeros {
            let _ = writeln!(src, "static const {} teml_zero_{} = 0;", x.c_name(), x.name());
        }
        for (x, y, w) in &helpers.grouped_dots {
            src.push_str(&super::dot::grouped_dot_helper(*x, *y, *w));
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
