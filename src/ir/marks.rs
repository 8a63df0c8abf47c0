//! The marks a loop or a tensor can carry, and the one table of what combines with what.
//!
//! A loop carries marks of its own (parallel, vector lanes, a collapsed band) and marks for a
//! tensor (registers, a packed panel, storage per iteration, streaming stores); a tensor of a
//! nest carries a copy per iteration of a loop (privatize), storage over another tensor
//! (in_place) or a layout. Which pairs do not combine, or which mark needs another, is written
//! once, in [`RULES`], in the words the refusal prints. The transformations, the kernel check
//! (`analysis::kernel`) and code generation ask [`crate::ir::Nest::refusal`] (for a tensor's
//! marks anywhere in a nest: [`refusal`] over what [`crate::ir::Nest::carried`] finds) or
//! [`rule`] (for the words, where they look for the other mark themselves: the loops around, a
//! band, the kernel's other nests); none holds a list of its own. A loop's marks and the data
//! each carries are its [`Annotations`].
//!
//! A new mark is a variant here, its rows in [`RULES`], its field of [`Annotations`] and its
//! words in [`Annotations::marks`]; then its transformation (`ops::transform`), its adapter and
//! table row (`ops::registry`), its plan (`codegen/loop_plan.rs`) and its printer (`codegen`).

use super::expr::Name;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A mark a loop or a tensor can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mark {
    /// `parallelize`: the loop's iterations run on several threads.
    Parallel,
    /// `vectorize`: the loop's iterations run in SIMD lanes.
    Vector,
    /// `collapse`: a band of parallel loops runs as one iteration space.
    Collapse,
    /// `registers`: a loop keeps a tensor's elements in registers.
    Registers,
    /// `pack`: a loop copies a tensor's block into a contiguous panel.
    Pack,
    /// `store_at`: a tensor is stored per iteration of a loop.
    StoreAt,
    /// `stream`: a vectorized loop stores a tensor with streaming stores.
    Stream,
    /// `dot`: a reduction loop runs in groups summed by one dot-product instruction a group.
    Dot,
    /// `privatize`: a tensor has a copy per iteration of a loop.
    Privatize,
    /// `in_place`: a result is stored over its operand.
    InPlace,
    /// `regroup`, `permute_layout`, `pad`: a tensor is stored in another layout.
    Layout,
}

/// Where a rule looks for the other mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The same tensor, anywhere in the nest: its own marks and the loops' marks for it
    /// (asked through [`refusal`]).
    Tensor,
    /// The same loop.
    Loop,
    /// The loops around the one being marked (`around`), or those and the loop itself.
    Around,
    /// The same tensor in the kernel's other nests, or the loops of a band (code generation and
    /// the kernel check).
    Kernel,
}

/// How the two marks relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// The new mark is refused where one of `others` is.
    Excludes,
    /// The new mark is refused where none of `others` is.
    Requires,
}

/// One row of the table.
#[derive(Debug)]
pub struct Rule {
    /// The mark asked for.
    pub new: Mark,
    /// The marks it meets (or needs).
    pub others: &'static [Mark],
    /// Where they are looked for.
    pub scope: Scope,
    /// Excludes or requires.
    pub relation: Relation,
    /// What the refusal expected (empty where `found` is the whole reason).
    pub expected: &'static str,
    /// What it found, or the whole reason: `{t}` the tensor, `{layout}` its layout, `{loop}`
    /// the loop that carries the other mark, `{here}` the loop being marked, `{marks}` that
    /// loop's marks in words, `{nest}` the nest that sets the other mark.
    pub found: &'static str,
}

