//! The report: the leaders re-measured in interleaved rounds with the untransformed build
//! (and Polly), the winner written back as a replayable path, the summary.

use super::*;

impl<'a> Tuning<'a> {
    /// Step 4: the leaders verified again, then timed in interleaved rounds with the
    /// untransformed build and Polly; the winner written out.
    pub(super) fn final_round(mut self) -> Result<TuneReport, String> {
        let o = self.o;
        let mut ok: Vec<&Record> =
            self.records.iter().filter(|r| r.status == Status::Ok && r.median_s.is_some()).collect();
        ok.sort_by(|a, b| a.median_s.partial_cmp(&b.median_s).unwrap_or(std::cmp::Ordering::Equal));
        let leaders: Vec<(String, Vec<Seen>)> =
            ok.iter().take(o.leaders.max(1)).map(|r| (r.key.clone(), r.params.clone())).collect();
        let contenders = self.contenders(&leaders);
        let round_timing =
            o.run.timing.map(|t| Timing { warmup: 1, min_reps: t.min_reps.min(3), ..t }).unwrap_or_default();
        let variants: Vec<(&Pipeline, &[Verified])> =
            contenders.iter().map(|(_, (p, v))| (p, std::slice::from_ref(v))).collect();
        let timed = pipeline::time_interleaved(&variants, round_timing, o.rounds);
        for ((name, _), t) in contenders.iter().zip(timed) {
            match t {
                Ok(t) => self.report.final_round.push(Contender {
                    name: name.clone(),
                    median_s: t.stats.median_s,
                    spread: t.stats.spread(),
                    rounds_s: t.rounds_s,
                }),
                Err(e) => self.report.notes.push(format!("{name}: {e}")),
            }
        }
        let report = &self.report;
        let anchor = |n: &str| report.final_round.iter().find(|c| c.name == n).map(|c| c.median_s);
        let (base, polly) = (anchor("untransformed"), anchor("polly"));
        let mut cands: Vec<&Contender> =
            report.final_round.iter().filter(|c| c.name != "untransformed" && c.name != "polly").collect();
        cands.sort_by(|a, b| a.median_s.partial_cmp(&b.median_s).unwrap_or(std::cmp::Ordering::Equal));
        let untransformed = report.final_round.iter().find(|c| c.name == "untransformed");
        let mut note = None;
        let mut as_written = None;
        if let (Some(w), Some(u)) = (cands.first(), untransformed)
            && beats(u, w)
        {
            let built = contenders.iter().find(|(n, _)| n == "untransformed").map(|(_, (p, _))| p);
            let text = format!(
                "no candidate beat the untransformed build: the fastest, {}, took {:.3} ms against its {:.3} ms, \
                 beyond both spreads",
                w.name,
                w.median_s * 1e3,
                u.median_s * 1e3
            );
            if !o.generated {
                // A space a person wrote is searched for its best point, shown beside the build.
                note =
                    Some(format!("{text}; the space's best point is the winner (a space written by hand)"));
            } else if let Some(p) = built {
                match replay_as_written(&o.space, p.state(), "") {
                    Ok(body) => {
                        note = Some(format!("{text}; the winner is the program as written"));
                        as_written = Some((u.median_s, body));
                        cands.insert(0, u);
                    }
                    Err(e) => note = Some(format!("{text}; the fastest candidate stays the winner ({e})")),
                }
            }
        }
        if let Some(w) = cands.first() {
            let lead = cands.get(1).map(|r| (r.median_s - w.median_s) / w.median_s);
            let params = self
                .records
                .iter()
                .find(|r| r.key == w.name)
                .map(|r| r.params.iter().map(|s| (s.name.clone(), s.value.clone())).collect())
                .unwrap_or_default();
            let mut b = Best {
                key: w.name.clone(),
                params,
                median_s: w.median_s,
                spread: w.spread,
                lead,
                lead_exceeds_spread: lead.map(|l| l > w.spread),
                speedup: base.map(|t| t / w.median_s),
                vs_polly: polly.map(|t| t / w.median_s),
                replay: None,
                replay_error: None,
                c: None,
            };
            if let Some((_, (pipe, _))) = contenders.iter().find(|(n, _)| *n == w.name) {
                let body = as_written.as_ref().map(|(_, b)| b.as_str());
                write_best(o, pipe, &mut b, &self.report, body)?;
            }
            self.report.best = Some(b);
        }
        self.report.notes.extend(note);
        if let Some((t, _)) = as_written {
            self.record_as_written(t);
        }
        let mut report = self.report;
        report.wall_s = self.t0.elapsed().as_secs_f64();
        write_report(o, &report)?;
        if let Err(e) = chart::svg(&report, &o.out.join("tuning.svg")) {
            report.notes.push(format!("cannot draw the chart: {e}"));
        }
        Ok(report)
    }

