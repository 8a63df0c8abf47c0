//! Navigation: the loop at a level, rewriting one loop or body in place, loop renaming.

use super::*;

/// The loop at `level` (1-based) on the single path from the root, validated.
pub(super) fn locate(nest: &Nest, level: i64, builtin: &str, arg: &Arg) -> Result<Arc<Loop>> {
    let path = nest.path();
    if level >= 1 && (level as usize) <= path.len() {
        return Ok(path[level as usize - 1].clone());
    }
    let below: Vec<LNode> = match path.last() {
        Some(l) => l.body.clone(),
        None => nest.items.clone(),
    };
    if level > path.len() as i64 && below.len() > 1 && below.iter().any(|x| x.as_loop().is_some()) {
        return Err(Error::BelowBranch {
            builtin: builtin.into(),
            arg: arg.clone(),
            level: level as usize,
            at: path.len() + 1,
            found: format!(
                "{} siblings: {}",
                below.len(),
                below.iter().map(|x| x.describe()).collect::<Vec<_>>().join("; ")
            ),
        });
    }
    Err(Error::LevelOutOfRange { builtin: builtin.into(), arg: arg.clone(), level, depth: path.len() })
}

/// Replaces the items at `depth` (0: the top level; d: the body of the loop at level d) by
/// what `f` returns, rebuilding the path above and sharing everything else.
pub(super) fn rewrite_body(
    nest: &Nest,
    depth: usize,
    f: &mut dyn FnMut(&[LNode]) -> Result<Vec<LNode>>,
) -> Result<Nest> {
    fn go(
        items: &[LNode],
        depth: usize,
        f: &mut dyn FnMut(&[LNode]) -> Result<Vec<LNode>>,
    ) -> Result<Vec<LNode>> {
        if depth == 0 {
            return f(items);
        }
        match items {
            [LNode::Loop(l)] => Ok(vec![LNode::Loop(l.with_body(go(&l.body, depth - 1, f)?))]),
            _ => unreachable!("rewrite_body: path validated by locate"),
        }
    }
    Ok(nest.with_items(go(&nest.items, depth, f)?))
}

/// Replaces the loop at `level` by the items `f` returns.
pub(super) fn rewrite_loop(
    nest: &Nest,
    level: i64,
    builtin: &str,
    arg: &Arg,
    f: &mut dyn FnMut(&Arc<Loop>) -> Result<Vec<LNode>>,
) -> Result<Nest> {
    locate(nest, level, builtin, arg)?;
    rewrite_body(nest, level as usize - 1, &mut |items| match items {
        [LNode::Loop(l)] => f(l),
        _ => unreachable!("rewrite_loop: path validated by locate"),
    })
}

/// Every iterator of the nest and every named constant its bounds or indices mention.
pub(super) fn names_in(nest: &Nest, state: &State) -> BTreeSet<Name> {
    let mut out: BTreeSet<Name> = state.consts.keys().cloned().collect();
    for x in &nest.items {
        collect_names(x, &mut out);
    }
    out
}

pub(super) fn collect_names(x: &LNode, out: &mut BTreeSet<Name>) {
    match x {
        LNode::Stmt(s) => out.extend(s.index_vars()),
        LNode::Loop(l) => {
            out.insert(l.iter.clone());
            out.extend(l.lb.vars());
            out.extend(l.ub.vars());
            l.body.iter().for_each(|c| collect_names(c, out));
        }
    }
}

pub(super) fn level_arg(pos: usize) -> Arg {
    Arg::new(pos, "level")
}

/// Renames iterator `from` to `to` in a loop's subtree (bounds and statements), refusing to
/// capture a name already used inside it.
pub(super) fn rename_loop(l: &Arc<Loop>, to: &Name, builtin: &str, level: usize) -> Result<Arc<Loop>> {
    if l.iter == *to {
        return Ok(l.clone());
    }
    let mut used = BTreeSet::new();
    for c in &l.body {
        collect_names(c, &mut used);
    }
    // A loop inside that binds `to` is renamed first (its iterator is bound there: a fresh name
    // means the same), so that two nests whose loops run the same ranges under swapped names
    // fuse (mvt: `x2`'s nest interchanged runs `j, i` where `x1`'s runs `i, j`).
    let mut inner = Vec::new();
    l.body.iter().for_each(|c| c.loop_iters(&mut inner));
    if inner.contains(to) {
        let fresh = (2..)
            .map(|n| Name::from(format!("{to}{n}").as_str()))
            .find(|f| !used.contains(f) && f != &l.iter)
            .unwrap_or_else(|| to.clone());
        // Each loop that binds `to` takes the fresh name (unused, so never refused).
        fn alpha(x: &LNode, from: &Name, fresh: &Name, builtin: &str, level: usize) -> Result<LNode> {
            Ok(match x {
                LNode::Loop(m) if m.iter == *from => LNode::Loop(rename_loop(m, fresh, builtin, level)?),
                LNode::Loop(m) => LNode::Loop(m.with_body(
                    m.body.iter().map(|c| alpha(c, from, fresh, builtin, level)).collect::<Result<_>>()?,
                )),
                LNode::Stmt(_) => x.clone(),
            })
        }
        let body = l.body.iter().map(|c| alpha(c, to, &fresh, builtin, level)).collect::<Result<_>>()?;
        let renamed = Arc::new(Loop { body, ..(**l).clone() });
        used.clear();
        renamed.body.iter().for_each(|c| collect_names(c, &mut used));
        if !used.contains(to) {
            return rename_loop(&renamed, to, builtin, level);
        }
    }
    if used.contains(to) {
        return Err(Error::FuseMismatch {
            builtin: builtin.into(),
            level,
            expected: format!("iterator `{}` renamable to `{to}`", l.iter),
            found: format!("`{to}` already used inside loop `{}`", l.iter),
        });
    }
    let from = l.iter.clone();
    let sub = |v: &str| (v == &*from).then(|| Expr::var_name(to));
    Ok(Arc::new(Loop {
        iter: to.clone(),
        body: l.body.iter().map(|c| c.subst(&sub)).collect(),
        ..(**l).clone()
    }))
}