/// What does not combine with what, in the words of the refusal; rows of one `new` mark and
/// scope are asked in order.
pub static RULES: &[Rule] = &[
    // privatize: the copies replace the tensor's own storage, so it has none other yet.
    Rule {
        new: Mark::Privatize,
        others: &[Mark::Layout],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor stored as declared (privatize before giving it storage of its own)",
        found: "`{t}`, which has the layout {layout}",
    },
    Rule {
        new: Mark::Privatize,
        others: &[Mark::InPlace],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor stored as declared (privatize before giving it storage of its own)",
        found: "`{t}`, stored in place (in_place)",
    },
    Rule {
        new: Mark::Privatize,
        others: &[Mark::StoreAt, Mark::Pack, Mark::Registers, Mark::Stream],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor stored as declared (privatize before giving it storage of its own)",
        found: "`{t}`, marked on loop {loop}",
    },
    // in_place: the result takes the operand's buffer as declared.
    Rule {
        new: Mark::InPlace,
        others: &[Mark::InPlace],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor not yet stored in place",
        found: "`{t}`, already in place",
    },
    Rule {
        new: Mark::InPlace,
        others: &[Mark::Layout],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor in its declared layout",
        found: "`{t}`, which has a layout",
    },
    Rule {
        new: Mark::InPlace,
        others: &[Mark::StoreAt],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor with storage of its own",
        found: "`{t}`, stored per iteration (store_at)",
    },
    // A layout: the whole tensor in a buffer of the kernel's.
    Rule {
        new: Mark::Layout,
        others: &[Mark::StoreAt],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor with storage of its own",
        found: "`{t}`, stored per iteration of a loop (store_at)",
    },
    Rule {
        new: Mark::Layout,
        others: &[Mark::InPlace],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor with storage of its own",
        found: "`{t}`, stored in place (in_place)",
    },
    Rule {
        new: Mark::Layout,
        others: &[Mark::Layout],
        scope: Scope::Kernel,
        relation: Relation::Excludes,
        expected: "",
        found: "`{t}` has two layouts in the kernel: expected one layout per tensor",
    },
    // store_at: a small buffer per iteration, in place of the tensor as declared.
    Rule {
        new: Mark::StoreAt,
        others: &[Mark::Layout],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor stored as declared",
        found: "it has the layout {layout} for the whole kernel",
    },
    Rule {
        new: Mark::StoreAt,
        others: &[Mark::InPlace],
        scope: Scope::Tensor,
        relation: Relation::Excludes,
        expected: "a tensor stored as declared",
        found: "it is stored in place (in_place)",
    },
    Rule {
        new: Mark::StoreAt,
        others: &[Mark::Layout],
        scope: Scope::Kernel,
        relation: Relation::Excludes,
        expected: "",
        found: "`{t}` has a layout in `{nest}` and is stored per iteration of a loop: expected one of the two",
    },
    // pack: a panel copied from the tensor as the kernel stores it.
    Rule {
        new: Mark::Pack,
        others: &[Mark::Layout],
        scope: Scope::Kernel,
        relation: Relation::Excludes,
        expected: "",
        found: "cannot pack `{t}`: it has a layout of its own for the whole kernel",
    },
    // stream: whole vectors of lanes, stored past the cache.
    Rule {
        new: Mark::Stream,
        others: &[Mark::Vector],
        scope: Scope::Loop,
        relation: Relation::Requires,
        expected: "",
        found: "loop `{here}` is not vectorized: expected a vectorized loop (streaming stores write whole \
                vectors of lanes; vectorize it first)",
    },
    Rule {
        new: Mark::Stream,
        others: &[Mark::Registers],
        scope: Scope::Around,
        relation: Relation::Excludes,
        expected: "",
        found: "`{t}` is kept in registers across loop `{loop}`: its stores are after that loop, not in \
                `{here}`'s lanes",
    },
    Rule {
        new: Mark::Stream,
        others: &[Mark::StoreAt],
        scope: Scope::Around,
        relation: Relation::Excludes,
        expected: "",
        found: "`{t}` is stored per iteration of loop `{loop}`: its small buffer lives in the cache, which \
                streaming stores would bypass",
    },
    // collapse: one iteration space, nothing printed between its loops.
    Rule {
        new: Mark::Collapse,
        others: &[Mark::StoreAt, Mark::Pack, Mark::Registers],
        scope: Scope::Around,
        relation: Relation::Excludes,
        expected: "",
        found: "loop `{loop}` has {marks} of its own (code before its body): expected a band whose loops are \
                perfectly nested (mark the innermost loop of the band instead)",
    },
    Rule {
        new: Mark::Collapse,
        others: &[Mark::Pack, Mark::Registers],
        scope: Scope::Kernel,
        relation: Relation::Excludes,
        expected: "",
        found: "loop `{loop}` is marked {marks}: its copies or loads would stand between the collapsed loops; \
                expected the band's inner loops unmarked (mark a loop outside or inside the band)",
    },
    // OpenMP: no `parallel for` inside `simd`.
    Rule {
        new: Mark::Parallel,
        others: &[Mark::Vector],
        scope: Scope::Around,
        relation: Relation::Excludes,
        expected: "",
        found: "loop `{here}` is parallelized inside loop `{loop}`, which is vectorized: OpenMP allows no \
                `parallel for` inside `simd`; expected the parallel loop outside the vectorized one",
    },
];

