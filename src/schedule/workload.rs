//! What the rules of an automatic schedule read off a nest: its loops (extent at the program's
//! sizes, and whether isl finds them data-parallel, reductions or carrying a dependence), the
//! tensors it writes and reads with each one's stride along each loop, and its arithmetic.

use crate::ir::{DType, Expr, Name, Nest, State, TNode};
use crate::ops::explore::{Parallelism, parallelism_below};

/// One loop on the nest's single path.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopInfo {
    /// Its level (1-based).
    pub level: usize,
    /// Its iterator.
    pub iter: Name,
    /// Its trip count at the program's sizes, where the bounds are constants there.
    pub extent: Option<i64>,
    /// Its average trip count: the extent, or for bounds that use outer iterators (a
    /// triangle's `j` from `i`), the trip count with those at the middle of their ranges.
    pub mean_extent: f64,
    /// Data-parallel, a reduction, or carrying a dependence (isl).
    pub kind: Parallelism,
    /// Where the loop starts at an outer loop's iterator plus a constant and ends at a
    /// constant (a triangle's `j` from `i`): that iterator and the constant.
    pub after: Option<(Name, i64)>,
}

/// One access of a statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    /// The tensor.
    pub tensor: Name,
    /// Written (the statement's target) or read.
    pub write: bool,
    /// Its index.
    pub index: Vec<Expr>,
    /// The tensor's extents at the program's sizes (empty where unknown).
    pub dims: Vec<usize>,
    /// Its element type.
    pub dtype: DType,
}

impl Access {
    /// Elements between the elements iteration `iter` and `iter + 1` touch (row-major), 0 where
    /// the access does not depend on `iter`, `None` where an index is not affine in it.
    pub fn stride(&self, iter: &str) -> Option<i64> {
        let mut stride = 0i64;
        let mut step = 1i64;
        for (k, x) in self.index.iter().enumerate().rev() {
            if x.mentions(iter) {
                if !x.is_affine() {
                    return None;
                }
                stride = stride.saturating_add(x.coeff(iter).saturating_mul(step));
            }
            step = step.saturating_mul(*self.dims.get(k).unwrap_or(&1) as i64);
        }
        Some(stride)
    }

    /// Whether `iter` appears in the last index only, with coefficient 1: the access is a
    /// vector load or store in lanes of `iter`.
    pub fn contiguous_in(&self, iter: &str) -> bool {
        match self.index.split_last() {
            Some((last, rest)) => {
                !rest.iter().any(|x| x.mentions(iter)) && last.is_affine() && last.coeff(iter) == 1
            }
            None => false,
        }
    }

    /// `A[i][k]`.
    pub fn text(&self) -> String {
        let ix: String = self.index.iter().map(|x| format!("[{x}]")).collect();
        format!("{}{ix}", self.tensor)
    }

    /// Bytes of the whole tensor.
    pub fn bytes(&self) -> u64 {
        self.dims.iter().map(|&d| d as u64).product::<u64>() * self.dtype.size() as u64
    }
}

/// `(u, c)` where loop `l` runs from `u + c` (`u` the iterator of a loop around it, `c` a
/// constant at the program's sizes) to a constant.
fn triangle_start(
    l: &crate::ir::Loop,
    path: &[std::sync::Arc<crate::ir::Loop>],
    consts: &dyn Fn(&str) -> Option<i64>,
) -> Option<(Name, i64)> {
    l.ub.eval(consts).ok()?;
    let outer: Vec<&Name> = path.iter().take_while(|x| x.iter != l.iter).map(|x| &x.iter).collect();
    let terms = l.lb.affine_terms()?;
    let [(u, 1)] = terms.iter().filter(|(v, _)| outer.contains(&v)).collect::<Vec<_>>()[..] else {
        return None;
    };
    let c = l.lb.eval(&|v: &str| if v == &u[..] { Some(0) } else { consts(v) }).ok()?;
    Some((u.clone(), c))
}

/// A nest as the rules see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// The loops of the single path, outermost first.
    pub loops: Vec<LoopInfo>,
    /// Every access of every statement, the targets first within a statement.
    pub accesses: Vec<Access>,
    /// The statements, as C writes them.
    pub statements: Vec<String>,
    /// Statements in the nest.
    pub n_stmts: usize,
    /// Whether the statements sit at the bottom of the path (a perfect nest).
    pub perfect: bool,
    /// Floating-point operations of one run (at the program's sizes), where known.
    pub flops: Option<u64>,
    /// The tensors some statement updates (`+=`, `-=`, ...) rather than sets (`=`): their old
    /// values are read.
    pub updated: Vec<Name>,
}

impl Workload {
    /// The workload of `nest` in `state`.
    pub fn of(state: &State, nest: &Nest) -> Result<Workload, String> {
        Workload::read(state, nest, Some(0))
    }

    /// [`Workload::of`] where isl is asked only about the loops below the `outer` outermost ones
    /// (a part inside loops that are not its own: those are `Carried`, unasked).
    pub fn of_below(state: &State, nest: &Nest, outer: usize) -> Result<Workload, String> {
        Workload::read(state, nest, Some(outer))
    }

