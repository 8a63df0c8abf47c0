//! The verdict: the model's questions asked of isl (order, marks, coverage), remembered per
//! nest and sizes.

use super::*;

/// A verdict, remembered per process: a search evaluates its space once per candidate, and
/// asks the same questions (the legal permutations of the same nest) every time.
pub(super) type Answer = Result<Result<Verdict, Illegal>, String>;

/// Verdicts remembered at most (then forgotten all at once).
pub(super) const MEMO_SIZE: usize = 8192;

pub(super) fn memo() -> &'static std::sync::Mutex<std::collections::HashMap<u64, Answer>> {
    static MEMO: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<u64, Answer>>> =
        std::sync::OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// [`carries`] answers, remembered like verdicts.
pub(super) fn carried_memo() -> &'static std::sync::Mutex<std::collections::HashMap<u64, bool>> {
    static MEMO: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<u64, bool>>> =
        std::sync::OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// [`queries::stays_local`] and [`queries::written_before_read`] answers (the witness of an
/// escaping read, or none), remembered like verdicts.
pub(super) fn escape_memo() -> &'static std::sync::Mutex<std::collections::HashMap<u64, Option<String>>> {
    static MEMO: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<u64, Option<String>>>> =
        std::sync::OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// The answer `memo` keeps under `key`, else `ask`'s, then kept (an error is not kept; without
/// a key nothing is).
pub(super) fn remembered<V: Clone>(
    memo: &std::sync::Mutex<std::collections::HashMap<u64, V>>,
    key: Option<u64>,
    ask: impl FnOnce() -> Result<V, String>,
) -> Result<V, String> {
    if let Some(k) = key
        && let Some(v) = memo.lock().ok().and_then(|m| m.get(&k).cloned())
    {
        return Ok(v);
    }
    let v = ask()?;
    if let Some(k) = key
        && let Ok(mut m) = memo.lock()
    {
        if m.len() >= MEMO_SIZE {
            m.clear();
        }
        m.insert(k, v.clone());
    }
    Ok(v)
}

/// What a verdict depends on: the nest (its loops and statements, not its history), the
/// named constants, and whether every size is asked.
pub(super) fn memo_key(state: &State, nest: &Nest, full: bool) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(nest).ok()?.hash(&mut h);
    state.consts.hash(&mut h);
    full.hash(&mut h);
    Some(h.finish())
}

pub(super) fn analyze(state: &State, nest: &Nest, full: bool) -> Answer {
    let key = memo_key(state, nest, full);
    if let Some(k) = key
        && let Some(a) = memo().lock().ok().and_then(|m| m.get(&k).cloned())
    {
        return a;
    }
    let a = analyze_now(state, nest, full);
    if let Some(k) = key
        && let Ok(mut m) = memo().lock()
    {
        if m.len() >= MEMO_SIZE {
            m.clear();
        }
        m.insert(k, a.clone());
    }
    a
}