/// The row for `new` meeting `other` in `scope`.
///
/// # Panics
/// Where the table has no such row: a caller names a pair the table does not hold (a bug of
/// teml's, caught by the tests of every refusal).
pub fn rule(new: Mark, other: Mark, scope: Scope) -> &'static Rule {
    RULES
        .iter()
        .find(|r| r.new == new && r.scope == scope && r.others.contains(&other))
        .unwrap_or_else(|| panic!("no rule for {new:?} with {other:?} in {scope:?}"))
}

impl Rule {
    /// `found` with its words filled in.
    pub fn words(&self, fill: &[(&str, &str)]) -> String {
        fill.iter().fold(self.found.to_string(), |s, (k, v)| s.replace(&format!("{{{k}}}"), v))
    }
}

/// A mark a tensor carries in a nest, with what a refusal names: its layout, or the loop that
/// carries it ([`crate::ir::Nest::carried`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Carried {
    /// The mark.
    pub mark: Mark,
    /// Its layout as written (`Layout`).
    pub layout: String,
    /// The header of the loop that carries it (a loop's mark for the tensor).
    pub on_loop: String,
}

/// What a refusal of a mark on a tensor says ([`crate::ir::Nest::refusal`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// What was expected.
    pub expected: &'static str,
    /// What was found.
    pub found: String,
}

/// Why `new` cannot be set on tensor `t`, given the marks `has` that `t` carries (the rows of
/// scope [`Scope::Tensor`], in order); `None` where it combines with them.
pub fn refusal(new: Mark, t: &str, has: &[Carried]) -> Option<Refusal> {
    RULES.iter().filter(|r| r.new == new && r.scope == Scope::Tensor).find_map(|r| {
        let met = has.iter().find(|c| r.others.contains(&c.mark));
        let (layout, on_loop) = met.map_or(("", ""), |c| (c.layout.as_str(), c.on_loop.as_str()));
        let refused = match r.relation {
            Relation::Excludes => met.is_some(),
            Relation::Requires => met.is_none(),
        };
        refused.then(|| Refusal {
            expected: r.expected,
            found: r.words(&[("t", t), ("layout", layout), ("loop", on_loop)]),
        })
    })
}