    /// The workload without asking isl which loops are parallel (each is `Carried`): its keys
    /// and statements, cheaply.
    pub fn shape(state: &State, nest: &Nest) -> Result<Workload, String> {
        Workload::read(state, nest, None)
    }

    fn read(state: &State, nest: &Nest, classify_below: Option<usize>) -> Result<Workload, String> {
        let consts = |v: &str| state.constant(v);
        let path = nest.view().path();
        let par = if let Some(outer) = classify_below {
            parallelism_below(state, nest, outer)?
        } else {
            path.iter().enumerate().map(|(k, l)| (k + 1, l.iter.clone(), Parallelism::Carried)).collect()
        };
        let mut loops = Vec::new();
        // The outer iterators at the middle of their ranges, for the mean trip counts.
        let mut middle: std::collections::BTreeMap<String, i64> = Default::default();
        for ((level, iter, kind), l) in par.into_iter().zip(&path) {
            let extent = match (l.lb.eval(&consts), l.ub.eval(&consts)) {
                (Ok(a), Ok(b)) => Some((b - a + 1).max(0)),
                _ => None,
            };
            let at = |v: &str| middle.get(v).copied().or_else(|| consts(v));
            let (lb, ub) = (l.lb.eval(&at).ok(), l.ub.eval(&at).ok());
            let mean_extent = match (extent, lb, ub) {
                (Some(e), _, _) => e as f64,
                (None, Some(a), Some(b)) => (b - a + 1).max(1) as f64,
                _ => 1.0,
            };
            if let (Some(a), Some(b)) = (lb, ub) {
                middle.insert(iter.to_string(), (a + b) / 2);
            }
            let after = triangle_start(l, &path, &consts);
            loops.push(LoopInfo { level, iter, extent, mean_extent, kind, after });
        }
        let perfect = path.last().is_some_and(|l| l.body.iter().all(|x| x.as_loop().is_none()));
        let stmts = nest.stmts();
        let mut accesses = Vec::new();
        let mut statements = Vec::new();
        let mut flops_per_instance = 0u64;
        let mut updated = Vec::new();
        for s in &stmts {
            let Some(lowered) = crate::ir::lower::lower(s) else { continue };
            statements.push(s.to_string());
            if lowered.update != crate::ir::lower::Update::Set
                && let Some(id) = lowered.target.id()
                && !updated.contains(id)
            {
                updated.push(id.clone());
            }
            flops_per_instance += crate::ir::lower::flops(&lowered).max(1);
            let mut push = |leaf: &TNode, write: bool| {
                let Some(id) = leaf.id() else { return };
                let dims = state.real_tensor(id).and_then(|t| t.extents_at(&consts).ok()).unwrap_or_default();
                let index = leaf.index_list().unwrap_or(&[]).to_vec();
                let a = Access { tensor: id.clone(), write, index, dims, dtype: leaf.dtype };
                if !accesses.contains(&a) {
                    accesses.push(a);
                }
            };
            push(&lowered.target, true);
            for leaf in lowered.rhs.indexed_leaves() {
                if leaf.is_tensor_leaf() {
                    push(leaf, false);
                }
            }
        }
        let instances = if perfect {
            loops.iter().try_fold(1u64, |n, l| l.extent.map(|e| n.saturating_mul(e.max(0) as u64)))
        } else {
            None
        };
        Ok(Workload {
            loops,
            accesses,
            n_stmts: stmts.len(),
            statements,
            perfect,
            flops: instances.map(|n| n.saturating_mul(flops_per_instance)),
            updated,
        })
    }

    /// Statement instances of one run, about (the mean trip counts' product).
    pub fn mean_instances(&self) -> f64 {
        self.loops.iter().map(|l| l.mean_extent).product()
    }

    /// The loop over `iter`.
    pub fn find(&self, iter: &str) -> Option<&LoopInfo> {
        self.loops.iter().find(|l| &*l.iter == iter)
    }

    /// The written accesses.
    pub fn writes(&self) -> impl Iterator<Item = &Access> {
        self.accesses.iter().filter(|a| a.write)
    }

    /// The read accesses.
    pub fn reads(&self) -> impl Iterator<Item = &Access> {
        self.accesses.iter().filter(|a| !a.write)
    }

    /// Whether every read is contiguous along `iter` or does not vary along it (a vector load
    /// or a broadcast in lanes of `iter`).
    pub fn reads_in_lanes(&self, iter: &str) -> bool {
        self.reads().all(|a| a.stride(iter).is_none_or(|s| s == 0) || a.contiguous_in(iter))
    }

    /// The type most accesses are computed in (the kernel's arithmetic, its lanes): double,
    /// float (bf16 and f16 too) or i32 (the 8-bit integers too); double where none has most.
    pub fn dtype(&self) -> DType {
        let count = |d: DType| self.accesses.iter().filter(|a| a.dtype.compute() == d).count();
        [DType::Float, DType::I32]
            .into_iter()
            .find(|&d| count(d) * 2 > self.accesses.len())
            .unwrap_or(DType::Double)
    }

