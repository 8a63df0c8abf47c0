//! Measurement: a batch compiled in parallel, then each candidate verified and timed one at
//! a time (or taken from the logs).

use super::*;

impl<'a> Tuning<'a> {
    /// Step 2: the batch's kernels generated and compiled in parallel (`jobs` compilers; the
    /// cache keeps every kernel compiled once).
    pub(super) fn compile(&self, batch: &[Candidate]) -> Vec<Built> {
        let o = self.o;
        let kernels: Vec<Result<CKernel, RunError>> = batch
            .iter()
            .map(|(_, seen, state, _)| {
                Pipeline::with_state(candidate_program(o, seen), state.clone(), o.run.clone())
                    .generate(&KernelRef::Codegen(0))
            })
            .collect();
        let slots: Vec<Mutex<Option<Compiled>>> = kernels.iter().map(|_| Mutex::new(None)).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..o.jobs.max(1) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let Some(k) = kernels.get(i) else { break };
                        if let Ok(k) = k {
                            let r = pipeline::compile_kernel(k, &o.run).map_err(|e| e.to_string());
                            if let Ok(mut slot) = slots[i].lock() {
                                *slot = Some(r);
                            }
                        }
                    }
                });
            }
        });
        kernels.into_iter().zip(slots.into_iter().map(|m| m.into_inner().ok().flatten())).collect()
    }

    /// Step 3: each candidate verified and timed, one at a time ([`Pipeline::run`]); false when
    /// the time budget ran out.
    pub(super) fn measure(
        &mut self,
        batch: Vec<Candidate>,
        built: Vec<Built>,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<bool, String> {
        for ((key, seen, state, eval_s), (kernel, comp)) in batch.into_iter().zip(built) {
            if self.time_up() {
                return Ok(false);
            }
            self.progress(progress, &format!("measuring {key}"));
            let mut r = Record::new(key, seen.clone(), Status::Ok, None);
            r.eval_s = eval_s;
            if let Err(e) = kernel {
                r.status = classify(&e);
                r.reason = Some(e.to_string());
            } else if let Some(Err(e)) = comp {
                r.status = Status::Compile;
                r.reason = Some(e);
            } else {
                if let Some(Ok((cached, secs))) = comp {
                    r.compile_s = if cached { 0.0 } else { secs };
                    self.report.compile_s += r.compile_s;
                }
                let start = Instant::now();
                let path: Vec<String> = state
                    .kernels
                    .first()
                    .map_or(Vec::new(), |k| k.nests.iter().flat_map(|n| n.history.lines()).collect());
                self.verify_and_time(&mut r, &seen, state);
                r.run_s = start.elapsed().as_secs_f64();
                self.report.run_s += r.run_s;
                let features = self.features.remove(&r.key).unwrap_or_default();
                if r.status == Status::Ok
                    && let Some(m) = r.median_s
                {
                    if features.len() == model::FEATURES {
                        self.samples.push((features.clone(), m));
                    }
                    self.record_db(&r, path, features);
                }
            }
            self.search.measured(&r.params, r.median_s.filter(|_| r.status == Status::Ok));
            self.finish(r, true)?;
        }
        Ok(true)
    }

    /// Verifies one candidate with one timed run; times it further unless it is far slower
    /// than the best so far (its one run is then its time).
    pub(super) fn verify_and_time(&self, r: &mut Record, seen: &[Seen], state: State) {
        let o = self.o;
        // The limit is per run; a worker job runs the kernel several times: the screening job
        // twice (the timed run, then the checked one).
        let per_run = self.limit();
        let screen =
            RunOptions { timing: Some(ONCE), timeout: o.run.timeout.min(2 * per_run), ..o.run.clone() };
        let mut pipe = Pipeline::with_state(candidate_program(o, seen), state, screen);
        match pipe.run(&KernelRef::Codegen(0)) {
            Ok(KernelRun { verified: Some(evidence), report: run, .. }) => {
                r.verification = Some(run.verification.clone());
                r.evidence = serde_json::to_value(&run.evidence).ok();
                let first = run.time;
                // Far slower than the reference (the best so far, or the untransformed build
                // before there is one): its one run is its time.
                let slow = match (first, self.reference_s()) {
                    (Some(t), Some(b)) => t.median_s > SCREEN * b,
                    _ => false,
                };
                // The timed job: a warm-up, the timed repetitions (at least `min_reps`, and
                // `min_time_s`), then the checked run.
                let job = |timing: Timing| {
                    let runs = timing.warmup + timing.min_reps + 1;
                    o.run.timeout.min(per_run * runs + Duration::from_secs_f64(timing.min_time_s.max(0.0)))
                };
                let t = match (slow, o.run.timing) {
                    (false, Some(timing)) => match pipe.set_timeout(job(timing)).time(&evidence, timing) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            r.status = classify(&e);
                            r.reason = Some(e.to_string());
                            None
                        }
                    },
                    _ => first,
                };
                if slow {
                    r.verification = r
                        .verification
                        .take()
                        .map(|v| format!("{v}; timed once: more than {SCREEN}x the reference time"));
                }
                r.median_s = t.map(|t| t.median_s);
                r.min_s = t.map(|t| t.min_s);
                r.spread = t.map(|t| t.spread());
                r.reps = t.map_or(0, |t| t.reps);
                r.gflops = t.map(|t| run.flops as f64 / t.median_s / 1e9);
                if r.median_s.is_none() && r.status == Status::Ok {
                    r.status = Status::Error;
                    r.reason = Some("verified but not timed".into());
                }
            }
            Ok(run) => {
                r.status = Status::Mismatch;
                r.evidence = serde_json::to_value(&run.report.evidence).ok();
                r.reason = Some(match run.report.worst {
                    Some(w) => format!("does not match the reference ({}): {w}", run.report.verification),
                    None => format!("not verified: {}", run.report.verification),
                });
            }
            Err(e) => {
                r.status = classify(&e);
                r.reason = Some(e.to_string());
            }
        }
    }

    /// Collecting: every candidate is a logged one, in the order they were measured (nothing is
    /// measured again), and the merged log is written.
    pub(super) fn adopt_logged(&mut self) -> Result<(), String> {
        let mut records: Vec<Record> = std::mem::take(&mut self.logged).into_values().collect();
        records.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        for r in records {
            self.done.insert(r.key.clone());
            self.finish(r, false)?;
        }
        slurm::write_log(&self.o.log, &self.records)
    }

    /// The end of a run that only measures (`measure_only`): its report, no final round.
    pub(super) fn measured_only(mut self) -> Result<TuneReport, String> {
        self.report.wall_s = self.t0.elapsed().as_secs_f64();
        self.report.notes.push(format!(
            "measured only: {} candidates logged in {}; the leaders' re-measurement and the winner are left to the run that collects the logs",
            self.records.len(),
            self.o.log.display()
        ));
        write_report(self.o, &self.report)?;
        Ok(self.report)
    }
}
