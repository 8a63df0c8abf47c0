//! The standard library's sources (`stdlib/*.rhai`, embedded), the documentation read from
//! their `///` comments, and the table of the host helpers they are written with: what a
//! script can call besides the builtins, for the reference, completion and error messages.

use std::sync::OnceLock;

/// The files of the standard library, in load order.
pub const FILES: &[(&str, &str)] = &[
    ("stdlib/loops.rhai", include_str!("../../stdlib/loops.rhai")),
    ("stdlib/tensors.rhai", include_str!("../../stdlib/tensors.rhai")),
    ("stdlib/einsum.rhai", include_str!("../../stdlib/einsum.rhai")),
];

/// The whole library as one script.
pub(crate) fn source() -> String {
    FILES.iter().map(|(_, s)| *s).collect::<Vec<_>>().join("\n")
}

/// One documented function of the standard library (all its overloads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StdlibFn {
    /// The name.
    pub name: String,
    /// The signatures of its overloads, as declared (`tile(l, v)`).
    pub signatures: Vec<String>,
    /// The file it is defined in.
    pub file: String,
    /// Where the paper defines it (the `paper:` line of its doc comment).
    pub equation: String,
    /// The first paragraph of its doc comment.
    pub summary: String,
    /// The rest of its doc comment (the definition, written out).
    pub details: String,
    /// An example (the `example:` line of its doc comment).
    pub example: String,
}

/// Reads the public functions and their `///` doc comments from the library's sources.
fn parse_docs() -> Vec<StdlibFn> {
    let mut out: Vec<StdlibFn> = Vec::new();
    for (file, src) in FILES {
        let mut doc: Vec<String> = Vec::new();
        for line in src.lines() {
            let t = line.trim();
            if let Some(d) = t.strip_prefix("///") {
                doc.push(d.strip_prefix(' ').unwrap_or(d).to_string());
                continue;
            }
            if let Some(rest) = t.strip_prefix("fn ") {
                let sig = rest.split('{').next().unwrap_or(rest).trim().to_string();
                let name = sig.split('(').next().unwrap_or("").trim().to_string();
                let entry = describe_fn(&name, &sig, file, &doc);
                match out.iter_mut().find(|f| f.name == name) {
                    Some(f) => {
                        f.signatures.push(sig);
                        if f.summary.is_empty() {
                            *f = StdlibFn { signatures: f.signatures.clone(), ..entry };
                        }
                    }
                    None => out.push(entry),
                }
            }
            doc.clear();
        }
    }
    out
}

fn describe_fn(name: &str, sig: &str, file: &str, doc: &[String]) -> StdlibFn {
    let mut equation = String::new();
    let mut example = String::new();
    let mut paras: Vec<String> = vec![String::new()];
    for d in doc {
        if let Some(e) = d.strip_prefix("paper:") {
            equation = e.trim().to_string();
        } else if let Some(e) = d.strip_prefix("example:") {
            example = e.trim().trim_matches('`').to_string();
        } else if d.trim().is_empty() {
            paras.push(String::new());
        } else if let Some(p) = paras.last_mut() {
            if !p.is_empty() {
                p.push('\n');
            }
            p.push_str(d);
        }
    }
    let paras: Vec<String> = paras.into_iter().filter(|p| !p.trim().is_empty()).collect();
    StdlibFn {
        name: name.to_string(),
        signatures: vec![sig.to_string()],
        file: file.to_string(),
        equation,
        summary: paras.first().map(|p| p.replace('\n', " ")).unwrap_or_default(),
        details: paras.get(1..).map(|ps| ps.join("\n\n")).unwrap_or_default(),
        example,
    }
}

static DOCS: OnceLock<Vec<StdlibFn>> = OnceLock::new();

/// The documented public functions of the standard library.
pub fn functions() -> &'static [StdlibFn] {
    DOCS.get_or_init(parse_docs)
}

/// The names of the standard library's public functions.
pub(crate) fn function_names() -> Vec<String> {
    functions().iter().map(|f| f.name.clone()).collect()
}

