//! The search: each candidate's time limit, the strategy's proposals ranked by the cost
//! model, and each finished candidate taken into the strategy and the log.

use super::*;

impl<'a> Tuning<'a> {
    /// How long one run of a candidate may take: [`LIMIT_FACTOR`] times the reference (the
    /// untransformed build's time, or the best so far when faster), at least [`LIMIT_FLOOR_S`],
    /// at most `--timeout`.
    pub(super) fn limit(&self) -> Duration {
        self.reference_s().map_or(self.o.run.timeout, |r| {
            self.o.run.timeout.min(Duration::from_secs_f64((LIMIT_FACTOR * r).max(LIMIT_FLOOR_S)))
        })
    }

    /// The time candidates are held to: the best so far, or the untransformed build's when it is
    /// faster (or there is no best yet).
    pub(super) fn reference_s(&self) -> Option<f64> {
        [self.report.baseline_s, self.best.as_ref().map(|b| b.0)].into_iter().flatten().reduce(f64::min)
    }

    pub(super) fn time_up(&self) -> bool {
        self.o.time_budget.is_some_and(|b| self.t0.elapsed() >= b)
    }

    pub(super) fn progress(&self, progress: &mut dyn FnMut(&Progress), phase: &str) {
        progress(&Progress {
            phase,
            done: self.records.len(),
            budget: self.o.budget,
            rejected: self.report.rejected.values().sum(),
            best: self.best.as_ref().map(|(t, k)| (*t, k.as_str())),
        });
    }

    /// Records a candidate that is done: appended to the log when this run measured it
    /// (`fresh`), counted, and the best so far updated.
    pub(super) fn finish(&mut self, mut r: Record, fresh: bool) -> Result<(), String> {
        if fresh {
            r.at_s = self.t0.elapsed().as_secs_f64();
            r.shard = self.report.shard.clone();
            log::append(&self.o.log, &r)?;
            self.report.measured += 1;
        } else {
            self.report.resumed += 1;
        }
        if r.status != Status::Ok {
            *self.report.rejected.entry(status_name(r.status)).or_default() += 1;
        } else if let Some(m) = r.median_s
            && self.best.as_ref().is_none_or(|(b, _)| m < *b)
        {
            self.best = Some((m, r.key.clone()));
        }
        self.records.push(r);
        let best = self.best.as_ref().map(|b| b.0);
        self.report.trace.push((self.records.len(), self.t0.elapsed().as_secs_f64(), best));
        Ok(())
    }

    /// Step 1: a batch of new candidates, each evaluated (and so checked for legality); those
    /// the logs know, and those refused, are done at once. Also says whether the strategy ran
    /// out of new candidates.
    pub(super) fn propose(&mut self) -> Result<(Vec<Candidate>, bool), String> {
        let o = self.o;
        let batch_size = (2 * o.jobs).max(2);
        let ranked = o.strategy == Strategy::Model;
        let pool = if ranked { POOL * batch_size } else { batch_size };
        let mut batch: Vec<Candidate> = Vec::new();
        let mut exhausted = false;
        // The model strategy evaluates a whole pool (rank() keeps what the budget allows).
        let limit = if ranked { usize::MAX } else { o.budget };
        while batch.len() < pool && self.records.len() + batch.len() < limit && !self.time_up() {
            let (res, seen, eval_s) = match self.seeds.pop_front() {
                Some(values) => {
                    let (res, seen, eval_s) = evaluate_values(o, BTreeMap::new(), None, values);
                    // A seed whose choice is not among this size's choices is no candidate.
                    if res.as_ref().is_err_and(|e| e.to_string().contains("is not among its choices")) {
                        continue;
                    }
                    // (The strategy does not hear of seeds: an exhaustive odometer keeps its
                    // reading.)
                    (res, seen, eval_s)
                }
                None => {
                    let Some(p) = self.search.propose() else {
                        exhausted = true;
                        break;
                    };
                    let (res, seen, eval_s) = evaluate(o, p.pinned, p.seed);
                    self.search.evaluated(&seen);
                    (res, seen, eval_s)
                }
            };
            self.report.eval_s += eval_s;
            let key = log::key(&seen);
            if let Some((k, n)) = o.shard
                && crate::ir::params::hash(&key) % n as u64 != k as u64
            {
                continue;
            }
            if self.done.contains(&key) || batch.iter().any(|b| b.0 == key) {
                self.repeats += 1;
                if self.repeats > MAX_REPEATS {
                    return Ok((batch, true));
                }
                continue;
            }
            self.repeats = 0;
            self.done.insert(key.clone());
            if let Some(r) = self.logged.remove(&key) {
                self.search.measured(&r.params, r.median_s.filter(|_| r.status == Status::Ok));
                self.finish(r, false)?;
                continue;
            }
            match res {
                Err(e) => {
                    let status = if e.is_refusal() { Status::Illegal } else { Status::Error };
                    let mut r = Record::new(key, seen.clone(), status, Some(e.to_string()));
                    r.eval_s = eval_s;
                    self.search.measured(&seen, None);
                    self.finish(r, true)?;
                }
                Ok(state) if state.kernels.is_empty() => {
                    let r = Record::new(key, seen.clone(), Status::Error, Some(no_kernel(&o.space)));
                    self.search.measured(&seen, None);
                    self.finish(r, true)?;
                }
                Ok(state) => {
                    self.features.insert(key.clone(), model::features(&state));
                    batch.push((key, seen, state, eval_s));
                }
            }
        }
        if ranked {
            batch = self.rank(batch, batch_size.min(o.budget.saturating_sub(self.records.len())));
        }
        Ok((batch, exhausted))
    }

    /// The model strategy's choice from a pool: the candidates the model trained on the
    /// measured ones predicts fastest, and one in four at random (the first batches, before
    /// the model has samples, in the strategy's order). The others go back to the space.
    pub(super) fn rank(&mut self, pool: Vec<Candidate>, keep: usize) -> Vec<Candidate> {
        if pool.len() <= keep {
            return pool;
        }
        let order: Vec<usize> = match model::Model::train(&self.samples) {
            Some(m) => {
                let fs: Vec<model::Features> = pool
                    .iter()
                    .map(|c| model::Features::from_slice(self.features.get(&c.0).map_or(&[][..], |v| v)))
                    .collect();
                let cands: Vec<model::Candidate> = fs
                    .iter()
                    .enumerate()
                    .map(|(order, features)| model::Candidate { order, features })
                    .collect();
                let idx = model::ranked(&m, &cands);
                let explore = keep / 4;
                let mut chosen: Vec<usize> = idx[..keep - explore].to_vec();
                // Exploration: evenly spaced among the rest (deterministic).
                let rest: Vec<usize> = idx[keep - explore..].to_vec();
                for k in 0..explore {
                    chosen.push(rest[k * rest.len() / explore.max(1)]);
                }
                chosen
            }
            None => (0..keep).collect(),
        };
        let mut out = Vec::new();
        for (i, c) in pool.into_iter().enumerate() {
            if order.contains(&i) {
                out.push(c);
            } else {
                self.done.remove(&c.0);
                self.features.remove(&c.0);
            }
        }
        out
    }
}