    /// The key of the workload in the tuning database: its statements, the extents of its
    /// loops and tensors, independent of names given to variables, and the element types of
    /// its tensors where any is not double (`| C:float A:bf16 B:bf16`: a float mm and a
    /// double one are two workloads; a double one keeps the key it always had).
    pub fn key(&self) -> String {
        let loops: Vec<String> =
            self.loops.iter().map(|l| format!("{}:{}", l.iter, l.extent.unwrap_or(-1))).collect();
        let mut key = format!("{} | {}", self.statements.join("; "), loops.join(" "));
        if self.accesses.iter().any(|a| a.dtype != DType::Double) {
            let mut types: Vec<String> = Vec::new();
            for a in &self.accesses {
                let t = format!("{}:{}", a.tensor, a.dtype);
                if !types.contains(&t) {
                    types.push(t);
                }
            }
            key.push_str(&format!(" | {}", types.join(" ")));
        }
        key
    }

    /// The statements alone (the same workload at another shape shares them).
    pub fn shape_free_key(&self) -> String {
        self.statements.join("; ")
    }

    /// In a comment line: `n 32 data-parallel, c 32 reduction`.
    pub fn describe_loops(&self) -> String {
        let kinds: Vec<String> = self
            .loops
            .iter()
            .map(|l| {
                let k = match l.kind {
                    Parallelism::Independent => "data-parallel",
                    Parallelism::Reduction => "reduction",
                    Parallelism::Carried => "carried",
                };
                format!("{} ({}, {k})", l.iter, l.extent.map_or("?".into(), |e| e.to_string()))
            })
            .collect();
        kinds.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Value;

    fn loops(src: &str) -> Vec<LoopInfo> {
        let state = crate::lang::eval(src, "t.teml", &State::new()).unwrap();
        let Some(Value::Nest(n)) = state.get("l") else { panic!("no nest l") };
        Workload::shape(&state, n).unwrap().loops
    }

    #[test]
    fn a_loop_from_an_outer_iterator_to_a_constant_is_a_triangle_side() {
        let head = "M = 50\nN = 70\nX = tensor([N, M])\nG = tensor([M, M])\n\
                    P = vmul(X, X, [[k, i], [k, j]])\nG = add(G, P, [[i, j], ] -> [i, j])\n";
        let after = |bounds: &str| {
            loops(&format!("{head}l = build(G, {bounds})\n")).into_iter().map(|l| l.after).collect::<Vec<_>>()
        };
        let i = Some((Name::from("i"), 0));
        assert_eq!(after("[[i, 0, M-1], [j, i, M-1]]"), [None, i.clone(), None]);
        assert_eq!(after("[[i, 0, M-1], [j, i+1, M-1]]")[1], Some((Name::from("i"), 1)));
        // Rectangular; up to i (syrk's j <= i); from 2 i: not a triangle's side of slope 1.
        assert_eq!(after("[[i, 0, M-1], [j, 0, M-1]]"), [None, None, None]);
        assert_eq!(after("[[i, 0, M-1], [j, 0, i]]")[1], None);
        assert_eq!(after("[[i, 0, M-1], [j, 2*i, M-1]]")[1], None);
    }

    /// The tuning database keys a workload by its element types: a float or bf16 product is
    /// not the double one (whose key is unchanged), and the lanes follow the compute type.
    #[test]
    fn the_key_and_the_lanes_follow_the_element_types() {
        let shape = |types: (&str, &str, &str)| {
            let (a, b, c) = types;
            let src = format!(
                "N = 64\nA = tensor({a}[N, N])\nB = tensor({b}[N, N])\nC = tensor({c}[N, N])\n\
                 P = vmul(A, B, [[i, k], [k, j]])\nC = add(C, P, [[i, j], ] -> [i, j])\nl = build(C)\n"
            );
            let state = crate::lang::eval(&src, "t.teml", &State::new()).unwrap();
            let Some(Value::Nest(n)) = state.get("l") else { panic!("no nest l") };
            Workload::shape(&state, n).unwrap()
        };
        let double = shape(("", "", ""));
        assert!(!double.key().contains("double"), "{}", double.key());
        assert_eq!(double.dtype(), DType::Double);
        let float = shape(("float, ", "float, ", "float, "));
        let bf16 = shape(("bf16, ", "bf16, ", "float, "));
        let int8 = shape(("u8, ", "i8, ", "i32, "));
        assert!(float.key().ends_with(" | C:float A:float B:float"), "{}", float.key());
        assert!(bf16.key().ends_with(" | C:float A:bf16 B:bf16"), "{}", bf16.key());
        assert!(int8.key().ends_with(" | C:i32 A:u8 B:i8"), "{}", int8.key());
        assert!(double.key() != float.key() && float.key() != bf16.key());
        assert_eq!((float.dtype(), bf16.dtype(), int8.dtype()), (DType::Float, DType::Float, DType::I32));
    }
}
