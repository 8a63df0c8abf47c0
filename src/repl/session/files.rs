//! What the REPL shows and writes: diffs of two values' trees and C, `:export` of the session
//! as a program, `:load` of a saved state.

use super::*;

impl Repl {
    /// `:diff a b`: the two nests as trees and as generated C, each as a unified diff.
    pub(super) fn diff(&self, a: &str, b: &str) -> Result<String, String> {
        for id in [a, b] {
            self.request(id)?;
        }
        let (Some(Value::Nest(na)), Some(Value::Nest(nb))) = (self.state.get(a), self.state.get(b)) else {
            return Err(format!(":diff: `{a}` and `{b}` must be loop nests"));
        };
        // Both under one neutral name, so that the diff shows the loops, not the names.
        let c = |n: &crate::ir::Nest| {
            crate::codegen::generate(&self.state, "teml_kernel", &[(Name::from("nest"), n.clone())])
                .map(|k| k.source)
                .map_err(|e| e.to_string())
        };
        let (ca, cb) = (c(na)?, c(nb)?);
        let trees = unified_diff(&na.tree(), &nb.tree(), &format!("{a} (tree)"), &format!("{b} (tree)"));
        let code = unified_diff(&ca, &cb, &format!("{a}.c"), &format!("{b}.c"));
        if trees.is_empty() && code.is_empty() {
            return Ok(format!("`{a}` and `{b}` are the same nest"));
        }
        let mut out = if trees.is_empty() { "same tree\n".to_string() } else { trees };
        out.push_str(if code.is_empty() { "same C" } else { &code });
        Ok(out.trim_end().to_string())
    }

    /// `:export FILE.teml`: the session as a program in the paper's syntax, with the named
    /// constants it used, that `teml run FILE` evaluates to the same state. Lines typed in the
    /// paper's syntax and loaded `.teml` files are written as they are; what Rhai inputs (or a
    /// loaded `.rhai` or saved state) bound is written from the values: declarations, the
    /// histories of nests, `init` and `codegen` statements. A tensor expression made in Rhai
    /// has no statement to write it with: the export then says which and suggests `:save`.
    pub(super) fn export(&self, path: &Path) -> Result<String, String> {
        if path.extension().and_then(|e| e.to_str()) != Some("teml") {
            return Err(format!(":export: expected a FILE.teml, found `{}`", path.display()));
        }
        let mut out =
            vec![format!("# A teml REPL session, exported by :export. Replay: teml run {}", path.display())];
        for (n, v) in &self.defines {
            out.push(format!("{n} = {v}"));
        }
        let taken: std::collections::BTreeSet<Name> = self.state.vars.keys().cloned().collect();
        let mut state = initial(&self.defines, self.state.unchecked);
        let mut session = None;
        for e in &self.log {
            let before = state.clone();
            apply(e, &mut state, &mut session, &self.defines, &self.env)
                .map_err(|e| format!(":export: {}", e.with_hint()))?;
            match e {
                Entry::Teml(src) => match const_default(src) {
                    Some(n) if self.defines.contains_key(n) => {
                        out.push(format!("# {}  (the session's value is above)", src.trim()))
                    }
                    _ => out.push(src.trim().to_string()),
                },
                Entry::Load(p) if p.extension().and_then(|e| e.to_str()) == Some("teml") => {
                    let text = std::fs::read_to_string(p)
                        .map_err(|e| format!(":export: cannot read {}: {e}", p.display()))?;
                    out.push(format!("# :load {}", p.display()));
                    // Its constants' defaults give way to the session's values written above.
                    out.extend(text.lines().map(|l| match const_default(l) {
                        Some(n) if self.defines.contains_key(n) => {
                            format!("# {l}  (the session's value is above)")
                        }
                        _ => l.to_string(),
                    }));
                }
                Entry::Rhai(_) | Entry::Load(_) | Entry::Saved(_) => {
                    out.extend(crate::lang::statements_for(&before, &state, &taken)?);
                }
            }
        }
        let mut text = out.join("\n");
        text.push('\n');
        // The file must evaluate to what the session holds.
        let check = crate::lang::eval_with(
            &text,
            &path.display().to_string(),
            &initial(&BTreeMap::new(), self.state.unchecked),
            &Stdlib::get(),
        )
        .map_err(|e| format!(":export: the written program does not evaluate (please report): {e}"))?;
        if let Some((n, _)) = self.state.vars.iter().find(|(n, v)| check.vars.get(*n) != Some(*v)) {
            return Err(format!(
                ":export: `{n}` could not be written in the paper's syntax; :save FILE.json keeps the whole state"
            ));
        }
        std::fs::write(path, &text).map_err(|e| format!(":export: cannot write {}: {e}", path.display()))?;
        Ok(format!(
            "exported {} ({} lines); run it with `teml run {}`",
            path.display(),
            out.len(),
            path.display()
        ))
    }

    pub(super) fn load(&self, path: &Path) -> Result<State, String> {
        if path.extension().and_then(|e| e.to_str()) == Some("json") {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!(":load: cannot read {}: {e}", path.display()))?;
            let state = State::from_json(&text)
                .map_err(|e| format!(":load: {}: not a saved state: {e}", path.display()))?;
            // A state saved before nests kept their untransformed program gets it back.
            return crate::ops::with_programs(&state).map_err(|e| format!(":load: {}: {e}", path.display()));
        }
        crate::pipeline::eval_file_in(path, &self.state, &self.env).map_err(|e| e.with_hint())
    }
}