    /// The contenders of the final round, each evaluated once and verified once (its pipeline
    /// then times it): the leaders, the untransformed build, and Polly where installed.
    pub(super) fn contenders(
        &mut self,
        leaders: &[(String, Vec<Seen>)],
    ) -> Vec<(String, (Pipeline, Verified))> {
        let o = self.o;
        let notes = &mut self.report.notes;
        let mut out = Vec::new();
        for (key, params) in leaders {
            match verified(candidate_program(o, params), o.run.clone()) {
                Ok(p) => out.push((key.clone(), p)),
                Err(e) => notes.push(format!("leader {key}: {e}")),
            }
        }
        if out.is_empty() {
            return out;
        }
        // Verified before the search (its failure is noted then).
        if let Some((p, v, _)) = self.baseline.take() {
            out.push(("untransformed".into(), (p, v)));
        }
        if o.anchors {
            match crate::runtime::compiler::polly() {
                Ok(cc) => {
                    let popts = RunOptions {
                        compiler: Some(cc),
                        flags: crate::runtime::compiler::polly_flags(),
                        ..o.run.clone()
                    };
                    match verified(untransformed_program(o, &self.start), popts) {
                        Ok(p) => out.push(("polly".into(), p)),
                        Err(e) => notes.push(format!("polly: {e}")),
                    }
                }
                Err(why) => notes.push(format!(
                    "LLVM Polly not available ({why}); install it with `{}`",
                    crate::runtime::compiler::POLLY_INSTALL
                )),
            }
        }
        out
    }
}

/// Writes the report as `OUT/report.json`.
pub(super) fn write_report(o: &TuneOptions, report: &TuneReport) -> Result<(), String> {
    std::fs::create_dir_all(&o.out).map_err(|e| format!("cannot create {}: {e}", o.out.display()))?;
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    std::fs::write(o.out.join("report.json"), json).map_err(|e| format!("cannot write the report: {e}"))
}

/// Writes the winner's C and its path as a replayable `.teml` script into `o.out`.
/// `as_written`: the program's text where the untransformed build won ([`replay_as_written`]).
pub(super) fn write_best(
    o: &TuneOptions,
    pipe: &Pipeline,
    b: &mut Best,
    report: &TuneReport,
    as_written: Option<&str>,
) -> Result<(), String> {
    std::fs::create_dir_all(&o.out).map_err(|e| format!("cannot create {}: {e}", o.out.display()))?;
    let c = pipe.generate(&KernelRef::Codegen(0)).map_err(|e| e.to_string())?;
    let c_path = o.out.join("best.c");
    std::fs::write(&c_path, &c.source).map_err(|e| format!("cannot write {}: {e}", c_path.display()))?;
    b.c = Some(c_path);
    // The sizes, and the choices the search did not range over (every candidate took them).
    let setting: Vec<String> = o
        .defines
        .iter()
        .map(|(n, v)| format!("-D {n}={v}"))
        .chain(o.fixed.iter().map(|(n, v)| format!("--param {n}={v}")))
        .collect();
    let setting = if setting.is_empty() { String::new() } else { format!(", {}", setting.join(" ")) };
    let header = format!(
        "# Tuned by `teml tune {}` ({} search, seed {}, {} candidates, {} threads{}): {}.\n\
         # Machine: {}.\n\
         # Median {:.3} ms over {} interleaved rounds (spread {:.0}%){}{}.\n",
        o.space.display(),
        o.strategy,
        o.seed,
        report.candidates,
        o.run.threads.map_or("default".into(), |t| t.to_string()),
        setting,
        b.key,
        crate::runtime::machine::Machine::host().host_line(),
        b.median_s * 1e3,
        o.rounds.max(1),
        b.spread * 100.0,
        b.speedup.map_or(String::new(), |s| format!("; {s:.2}x the untransformed build")),
        b.vs_polly.map_or(String::new(), |s| format!(", {s:.2}x LLVM Polly")),
    );
    let text = match as_written {
        Some(body) => Ok(format!("{header}{body}")),
        None => replay(&o.space, pipe.state(), &header),
    };
    match text {
        Ok(text) => {
            let p = o.out.join("best.teml");
            std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
            b.replay = Some(p);
        }
        Err(e) => b.replay_error = Some(e),
    }
    Ok(())
}