/// The host helpers: name, signature, meaning. Not TeML builtins: they inspect values so that
/// the standard library can be written as compositions of builtins.
pub const HELPERS: &[(&str, &str, &str)] = &[
    (
        "at",
        "at(\"C\", t)",
        "the @id: form (eq. 18): t with its hole filled by C; `let D = at(\"C\", add(...))`",
    ),
    ("rank", "rank(t)", "the rank of a tensor expression (of the assigned tensor for an assignment)"),
    ("shape", "shape(t)", "the extents of t: integers, or indices for named constants (`()` where unknown)"),
    ("depth", "depth(l)", "the number of loops on the single path from the root of l"),
    ("iterators", "iterators(l)", "the iterator names along that path, outermost first (strings)"),
    ("iter", "iter(\"name\")", "the index expression of an iterator or named constant given by name"),
    (
        "fresh_iters",
        "fresh_iters(n, avoid) | fresh_iters(prefix, n, avoid)",
        "the iterators i1..in (or <prefix>1..) that are neither named constants nor summed over in the tensors (or names) of avoid",
    ),
    (
        "free_iters",
        "free_iters(t)",
        "the free iterators t carries, in order of first appearance ([] for a declared tensor)",
    ),
    (
        "carries_iters",
        "carries_iters(t)",
        "true if t carries iterators (an operation, an indexed access, a scalar): its list is omitted with ()",
    ),
    (
        "with_iters",
        "with_iters(t, I)",
        "t indexed by I (a declared tensor), or with its free iterators renamed to I position by position (an operation; eq. 14-15 via ops::operand)",
    ),
    (
        "constant",
        "constant(\"N\") | constant(\"N\", default)",
        "the value -D gave the named constant N, or (); with a default, defines N as the paper syntax's `N = 512` line does (-D overrides it) and gives its value",
    ),
    (
        "recorded",
        "recorded(p, \"name\", [args])",
        "the nest p with its history the one call name(args) (the standard library's composites end with it, so that paths show `tile(l, 32)`, not its strip-mines and interchanges)",
    ),
    (
        "lookup",
        "lookup(\"name\")",
        "the program's tensor or nest `name`, for a name Rhai reserves (`var`, `fn`, `in`, ...; generated spaces use it)",
    ),
    (
        "constant_names",
        "constant_names(ts)",
        "the named constants of σ and of the shapes of the tensors ts (strings)",
    ),
    ("stmts", "stmts(l)", "the statements of a nest, in program order"),
    ("tree", "tree(x)", "the readable tree of a tensor expression or loop nest"),
    ("paper", "paper(x)", "the paper's notation ⟨(op, S, I), [...]⟩ of a tensor expression or loop nest"),
    ("infix", "infix(t)", "a statement or expression as C writes it: `E[i1][i2] = C[i1][i2] * D[i1][i2]`"),
    (
        "fail",
        "fail(builtin, pos, role, expected, found)",
        "stops with the error `builtin: argument pos (role): expected ..., found ...`",
    ),
    ("describe", "describe(x)", "a short description of any value, for error messages"),
    (
        "legal",
        "legal(l)",
        "true if the nest keeps every dependence of its statements (docs/legality.md), else the reason with a witness (a string)",
    ),
    (
        "legal_permutations",
        "legal_permutations(l) | legal_permutations(l, d)",
        "the legal orders of the outer d loops (at most 5; all of the single path by default), each a list of levels: [1, 3, 2] puts level 3 second",
    ),
    (
        "permute",
        "permute(l, order)",
        "the nest with its outer loops in `order` (levels), checked like interchange; () where a bound forbids the order (in `.teml` too: `l2 = permute(l1, [2, 1])`)",
    ),
    ("legal_fusions", "legal_fusions(l1, l2)", "the levels r at which fuse_outer(l1, l2, r) is legal"),
    (
        "contraction_orders",
        "contraction_orders(t)",
        "the orders in which lift(t, order) may contract the product t, cheapest first at the program's sizes (opt_einsum paths; every order up to 6 operands, at most 64; beyond, the best and the greedy): `param(\"order\", contraction_orders(t))`",
    ),
    (
        "parallel_levels",
        "parallel_levels(l)",
        "the levels of the loops on l's path that parallelize legally: data-parallel ones and reductions (private accumulators) into one element per iteration, decided by isl",
    ),
    (
        "data_parallel_levels",
        "data_parallel_levels(l)",
        "the levels of the loops on l's path that carry no dependence at all (data-parallel loops in the sense of Ullrich 2018: any order, threads or lanes)",
    ),
    (
        "auto_space",
        "auto_space(l)",
        "the space of paths teml's rules generate from the nest l (register tiles or blocks, orders, tiles, threads, lanes; docs/tuning.md), evaluated here: its `param` calls are this space's, so a hand-written space can start from it",
    ),
    (
        "auto",
        "auto(l)",
        "the path `teml auto` picks for the nest l without measuring: the generated space's first legal point in the machine model's order (a nest to continue from)",
    ),
    (
        "param",
        "param(\"name\", choices)",
        "a tuning parameter: the choice `teml tune` picks for this candidate (the first choice under `teml run`); docs/tuning.md",
    ),
    (
        "history",
        "history(l)",
        "the builtin calls that made the nest, from its build, as .teml statements (strings)",
    ),
    (
        "time",
        "time(l) | time([l1, l2])",
        "compiles, verifies and times the nests as one kernel: a map #{median_s, min_s, spread, reps, gflops, verified, verification, error, threads, cflags}; a kernel that failed verification has no time (`median_s` is ()); docs/tuning.md",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every function a generated space calls is a core builtin, a standard-library composite
    /// or a host helper: the scheduler's typed calls (`schedule::code`) name nothing else.
    #[test]
    fn every_callee_of_a_generated_space_is_a_builtin_a_composite_or_a_helper() {
        let names = function_names();
        for name in crate::schedule::code::SCRIPT_CALLEES {
            assert!(
                names.iter().any(|n| n == name) || HELPERS.iter().any(|(h, _, _)| h == name),
                "`{name}` is neither a standard-library function nor a host helper"
            );
        }
    }
}
