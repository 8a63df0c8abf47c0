//! The learned cost model of `--strategy model`: gradient-boosted regression trees (the `gbdt`
//! crate, XGBoost's algorithm) over features of a candidate's transformed nests, trained on the
//! candidates measured so far in the search and on the tuning database's records of the same
//! statements, predicting the logarithm of the time. Each batch, the search draws a pool of
//! candidates, evaluates them (legality included; nothing is compiled) and compiles the ones the
//! model ranks fastest, with one in four drawn at random so that the model keeps learning where
//! it is unsure (as TVM's and Ansor's searches do with XGBoost).

use crate::ir::{LNode, Loop, State};
use gbdt::config::Config;
use gbdt::decision_tree::{Data, DataVec};
use gbdt::gradient_boost::GBDT;

/// The number of features.
pub const FEATURES: usize = 20;

/// Samples before the model ranks anything (before: the strategy's own order).
pub const MIN_SAMPLES: usize = 6;

/// What the learned model reads off a candidate's kernel: its nests' loops, marks and accesses.
/// The database keeps them as a list in [`Features::NAMES`]'s order.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Features {
    /// Loops on the first nest's path.
    pub depth: f32,
    /// log2 of the extents of its four innermost loops, innermost first.
    pub inner_extents_log2: [f32; 4],
    /// log2 of the kernel's statements.
    pub statements_log2: f32,
    /// Loops in vector lanes.
    pub vector_loops: f32,
    /// The widest of their vectors, in doubles (bits / 64).
    pub vector_doubles: f32,
    /// Loops on threads.
    pub parallel_loops: f32,
    /// log2 of the largest trip count on threads.
    pub parallel_extent_log2: f32,
    /// The depth of the last loop on threads.
    pub parallel_depth: f32,
    /// Loops collapsed into the ones on threads.
    pub collapsed: f32,
    /// Tensors kept in registers.
    pub register_blocks: f32,
    /// Operands packed.
    pub packs: f32,
    /// Streamed stores.
    pub streams: f32,
    /// Accesses of the innermost loop's statements (writes count twice) that do not vary
    /// along it.
    pub invariant_accesses: f32,
    /// Those contiguous along it.
    pub contiguous_accesses: f32,
    /// Those strided along it.
    pub strided_accesses: f32,
    /// log2 of the outermost loops' iterations, summed.
    pub outer_iterations_log2: f32,
    /// Loops in the kernel.
    pub loops: f32,
}

impl Features {
    /// The names, in the database's order.
    pub const NAMES: [&'static str; FEATURES] = [
        "depth",
        "inner_extent_1_log2",
        "inner_extent_2_log2",
        "inner_extent_3_log2",
        "inner_extent_4_log2",
        "statements_log2",
        "vector_loops",
        "vector_doubles",
        "parallel_loops",
        "parallel_extent_log2",
        "parallel_depth",
        "collapsed",
        "register_blocks",
        "packs",
        "streams",
        "invariant_accesses",
        "contiguous_accesses",
        "strided_accesses",
        "outer_iterations_log2",
        "loops",
    ];

    /// The features of the candidate whose evaluated program is `state`.
    pub fn of(state: &State) -> Features {
        Features::from_slice(&positional(state))
    }

    /// From the database's list ([`Features::NAMES`]'s order; missing values are 0).
    pub fn from_slice(f: &[f32]) -> Features {
        let at = |k: usize| f.get(k).copied().unwrap_or(0.0);
        Features {
            depth: at(0),
            inner_extents_log2: [at(1), at(2), at(3), at(4)],
            statements_log2: at(5),
            vector_loops: at(6),
            vector_doubles: at(7),
            parallel_loops: at(8),
            parallel_extent_log2: at(9),
            parallel_depth: at(10),
            collapsed: at(11),
            register_blocks: at(12),
            packs: at(13),
            streams: at(14),
            invariant_accesses: at(15),
            contiguous_accesses: at(16),
            strided_accesses: at(17),
            outer_iterations_log2: at(18),
            loops: at(19),
        }
    }

    /// As the database keeps them.
    pub fn to_vec(&self) -> Vec<f32> {
        let [e1, e2, e3, e4] = self.inner_extents_log2;
        vec![
            self.depth,
            e1,
            e2,
            e3,
            e4,
            self.statements_log2,
            self.vector_loops,
            self.vector_doubles,
            self.parallel_loops,
            self.parallel_extent_log2,
            self.parallel_depth,
            self.collapsed,
            self.register_blocks,
            self.packs,
            self.streams,
            self.invariant_accesses,
            self.contiguous_accesses,
            self.strided_accesses,
            self.outer_iterations_log2,
            self.loops,
        ]
    }
}