/// Whether the untransformed build `u` beats the fastest candidate `w` of the final round by
/// more than either's spread: then no path of the space is worth taking, and the search hands
/// back the program as written rather than a slower path.
pub(super) fn beats(u: &Contender, w: &Contender) -> bool {
    u.median_s * (1.0 + u.spread.max(w.spread)) < w.median_s
}

/// The `.teml` program of a space: the space itself, or the one a `.rhai` space names.
pub(super) fn program_of_space(space: &Path) -> Result<PathBuf, String> {
    let src = std::fs::read_to_string(space).map_err(|e| format!("cannot read {}: {e}", space.display()))?;
    match space.extension().and_then(|e| e.to_str()) {
        Some("rhai") => pipeline::program_of(space, &src)?.ok_or_else(|| {
            format!(
                "{} names no `{} PATH` (.teml) for its tensors: replay the best path with `teml run {} --param NAME=VALUE ...`",
                space.display(),
                pipeline::PROGRAM_DIRECTIVE,
                space.display()
            )
        }),
        _ => Ok(space.to_path_buf()),
    }
}

/// The replayable script of the untransformed build where it wins: the space's program as it
/// is, where its kernel is that build (every nest as built from its statements, no path of
/// its own); an error otherwise (the program's own path is not what was timed).
pub(super) fn replay_as_written(space: &Path, state: &State, header: &str) -> Result<String, String> {
    let program = program_of_space(space)?;
    let text =
        std::fs::read_to_string(&program).map_err(|e| format!("cannot read {}: {e}", program.display()))?;
    let consts = State { consts: state.consts.clone(), ..State::new() };
    let own = pipeline::eval_file(&program, &consts).map_err(|e| e.to_string())?;
    let req = own.kernels.first().ok_or_else(|| no_kernel(space))?;
    let rebuilt = pipeline::untransformed(&own, req).map_err(|e| e.to_string())?;
    let items = |n: &crate::ir::Nest| serde_json::to_string(&n.items).ok();
    if rebuilt.len() != req.nests.len() || rebuilt.iter().zip(&req.nests).any(|(a, b)| items(a) != items(b)) {
        return Err(format!(
            "{} transforms its kernel itself: the untransformed build is not the program as written",
            program.display()
        ));
    }
    Ok(format!(
        "{header}# Kernel: {} as written: no path of the space beat it. Replay: teml run <this file> --time\n\n{}",
        normalize(&program).display(),
        at_sizes(&text, &state.consts)
    ))
}