/// Marks on a loop. Code generation decides how to realize them (Sec. 3.3.3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Annotations {
    /// `parallelize`: run the iterations on several threads.
    #[serde(default)]
    pub parallel: bool,
    /// `vectorize`: run the iterations in SIMD lanes.
    #[serde(default)]
    pub vectorize: bool,
    /// `vectorize(l, r, bits)`: the width of the lanes' vectors, where narrower than the
    /// target's widest; 0: the target's widest.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vector_bits: u32,
    /// `collapse`: this loop and the `collapse - 1` loops perfectly nested in it (all marked
    /// parallel) run as one parallel iteration space (OpenMP `collapse(n)`); 0 where none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub collapse: usize,
    /// `registers`: the tensors whose elements this loop's body accesses are kept in local
    /// variables (registers) for the loop's duration (`analysis::registers`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registers: Vec<Name>,
    /// `pack`: the tensors whose block this loop's body reads are copied into a contiguous
    /// buffer before the loop, and read from it inside (`analysis::packing`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pack: Vec<Name>,
    /// The layout of a packed tensor's buffer where it is not the block's own (transposed,
    /// padded); absent: the block as it is in the tensor.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pack_layout: BTreeMap<Name, PackLayout>,
    /// `store_at`: the tensors stored per iteration of this loop (storage contraction): each
    /// iteration has its own buffer of the block its body accesses, instead of the whole
    /// tensor (`analysis::storage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub store_at: Vec<Name>,
    /// The order of a stored tensor's buffer where it is not the block's own (0-based: buffer
    /// dimension `d` is dimension `order[d]` of the block; `[1, 0]`: transposed, so that lanes
    /// along the block's first dimension are adjacent); absent: the block's order.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub store_layout: BTreeMap<Name, Vec<usize>>,
    /// `stream`: the tensor whose whole vectors of lanes this vectorized loop stores with
    /// non-temporal (streaming) stores, its rows peeled to the vector's alignment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stream: Vec<Name>,
    /// `dot`: this reduction loop runs in groups of this many consecutive iterations, each
    /// group's products summed into a lane by one dot-product instruction where the compiler
    /// targets one (2 for bf16 pairs, 4 for 8-bit quads); 0 where none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dot: usize,
    /// `amx`: this `dot` loop sums its block of the result in AMX tiles where the host has
    /// them (`analysis::amx`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub amx: bool,
}

/// How a packed block is laid out in its buffer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackLayout {
    /// The block's dimensions in the buffer's order (0-based): dimension `d` of the buffer is
    /// dimension `order[d]` of the block. Empty: the block's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<usize>,
    /// The buffer's innermost dimension is rounded up to a multiple of this (1: no padding).
    pub pad: usize,
    /// The buffer's first dimension cut into groups of this many consecutive elements, each
    /// group stored innermost (`[kc][nc]` as `[kc/4][nc][4]`: the quads `vpdpbusd` reads, the
    /// pairs `vdpbf16ps` reads), the last group filled with zeros; 0 or 1: none.
    #[serde(default, skip_serializing_if = "is_small")]
    pub group: usize,
}

fn is_small(n: &usize) -> bool {
    *n <= 1
}

impl PackLayout {
    /// The buffer dimension order for a block of `rank` dimensions.
    pub fn order(&self, rank: usize) -> Vec<usize> {
        if self.order.len() == rank { self.order.clone() } else { (0..rank).collect() }
    }

    /// True where the buffer is the block as it is (no reordering, no padding).
    pub fn is_plain(&self) -> bool {
        self.order.iter().enumerate().all(|(k, d)| k == *d) && self.pad <= 1 && self.group <= 1
    }

    /// `[2, 1] pad 8` (1-based, as written in a program).
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        if !self.order.iter().enumerate().all(|(k, d)| k == *d) {
            let ds: Vec<String> = self.order.iter().map(|d| (d + 1).to_string()).collect();
            out.push(format!("[{}]", ds.join(", ")));
        }
        if self.pad > 1 {
            out.push(format!("pad {}", self.pad));
        }
        if self.group > 1 {
            out.push(format!("in groups of {}", self.group));
        }
        out.join(" ")
    }
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

impl Annotations {
    /// The marks, as words.
    pub fn words(&self) -> Vec<String> {
        self.marks().into_iter().map(|(_, w)| w).collect()
    }