/// A candidate as a cost model sees it: its place in the rules' order (0: the analytic
/// model's pick; for a search, the order the strategy proposed it in) and its features.
pub struct Candidate<'a> {
    /// Its place in the rules' order.
    pub order: usize,
    /// Its features.
    pub features: &'a Features,
}

/// One ranking, two models: the analytic model (the rules' own order of their choices, as
/// each `param` lists them) and the learned one ([`Model`]); `teml auto` and `teml tune
/// --strategy model` rank candidates through it and say which model chose.
pub trait CostModel {
    /// What the model ranks by, in words (`the rules' order of their choices`,
    /// `gradient-boosted trees on 40 measured candidates`).
    fn describe(&self) -> String;
    /// Each candidate's predicted cost; lower is faster (only the order counts).
    fn costs(&self, candidates: &[Candidate]) -> Vec<f64>;
}

/// The rules' own ranking: the order their choices are listed in.
pub struct Analytic;

impl CostModel for Analytic {
    fn describe(&self) -> String {
        "the rules' order of their choices".into()
    }

    fn costs(&self, candidates: &[Candidate]) -> Vec<f64> {
        candidates.iter().map(|c| c.order as f64).collect()
    }
}

/// The candidates' indices, cheapest first by `model` (ties in the rules' order).
pub fn ranked(model: &dyn CostModel, candidates: &[Candidate]) -> Vec<usize> {
    let costs = model.costs(candidates);
    let mut idx: Vec<usize> = (0..candidates.len()).collect();
    idx.sort_by(|&a, &b| costs[a].total_cmp(&costs[b]).then(candidates[a].order.cmp(&candidates[b].order)));
    idx
}

/// The features of a candidate as the database keeps them ([`Features::to_vec`]'s order).
pub fn features(state: &State) -> Vec<f32> {
    Features::of(state).to_vec()
}

/// The features of a candidate, by position: the old positional vector, filled from the
/// candidate's kernel ([`Features::of`] names them).
fn positional(state: &State) -> Vec<f32> {
    let mut f = vec![0f32; FEATURES];
    let Some(req) = state.kernels.first() else { return f };
    let consts = |v: &str| state.constant(v);
    let lg = |x: f64| (x.max(1.0)).log2() as f32;
    let mut loops: Vec<(usize, std::sync::Arc<Loop>)> = Vec::new();
    for n in &req.nests {
        fn walk(items: &[LNode], depth: usize, out: &mut Vec<(usize, std::sync::Arc<Loop>)>) {
            for x in items {
                if let LNode::Loop(l) = x {
                    out.push((depth, l.clone()));
                    walk(&l.body, depth + 1, out);
                }
            }
        }
        walk(n.items(), 1, &mut loops);
    }
    let extent = |l: &Loop| match (l.lb.eval(&consts), l.ub.eval(&consts)) {
        (Ok(a), Ok(b)) => (b - a + 1).max(1) as f64,
        _ => 1.0,
    };
    let path: Vec<std::sync::Arc<Loop>> = req.nests.first().map(|n| n.path()).unwrap_or_default();
    f[0] = path.len() as f32;
    for (k, l) in path.iter().rev().take(4).enumerate() {
        f[1 + k] = lg(extent(l));
    }
    let stmts: usize = req.nests.iter().map(|n| n.stmts().len()).sum();
    f[5] = lg(stmts as f64);
    for (depth, l) in &loops {
        let a = &l.annot;
        if a.vectorize {
            f[6] += 1.0;
            f[7] = f[7].max(if a.vector_bits > 0 { a.vector_bits as f32 } else { 512.0 } / 64.0);
        }
        if a.parallel {
            f[8] += 1.0;
            f[9] = f[9].max(lg(extent(l)));
            f[10] = *depth as f32;
        }
        f[11] += a.collapse as f32;
        f[12] += a.registers.len() as f32;
        f[13] += a.pack.len() as f32;
        f[14] += a.stream.len() as f32;
    }
    // Strides along the innermost loop of the first nest's path.
    if let Some(inner) = path.last() {
        let mut leaves = Vec::new();
        for s in inner.body.iter().flat_map(|x| x.stmts()) {
            if let Some(low) = crate::ir::lower::lower(&s) {
                leaves.push((true, low.target.clone()));
                for leaf in low.rhs.indexed_leaves() {
                    leaves.push((false, std::sync::Arc::new(leaf.clone())));
                }
            }
        }
        for (write, leaf) in leaves {
            let ix = leaf.index_list().unwrap_or(&[]);
            let class = match ix.split_last() {
                _ if !ix.iter().any(|x| x.mentions(&inner.iter)) => 0,
                Some((last, rest))
                    if !rest.iter().any(|x| x.mentions(&inner.iter)) && last.coeff(&inner.iter) == 1 =>
                {
                    1
                }
                _ => 2,
            };
            f[15 + class] += if write { 2.0 } else { 1.0 };
        }
    }
    let total: f64 = loops.iter().filter(|(d, _)| *d == 1).map(|(_, l)| extent(l)).sum();
    f[18] = lg(total);
    f[19] = loops.len() as f32;
    f
}

