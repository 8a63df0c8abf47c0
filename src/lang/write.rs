//! Values written back as statements in the paper's syntax: what `:export` writes for the
//! values that Rhai inputs made (declarations, nests from their histories, `init`, `codegen`).

use crate::ir::{History, Iters, Name, Nest, Shape, State, StepArg, TExpr, Value, Writer};
use std::collections::BTreeSet;

/// The paper-syntax statements that take `before` to `after` (for what Rhai inputs bound):
/// tensor declarations, the histories of nests, `init` and `codegen` statements. Fails on a
/// value that has no such statement.
pub fn statements_for(before: &State, after: &State, taken: &BTreeSet<Name>) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let changed: Vec<(&Name, &Value)> =
        after.vars.iter().filter(|(n, v)| before.vars.get(*n) != Some(*v)).collect();
    // Nests in the order they were made (a nest after those its history uses).
    let mut nests: Vec<(&Name, &Nest)> = changed
        .iter()
        .filter_map(|(n, v)| if let Value::Nest(x) = v { Some((*n, x)) } else { None })
        .collect();
    nests.sort_by_key(|(_, n)| depth(&n.history));
    for (name, v) in &changed {
        match v {
            Value::Tensor(t) if t.is_tensor_leaf() => out.push(format!("{name} = {}", declaration(t))),
            Value::Tensor(_) => {
                return Err(format!(
                    ":export: the tensor expression `{name}` was made in Rhai and has no statement in the paper's syntax; \
                     write it in the paper's syntax, or :save FILE.json to keep the whole state"
                ));
            }
            Value::Nest(_) => {}
        }
    }
    let same =
        |a: &History, b: &History| matches!((&a.0, &b.0), (Some(x), Some(y)) if std::sync::Arc::ptr_eq(x, y));
    for (name, n) in &nests {
        if !n.history.is_complete() {
            return Err(format!(
                ":export: how `{name}` was made is not known; :save FILE.json keeps the whole state"
            ));
        }
        // Its steps refer by name to the nests bound before it and beside it; fresh names
        // avoid every identifier of the session but this one.
        let others: BTreeSet<Name> =
            taken.iter().filter(|t| t.to_string() != name.to_string()).cloned().collect();
        let mut w = Writer::new(&others);
        let bound =
            before.vars.iter().filter_map(|(b, x)| if let Value::Nest(x) = x { Some((b, x)) } else { None });
        for (b, x) in bound.chain(nests.iter().map(|(b, x)| (*b, *x))) {
            // (a nest bound under another name too is written again under this one)
            if b != *name && !same(&x.history, &n.history) {
                w.bind(&x.history, b.as_ref());
            }
        }
        let made = w.name_as(&n.history, name).ok_or_else(|| format!(":export: cannot write `{name}`"))?;
        if made != name.to_string() {
            return Err(format!(":export: cannot write `{name}` under its own name"));
        }
        out.append(&mut w.lines);
    }
    for (name, init) in &after.inits {
        if before.inits.get(name) != Some(init) {
            out.push(format!("init({name}, {})", init.teml()));
        }
    }
    for k in &after.kernels[before.kernels.len().min(after.kernels.len())..] {
        let mut args: Vec<String> = k.names.iter().map(|n| n.to_string()).collect();
        args.extend(k.label.iter().map(|l| format!("{l:?}")));
        out.push(format!("codegen({})", args.join(", ")));
    }
    Ok(out)
}

/// The paper-syntax declaration of a real tensor: `tensor(double, [N, 250])`, `scalar(float)`.
fn declaration(t: &TExpr) -> String {
    match (&t.iters, &t.shape) {
        (Iters::Bullet, _) | (_, Shape::Bullet) => format!("scalar({})", t.dtype),
        (_, shape) => format!("tensor({}, {shape})", t.dtype),
    }
}

/// How many steps made the nest, along its longest chain from a `build`.
fn depth(h: &History) -> usize {
    h.0.as_ref().map_or(0, |s| {
        1 + s.args.iter().map(|a| if let StepArg::Nest(x) = a { depth(x) } else { 0 }).max().unwrap_or(0)
    })
}

/// A program variable `name` as a Rhai script refers to it: the name itself where Rhai reads it
/// as a variable, else `lookup("name")` (a tensor or nest named after a word Rhai reserves:
/// `var`, `fn`, `in`, `match`, `let`, `this`, ...; the `.teml` front-end accepts them). Every
/// script teml writes (generated spaces) names the program's values through this.
pub fn rhai_ref(name: &str) -> String {
    if rhai_variable(name) { name.to_string() } else { format!("lookup({})", rhai_string(name)) }
}

/// `text` as a Rhai string literal.
pub fn rhai_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// True if Rhai reads `name` as a variable: a plain identifier that Rhai neither reserves nor
/// gives a meaning of its own (asked of Rhai's own parser, so that its list of keywords is the
/// one used).
fn rhai_variable(name: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !plain {
        return false;
    }
    let seen = SEEN.get_or_init(Default::default);
    if let Some(&ok) = seen.lock().ok().and_then(|m| m.get(name).copied()).as_ref() {
        return ok;
    }
    let engine = rhai::Engine::new_raw();
    let ok = engine.compile(format!("let {name} = 0; {name}")).is_ok();
    if let Ok(mut m) = seen.lock() {
        m.insert(name.to_string(), ok);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_rhai_reserves_are_looked_up() {
        for ok in ["A", "l1", "p_2", "tmp", "x"] {
            assert_eq!(rhai_ref(ok), ok);
        }
        for reserved in [
            "var", "fn", "in", "match", "let", "do", "as", "new", "static", "shared", "case", "default",
            "this",
        ] {
            assert_eq!(rhai_ref(reserved), format!("lookup(\"{reserved}\")"), "{reserved}");
        }
    }
}