/// A `.teml` program's text with its named constants at `consts` (the sizes a path was chosen
/// at): each line `N = 512` whose value differs becomes `N = 1200  # chosen at N=1200; the
/// program's default: 512`, so that `teml run` on the written file replays what was chosen.
pub fn at_sizes(text: &str, consts: &std::collections::BTreeMap<Name, i64>) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let (code, comment) = line.split_once('#').map_or((line, None), |(c, k)| (c, Some(k)));
        let binding = code.split_once('=').and_then(|(name, value)| {
            let (name, value) = (name.trim(), value.trim());
            let ident = !name.is_empty()
                && !line.starts_with(char::is_whitespace)
                && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let default: i64 = value.parse().ok()?;
            let chosen = *consts.get(name)?;
            (ident && chosen != default).then_some((name, chosen, default))
        });
        match binding {
            Some((name, chosen, default)) => out.push_str(&format!(
                "{name} = {chosen}  # chosen at {name}={chosen}; the program's default: {default}{}",
                comment.map_or(String::new(), |c| format!(" ({})", c.trim()))
            )),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The replayable script of a candidate: the space's `.teml` program without its `codegen`
/// statements, then the path that made the kernel's nests (their history), then `codegen`.
pub fn replay(space: &Path, state: &State, header: &str) -> Result<String, String> {
    let program = program_of_space(space)?;
    let text =
        std::fs::read_to_string(&program).map_err(|e| format!("cannot read {}: {e}", program.display()))?;
    let req = state.kernels.first().ok_or_else(|| no_kernel(space))?;
    // The program's own names stay as they are; the path's names avoid them.
    let consts = State { consts: state.consts.clone(), ..State::new() };
    let own = pipeline::eval_file(&program, &consts).map_err(|e| e.to_string())?;
    let taken: BTreeSet<Name> = own.vars.keys().chain(own.consts.keys()).cloned().collect();
    let mut w = Writer::new(&taken);
    // The path starts from the program's own nests, by the names they have at its end (the
    // replay runs the program's text first): a step the program made is never written again,
    // so a name the program rebinds later (`X9 = @A8: ...`, then `@X9: ...` makes `X9` the
    // tensor) is never read at another value than the one the path was made from. A name
    // bound to another nest in the point's state (a space's own variable) is left alone.
    for (name, v) in &own.vars {
        if let (crate::ir::Value::Nest(mine), Some(crate::ir::Value::Nest(theirs))) =
            (v, state.vars.get(name))
            && mine == theirs
        {
            w.bind(&theirs.history, name);
        }
    }
    let mut names = Vec::new();
    for (name, n) in req.names.iter().zip(&req.nests) {
        names.push(w.name_as(&n.history, name).ok_or_else(|| {
            "the best kernel's nests were not all made by builtins from a build: no history to replay"
                .to_string()
        })?);
    }
    let mut out = String::from(header);
    out.push_str(&format!(
        "# Kernel: {} (its codegen statements left out). Replay: teml run <this file> --time\n\n",
        normalize(&program).display()
    ));
    for line in at_sizes(&text, &state.consts).lines() {
        if line.trim_start().starts_with("codegen(") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    // The roles the command line declared (`--result`, `--temporary`): the replay keeps them.
    let declared: Vec<String> = state
        .roles
        .iter()
        .filter(|(t, r)| own.roles.get(*t) != Some(*r))
        .map(|(t, r)| format!("{}({t})", r.builtin()))
        .collect();
    if !declared.is_empty() {
        out.push_str("\n# Declared on the command line (--result, --temporary)\n");
        for l in declared {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out.push_str("\n# The tuned path\n");
    for l in &w.lines {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(&format!("codegen({})\n", names.join(", ")));
    Ok(out)
}

/// The report in words: the search's cost, the final round, the winner and where it went.
pub fn summary(r: &TuneReport) -> String {
    let mut s = format!(
        "{}: {} search (seed {}{}): {} candidates ({} measured, {} from the log), {} rejected{} in {:.1} s \
         (evaluating {:.1} s, compiling {:.1} s, verifying and timing {:.1} s){}\n",
        r.space,
        r.strategy,
        r.seed,
        r.shard.as_ref().map_or(String::new(), |s| format!(", shard {s}")),
        r.candidates,
        r.measured,
        r.resumed,
        r.rejected.values().sum::<usize>(),
        if r.rejected.is_empty() {
            String::new()
        } else {
            format!(
                " ({})",
                r.rejected.iter().map(|(k, v)| format!("{v} {k}")).collect::<Vec<_>>().join(", ")
            )
        },
        r.wall_s,
        r.eval_s,
        r.compile_s,
        r.run_s,
        if r.exhausted { "; the space is exhausted" } else { "" }
    );
    if let Some(b) = r.baseline_s {
        s.push_str(&format!(
            "untransformed build: {:.3} ms (one run, before the first candidate); a candidate's run may take \
             {LIMIT_FACTOR}x that or the best so far (at least {LIMIT_FLOOR_S} s)\n",
            b * 1e3
        ));
    }
    if !r.final_round.is_empty() {
        s.push_str("final round (interleaved):\n");
        for c in &r.final_round {
            s.push_str(&format!(
                "  {:>10.3} ms  spread {:>4.0}%  {}\n",
                c.median_s * 1e3,
                c.spread * 100.0,
                c.name
            ));
        }
    }
    match &r.best {
        Some(b) => {
            s.push_str(&format!("best: {} at {:.3} ms", b.key, b.median_s * 1e3));
            if let Some(x) = b.speedup {
                s.push_str(&format!(", {x:.2}x the untransformed build"));
            }
            if let Some(x) = b.vs_polly {
                s.push_str(&format!(", {x:.2}x LLVM Polly"));
            }
            match (b.lead, b.lead_exceeds_spread) {
                (Some(l), Some(true)) => {
                    s.push_str(&format!("; leads the runner-up by {:.0}%, more than its spread", l * 100.0))
                }
                (Some(l), _) => s.push_str(&format!(
                    "; leads the runner-up by {:.0}%, within its spread of {:.0}% (a tie on this machine)",
                    l * 100.0,
                    b.spread * 100.0
                )),
                _ => {}
            }
            s.push('\n');
            match (&b.replay, &b.replay_error) {
                (Some(p), _) => s.push_str(&format!("replay: teml run {} --time\n", p.display())),
                (None, Some(e)) => s.push_str(&format!("no replay script: {e}\n")),
                _ => {}
            }
            if let Some(c) = &b.c {
                s.push_str(&format!("C: {}\n", c.display()));
            }
        }
        None if r.measured_only => {}
        None => s.push_str("no candidate verified\n"),
    }
    for n in &r.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    s
}
