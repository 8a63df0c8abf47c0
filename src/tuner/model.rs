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

/// Features of a candidate: its kernel's nests (loop extents and order, marks, strides along
/// the innermost loop, parallel trip count, vector width, arithmetic intensity).
pub fn features(state: &State) -> Vec<f32> {
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

/// A model trained on (features, seconds) samples.
pub struct Model {
    gbdt: GBDT,
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
        // The crate must never take teml down: a panic inside it is no model.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let mut gbdt = GBDT::new(&cfg);
            gbdt.fit(&mut data);
            Model { gbdt }
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
    }
}
