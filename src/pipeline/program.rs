//! A meta-program the pipeline can evaluate again at other sizes ([`Program`]), the
//! evaluation of program files, and the `// program:` line of scripts.

use crate::error::ProgramError;
use crate::ir::{Name, Roles, State};
use crate::script::Env;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A meta-program the pipeline can evaluate again at other sizes (reduced-size verification,
/// the REPL's `:def`): a file, the REPL's log of inputs, or any function of the named
/// constants.
pub struct Program {
    /// What the user calls it, e.g. the file's path or `<repl>`.
    pub label: String,
    /// Named constants fixed from outside (`-D`, `:def`); they override the program's own
    /// `N = ...` defaults.
    pub defines: BTreeMap<Name, i64>,
    eval: Box<EvalFn>,
}

/// Evaluates a program from the named constants it is given.
pub type EvalFn = dyn Fn(&BTreeMap<Name, i64>) -> Result<State, ProgramError>;

impl Program {
    /// A program evaluated by `eval` from the named constants it is given.
    pub fn new(
        label: &str,
        defines: BTreeMap<Name, i64>,
        eval: impl Fn(&BTreeMap<Name, i64>) -> Result<State, ProgramError> + 'static,
    ) -> Program {
        Program { label: label.to_string(), defines, eval: Box::new(eval) }
    }

    /// A `.teml` or `.rhai` file; `unchecked` skips the legality check of transformations.
    pub fn file(path: &std::path::Path, defines: BTreeMap<Name, i64>, unchecked: bool) -> Program {
        Program::with_params(path, defines, unchecked, crate::ir::Params::default(), Env::default())
    }

    /// A file whose tuning parameters (`param(name, choices)`) take the choices `params` fixes
    /// (a candidate of `teml tune`), its scripts run in `env`.
    pub fn with_params(
        path: &std::path::Path,
        defines: BTreeMap<Name, i64>,
        unchecked: bool,
        params: crate::ir::Params,
        env: Env,
    ) -> Program {
        Program::declaring(path, defines, unchecked, params, env, Roles::new())
    }

    /// [`Program::with_params`] with the tensors the command line declared results or
    /// temporaries (`--result`, `--temporary`): declared before the program runs, each must
    /// name a tensor of it.
    pub fn declaring(
        path: &std::path::Path,
        defines: BTreeMap<Name, i64>,
        unchecked: bool,
        params: crate::ir::Params,
        env: Env,
        roles: Roles,
    ) -> Program {
        let p = path.to_path_buf();
        Program::new(&path.display().to_string(), defines, move |consts| {
            let given = roles.keys().cloned().collect();
            let base = State {
                unchecked,
                params: params.clone(),
                roles: roles.clone(),
                roles_given: given,
                ..State::new()
            };
            let state = consts.iter().fold(base, |s, (n, v)| s.with_const(n, *v));
            let s = eval_file_in(&p, &state, &env)?;
            check_declared(&s, &roles, &p)?;
            Ok(s)
        })
    }

    /// Evaluates with the user's constants.
    pub fn eval(&self) -> Result<State, ProgramError> {
        (self.eval)(&self.defines)
    }

    /// Evaluates with other constants.
    pub fn eval_with(&self, consts: &BTreeMap<Name, i64>) -> Result<State, ProgramError> {
        (self.eval)(consts)
    }
}

/// Each tensor the command line declared (`roles`) is one the program has.
fn check_declared(s: &State, roles: &Roles, path: &std::path::Path) -> Result<(), ProgramError> {
    for (t, role) in roles {
        if s.real_tensor(t).is_none() {
            let mut names: Vec<String> = s
                .vars
                .iter()
                .filter(|(n, _)| s.real_tensor(n).is_some())
                .map(|(n, _)| n.to_string())
                .collect();
            names.truncate(12);
            return Err(ProgramError::plain(format!(
                "error: --{} {t}: expected a tensor of {}, found none named `{t}` (its tensors: {})",
                role.builtin(),
                path.display(),
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// Evaluates a program file from `state`: `.rhai` as a Rhai script, anything else in the
/// paper's syntax. Scripts run with no measurer ([`eval_file_in`] gives one).
pub fn eval_file(path: &std::path::Path, state: &State) -> Result<State, ProgramError> {
    eval_file_in(path, state, &Env::default())
}

/// [`eval_file`] with scripts run in `env`.
pub fn eval_file_in(path: &std::path::Path, state: &State, env: &Env) -> Result<State, ProgramError> {
    eval_chain(path, state, env, &mut Vec::new())
}

/// [`eval_file_in`] of a file reached through the `// program:` lines of the files in `chain`:
/// a file met twice is a cycle, refused (only `.teml` files can be named, and they name none,
/// so this is a second line of defence against unbounded recursion).
fn eval_chain(
    path: &std::path::Path,
    state: &State,
    env: &Env,
    chain: &mut Vec<PathBuf>,
) -> Result<State, ProgramError> {
    let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if chain.contains(&key) {
        let names: Vec<String> = chain.iter().chain([&key]).map(|p| p.display().to_string()).collect();
        return Err(ProgramError::plain(format!(
            "error: {}: expected `{PROGRAM_DIRECTIVE}` lines that end in a .teml program, found a cycle: {}",
            path.display(),
            names.join(" -> ")
        )));
    }
    chain.push(key);
    let src =
        std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {}: {e}", path.display()))?;
    let file = path.display().to_string();
    match path.extension().and_then(|e| e.to_str()) {
        Some("rhai") => {
            let start = match program_of(path, &src)? {
                Some(teml) => {
                    let s = eval_chain(&teml, state, env, chain)?;
                    State { kernels: Vec::new(), ..s }
                }
                None => state.clone(),
            };
            Ok(crate::script::eval_in(&src, &file, &start, &crate::script::Limits::default(), env)?)
        }
        _ => Ok(crate::lang::eval_with(&src, &file, state, &crate::script::Stdlib::get())?),
    }
}

/// The directive of a `.rhai` script that runs on top of a `.teml` program: a line
/// `// program: PATH` among its leading comments (PATH relative to the script's folder). The
/// program is evaluated first, its `codegen` requests dropped, and the script starts from its σ
/// (a search space over the kernel of `examples/mm.teml`, say). Only a `.teml` file can be
/// named, so a chain of programs always ends: a script cannot lead back to itself.
pub const PROGRAM_DIRECTIVE: &str = "// program:";

/// The `.teml` program a script names with [`PROGRAM_DIRECTIVE`], if any; an error, located
/// at the directive (`file:line:col`), when it names something else or no file.
pub fn program_of(script: &std::path::Path, src: &str) -> Result<Option<PathBuf>, String> {
    let leading =
        src.lines().enumerate().take_while(|(_, l)| l.trim().is_empty() || l.trim_start().starts_with("//"));
    for (k, line) in leading {
        let Some(p) = line.trim().strip_prefix(PROGRAM_DIRECTIVE) else { continue };
        let col = line.len() - line.trim_start().len() + 1;
        let at = format!("{}:{}:{col}", script.display(), k + 1);
        let dir = script.parent().unwrap_or(std::path::Path::new("."));
        let path = dir.join(p.trim());
        if path.extension().and_then(|e| e.to_str()) != Some("teml") {
            return Err(format!(
                "error: {at}: `{PROGRAM_DIRECTIVE} {}`: expected a .teml file (the tensors a script works on), found `{}`",
                p.trim(),
                p.trim()
            ));
        }
        if !path.is_file() {
            return Err(format!(
                "error: {at}: `{PROGRAM_DIRECTIVE} {}`: expected a .teml file, found no file {}",
                p.trim(),
                path.display()
            ));
        }
        return Ok(Some(path));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file met again along `// program:` lines is a cycle, refused with the chain (only
    /// `.teml` files can be named, so no file can make one: the chain is given here).
    #[test]
    fn a_program_chain_that_cycles_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("a.teml");
        std::fs::write(&f, "A = tensor([4])\n").unwrap();
        let mut chain = vec![f.canonicalize().unwrap()];
        let e = eval_chain(&f, &State::new(), &Env::default(), &mut chain).unwrap_err();
        assert!(e.message.contains("found a cycle") && e.message.contains("a.teml -> "), "{e}");
        assert!(eval_chain(&f, &State::new(), &Env::default(), &mut Vec::new()).is_ok());
    }
}