/// The learned model: trained on (features, seconds) samples.
pub struct Model {
    gbdt: GBDT,
    samples: usize,
}

impl CostModel for Model {
    fn describe(&self) -> String {
        format!("gradient-boosted trees on {} measured candidates", self.samples)
    }

    fn costs(&self, candidates: &[Candidate]) -> Vec<f64> {
        let xs: Vec<Vec<f32>> = candidates.iter().map(|c| c.features.to_vec()).collect();
        self.predict(&xs).into_iter().map(f64::from).collect()
    }
}

impl Model {
    /// Trains on `samples`; `None` with fewer than [`MIN_SAMPLES`] or when training fails.
    pub fn train(samples: &[(Vec<f32>, f64)]) -> Option<Model> {
        if samples.len() < MIN_SAMPLES {
            return None;
        }
        let mut cfg = Config::new();
        cfg.set_feature_size(FEATURES);
        cfg.set_max_depth(4);
        cfg.set_iterations(60);
        cfg.set_shrinkage(0.2);
        cfg.set_min_leaf_size(1);
        cfg.set_data_sample_ratio(1.0);
        cfg.set_feature_sample_ratio(1.0);
        cfg.set_loss("SquaredError");
        let mut data: DataVec = samples
            .iter()
            .filter(|(x, t)| x.len() == FEATURES && t.is_finite() && *t > 0.0)
            .map(|(x, t)| Data::new_training_data(x.clone(), 1.0, t.ln() as f32, None))
            .collect();
        if data.len() < MIN_SAMPLES {
            return None;
        }
        let n = data.len();
        // The crate must never take teml down: a panic inside it is no model.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let mut gbdt = GBDT::new(&cfg);
            gbdt.fit(&mut data);
            Model { gbdt, samples: n }
        }))
        .ok()
    }

    /// Predicted log-seconds of each feature vector (lower is faster).
    pub fn predict(&self, xs: &[Vec<f32>]) -> Vec<f32> {
        let data: DataVec = xs.iter().map(|x| Data::new_test_data(x.clone(), None)).collect();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.gbdt.predict(&data)))
            .unwrap_or_else(|_| vec![0.0; xs.len()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_learns_an_order_from_samples() {
        // Time grows with feature 0 and falls with feature 6.
        let samples: Vec<(Vec<f32>, f64)> = (0..40)
            .map(|k| {
                let mut x = vec![0f32; FEATURES];
                x[0] = (k % 8) as f32;
                x[6] = (k % 3) as f32;
                (x.clone(), (1.0 + x[0] as f64) / (1.0 + x[6] as f64))
            })
            .collect();
        let m = Model::train(&samples).expect("trained");
        let mut fast = vec![0f32; FEATURES];
        fast[6] = 2.0;
        let mut slow = vec![0f32; FEATURES];
        slow[0] = 7.0;
        let p = m.predict(&[fast, slow]);
        assert!(p[0] < p[1], "{p:?}");
        assert!(Model::train(&samples[..3]).is_none());
        // Through the one interface: the learned model ranks the fast one first, the analytic
        // model keeps the rules' order.
        let (f, s) =
            (Features::from_slice(&[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0]), Features::from_slice(&[7.0]));
        let cands = [Candidate { order: 0, features: &s }, Candidate { order: 1, features: &f }];
        assert_eq!(ranked(&m, &cands), [1, 0]);
        assert_eq!(ranked(&Analytic, &cands), [0, 1]);
        assert!(m.describe().contains("40 measured"));
    }

    #[test]
    fn named_features_round_trip_the_databases_list() {
        let v: Vec<f32> = (0..FEATURES).map(|k| k as f32).collect();
        let f = Features::from_slice(&v);
        assert_eq!(f.to_vec(), v);
        assert_eq!(f.vector_loops, 6.0);
        assert_eq!(f.inner_extents_log2, [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(Features::NAMES[12], "register_blocks");
        assert_eq!(f.register_blocks, 12.0);
    }
}