pub(super) fn analyze_now(state: &State, nest: &Nest, full: bool) -> Answer {
    let m = Model::new(state, nest)?;
    let (origins, names, width) = (&m.origins, &m.names, m.width);
    with_ctx(|ctx| {
        let deps = dependences(ctx, origins, names, &m.original_each, false, false)?;
        // The order also keeps each accumulator's first update first (the marks realize a
        // reduction with private accumulators, zeroed apart).
        let ordered = dependences(ctx, origins, names, &m.original_each, false, true)?;
        let mut verdict = Verdict::AllSizes;
        // At the program's sizes only: fix them before anything is composed.
        let (deps, ordered, all_sizes) = if full {
            (deps, ordered, m.all_sizes.clone())
        } else {
            (deps.with_params(&m.these)?, ordered.with_params(&m.these)?, m.these.clone())
        };

        // Order: no dependence reversed. The dependences are carried over to times
        // (`T^-1 . D . T`, few pieces) and compared there, rather than comparing every pair of
        // schedule pieces.
        let theta = ctx.map(&new_schedule(&m.places, origins, names, width, &|_| Some(width)))?.coalesce()?;
        let times = theta.clone().reverse()?.then(ordered.clone())?.then(theta.clone())?;
        let backwards = times.and(ctx.map(&time_relation(names, width, width, Rel::NotBefore))?)?;
        if !backwards.clone().with_params(&all_sizes)?.is_empty()? {
            let at_these = backwards.with_params(&m.these)?;
            if at_these.is_empty()? {
                verdict = Verdict::TheseSizes(m.sizes.clone());
            } else {
                let pairs =
                    ordered.clone().and(theta.clone().then(at_these)?.then(theta.clone().reverse()?)?)?;
                let w = pairs.with_params(&m.these)?.coalesce()?.sample()?.unwrap_or_default();
                return Ok(Err(Illegal { message: witness(&w, origins, state, None) }));
            }
        }

        // Coverage: exactly the original instances run (at other sizes, a nest strip-mined
        // without `min`, or unrolled, misses some or runs others: it is legal only at these sizes).
        // The gate every builtin runs asks it too, at the program's sizes.
        {
            let unit = format!(
                "{} -> {{ [{}] -> [] }}",
                names.param_list(),
                (0..width).map(|k| format!("a{k}")).collect::<Vec<_>>().join(", ")
            );
            let ran = theta.clone().then(ctx.map(&unit)?)?;
            let domain = ctx.map(&domain_map(origins, names))?;
            let missing = domain.clone().minus(ran.clone())?;
            let extra = ran.minus(domain)?;
            let off = missing.or(extra)?;
            if !off.clone().with_params(&all_sizes)?.is_empty()? {
                match off.with_params(&m.these)?.coalesce()?.sample()? {
                    None => verdict = Verdict::TheseSizes(m.sizes.clone()),
                    Some(w) => {
                        return Ok(Err(Illegal {
                            message: format!(
                                "the transformed nest does not run exactly the original instances: {w}"
                            ),
                        }));
                    }
                }
            }
        }

        // Marks: no dependence carried by a marked loop.
        for (d, l) in marked_loops(&nest.items) {
            let (at, carried) = m.carried(ctx, &deps, d, l)?;
            if carried.clone().with_params(&all_sizes)?.is_empty()? {
                continue;
            }
            let at_these = carried.with_params(&m.these)?;
            if at_these.is_empty()? {
                verdict = Verdict::TheseSizes(m.sizes.clone());
                continue;
            }
            let what = match (l.annot.parallel, l.annot.vectorize) {
                (true, true) => "parallelized and vectorized",
                (true, false) => "parallelized",
                _ => "vectorized",
            };
            let pairs = deps.clone().and(at.clone().then(at_these)?.then(at.reverse()?)?)?;
            let w = pairs.with_params(&m.these)?.coalesce()?.sample()?.unwrap_or_default();
            let how = format!("loop `{}` is {what} and runs the two in different iterations", l.iter);
            return Ok(Err(Illegal { message: witness(&w, origins, state, Some(&how)) }));
        }

        // In place: each result stored over an operand overwrites only values already read (in the
        // original order; the order above keeps every such read first).
        for y in nest.over.keys() {
            let mut apart = nest.clone();
            let Some(x) = apart.over.remove(y) else { continue };
            if let Err(i) = stays_in_place(state, &apart, y, &x)? {
                return Ok(Err(i));
            }
        }

        // Storage: a tensor stored per iteration of a loop is read only where that iteration wrote it.
        for (d, l) in loops_where(&nest.items, &|l| !l.annot.store_at.is_empty()) {
            for t in &l.annot.store_at {
                match m.escapes(ctx, Some((d, l)), t, &all_sizes)? {
                    None => continue,
                    Some(_) if m.escapes(ctx, Some((d, l)), t, &m.these)?.is_none() => {
                        verdict = Verdict::TheseSizes(m.sizes.clone());
                    }
                    Some(_) => {
                        let w = m.escapes(ctx, Some((d, l)), t, &m.these)?.unwrap_or_default();
                        return Ok(Err(Illegal { message: w }));
                    }
                }
            }
        }
        Ok(Ok(verdict))
    })
}
