//! The C spelling of every name a kernel uses.

use super::*;

/// Words a teml name cannot be in C: the keywords of C89 to C23 and GNU C, the names the
/// generated code and `<string.h>` declare.
pub(super) const C_RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "int8_t",
    "uint8_t",
    "int32_t",
    "uint16_t",
    "uint32_t",
    "while",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Bool",
    "_Complex",
    "_Generic",
    "_Imaginary",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "_BitInt",
    "_Decimal32",
    "_Decimal64",
    "_Decimal128",
    "alignas",
    "alignof",
    "bool",
    "constexpr",
    "false",
    "nullptr",
    "static_assert",
    "thread_local",
    "true",
    "typeof",
    "typeof_unqual",
    "asm",
    "__asm__",
    "__typeof__",
    "__inline__",
    "__restrict",
    "__restrict__",
    "__attribute__",
    "__extension__",
    "__label__",
    "__thread",
    "__int128",
    "__builtin_va_list",
    "__func__",
    "__FUNCTION__",
    "__PRETTY_FUNCTION__",
    "args",
    "memset",
    "memcpy",
    "malloc",
    "free",
    "abort",
    "fputs",
    "stderr",
    "stdout",
    "FILE",
    "size_t",
    "NULL",
    "main",
];

/// The C spelling of every name a kernel uses, decided once per kernel. A name stays as it is
/// unless it is a C keyword (or a name the generated code uses: `args`, `memset`, `teml_*`,
/// the kernel's), is not a C identifier, or is already the spelling of another name (a tensor
/// named like an iterator or a named constant: iterators and constants keep theirs). Such a
/// name gets a suffix: `do` is `do_`, a tensor `i` beside iterator `i` is `i_`, then `_2`,
/// `_3`, ... where those are taken too.
#[derive(Clone, Debug, Default)]
pub(super) struct CNames {
    /// Iterators and named constants (one namespace: an iterator is never a constant).
    pub(super) vars: BTreeMap<Name, String>,
    /// Tensors and scalars.
    pub(super) tensors: BTreeMap<Name, String>,
}

impl CNames {
    pub(super) fn new<'a>(
        kernel: &str,
        vars: impl Iterator<Item = &'a Name>,
        tensors: impl Iterator<Item = &'a Name>,
    ) -> CNames {
        let reserved = |s: &str| C_RESERVED.contains(&s) || s.starts_with("teml_") || s == kernel;
        let all: Vec<(bool, Name)> =
            vars.map(|v| (false, v.clone())).chain(tensors.map(|t| (true, t.clone()))).collect();
        // Every name the kernel uses, and the spellings decided: a new one takes none of them.
        let mut used: BTreeSet<String> = all.iter().map(|(_, n)| n.to_string()).collect();
        let mut kept: BTreeSet<String> = BTreeSet::new();
        let mut out = CNames::default();
        let mut renamed = Vec::new();
        for (is_tensor, n) in &all {
            let map = if *is_tensor { &mut out.tensors } else { &mut out.vars };
            if map.contains_key(n) {
                continue;
            }
            if is_c_ident(n) && !reserved(n) && kept.insert(n.to_string()) {
                map.insert(n.clone(), n.to_string());
            } else {
                renamed.push((*is_tensor, n.clone()));
            }
        }
        for (is_tensor, n) in renamed {
            let map = if is_tensor { &mut out.tensors } else { &mut out.vars };
            if map.contains_key(&n) {
                continue;
            }
            let mut base: String =
                n.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
            if !base.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') || base.starts_with("teml_") {
                base.insert(0, 'x');
            }
            let spelling = std::iter::once(format!("{base}_"))
                .chain((2..).map(|k| format!("{base}_{k}")))
                .find(|c| !reserved(c) && !used.contains(c))
                .unwrap_or_default();
            used.insert(spelling.clone());
            map.insert(n, spelling);
        }
        out
    }

    /// The C spelling of an iterator or named constant.
    pub(super) fn var<'a>(&'a self, v: &'a str) -> &'a str {
        self.vars.get(v).map_or(v, |s| s.as_str())
    }

    /// The C spelling of a tensor.
    pub(super) fn tensor<'a>(&'a self, t: &'a str) -> &'a str {
        self.tensors.get(t).map_or(t, |s| s.as_str())
    }
}