    /// The marks, each with its words (`vectorize(256)`, `pack(B [2, 1])`).
    pub fn marks(&self) -> Vec<(Mark, String)> {
        let mut w = Vec::new();
        if self.parallel {
            w.push((Mark::Parallel, "parallel".to_string()));
        }
        if self.vectorize && self.vector_bits > 0 {
            w.push((Mark::Vector, format!("vectorize({})", self.vector_bits)));
        } else if self.vectorize {
            w.push((Mark::Vector, "vectorize".to_string()));
        }
        if self.collapse > 1 {
            w.push((Mark::Collapse, format!("collapse({})", self.collapse)));
        }
        let list = |ts: &[Name]| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
        if !self.registers.is_empty() {
            w.push((Mark::Registers, format!("registers({})", list(&self.registers))));
        }
        if !self.pack.is_empty() {
            let ts: Vec<String> = self
                .pack
                .iter()
                .map(|t| match self.pack_layout.get(t) {
                    Some(l) if !l.is_plain() => format!("{t} {}", l.describe()),
                    _ => t.to_string(),
                })
                .collect();
            w.push((Mark::Pack, format!("pack({})", ts.join(", "))));
        }
        if !self.store_at.is_empty() {
            let ts: Vec<String> = self
                .store_at
                .iter()
                .map(|t| match self.store_layout.get(t) {
                    Some(order) => {
                        let ds: Vec<String> = order.iter().map(|d| (d + 1).to_string()).collect();
                        format!("{t} [{}]", ds.join(", "))
                    }
                    None => t.to_string(),
                })
                .collect();
            w.push((Mark::StoreAt, format!("store_at({})", ts.join(", "))));
        }
        if !self.stream.is_empty() {
            w.push((Mark::Stream, format!("stream({})", list(&self.stream))));
        }
        if self.dot > 0 {
            let tiles = if self.amx { " amx" } else { "" };
            w.push((Mark::Dot, format!("dot({}){tiles}", self.dot)));
        }
        w
    }

    /// The marks this loop carries for tensor `t`.
    pub fn marks_for(&self, t: &Name) -> Vec<Mark> {
        [
            (Mark::StoreAt, &self.store_at),
            (Mark::Pack, &self.pack),
            (Mark::Registers, &self.registers),
            (Mark::Stream, &self.stream),
        ]
        .into_iter()
        .filter(|(_, ts)| ts.contains(t))
        .map(|(m, _)| m)
        .collect()
    }

    /// Both sets of marks.
    pub fn union(&self, other: &Annotations) -> Annotations {
        Annotations {
            parallel: self.parallel || other.parallel,
            vectorize: self.vectorize || other.vectorize,
            vector_bits: match (self.vector_bits, other.vector_bits) {
                (0, b) | (b, 0) => b,
                (a, b) => a.min(b),
            },
            collapse: self.collapse.max(other.collapse),
            // Loops that group their iterations alike keep the groups.
            dot: match (self.dot, other.dot) {
                (a, 0) | (0, a) => a,
                (a, b) if a == b => a,
                _ => 0,
            },
            amx: self.amx && other.amx,
            registers: {
                let mut r = self.registers.clone();
                r.extend(other.registers.iter().filter(|t| !self.registers.contains(t)).cloned());
                r
            },
            pack: {
                let mut r = self.pack.clone();
                r.extend(other.pack.iter().filter(|t| !self.pack.contains(t)).cloned());
                r
            },
            pack_layout: {
                let mut r = other.pack_layout.clone();
                r.extend(self.pack_layout.iter().map(|(k, v)| (k.clone(), v.clone())));
                r
            },
            store_at: {
                let mut r = self.store_at.clone();
                r.extend(other.store_at.iter().filter(|t| !self.store_at.contains(t)).cloned());
                r
            },
            store_layout: {
                let mut r = other.store_layout.clone();
                r.extend(self.store_layout.iter().map(|(k, v)| (k.clone(), v.clone())));
                r
            },
            stream: {
                let mut r = self.stream.clone();
                r.extend(other.stream.iter().filter(|t| !self.stream.contains(t)).cloned());
                r
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_names_a_pair_once_per_scope() {
        for (k, a) in RULES.iter().enumerate() {
            for b in &RULES[k + 1..] {
                let shared = a.others.iter().any(|m| b.others.contains(m));
                assert!(
                    !(a.new == b.new && a.scope == b.scope && shared),
                    "{:?} meets {:?} twice in {:?}",
                    a.new,
                    a.others,
                    a.scope
                );
            }
        }
    }

    #[test]
    fn words_fill_their_places() {
        let r = rule(Mark::Privatize, Mark::Pack, Scope::Tensor);
        assert_eq!(r.words(&[("t", "A"), ("loop", "i in [0, 9]")]), "`A`, marked on loop i in [0, 9]");
        assert!(std::ptr::eq(r, rule(Mark::Privatize, Mark::Stream, Scope::Tensor)));
    }
}
