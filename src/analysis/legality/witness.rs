//! The witness: a pair of instances isl found, in the words of the program (the statements,
//! the iterations, the element they both touch).

use super::*;

/// A statement instance read off a point: the origin index and the iterator values.
pub(super) type Tuple = (usize, Vec<i64>);

/// Values read off isl's printing of one point, e.g.
/// `[p_N] -> { S0[o_i] -> S1[q_i] : p_N = 4 and o_i = 2 and q_i = 1 }` or `{ S0[2] -> S1[1] }`.
pub(super) fn point(text: &str) -> (Vec<(String, i64)>, Option<Tuple>, Option<Tuple>) {
    let body = text.split_once('{').map_or(text, |(_, b)| b).trim_end_matches('}').trim();
    let (tuples, cons) = body.split_once(':').unwrap_or((body, ""));
    let mut vals: BTreeMap<String, i64> = BTreeMap::new();
    for c in cons.split(" and ") {
        if let Some((n, v)) = c.split_once('=')
            && let Ok(v) = v.trim().parse::<i64>()
        {
            vals.insert(n.trim().to_string(), v);
        }
    }
    let tuple = |t: &str| -> Option<(usize, Vec<i64>)> {
        let t = t.trim();
        let (head, rest) = t.split_once('[')?;
        let k: usize = head.trim().strip_prefix('S')?.parse().ok()?;
        let inner = rest.trim_end_matches(']');
        let mut out = Vec::new();
        for d in inner.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let v = match d.split_once('=') {
                Some((_, v)) => v.trim().parse().ok()?,
                None => match d.parse::<i64>() {
                    Ok(v) => v,
                    Err(_) => *vals.get(d)?,
                },
            };
            out.push(v);
        }
        Some((k, out))
    };
    let (a, b) = tuples.split_once("->").unwrap_or((tuples, ""));
    let params =
        vals.iter().filter(|(n, _)| n.starts_with("p_")).map(|(n, v)| (n[2..].to_string(), *v)).collect();
    (params, tuple(a), tuple(b))
}

/// "B[1][0] is written by statement 1 (`..`) at (i=1, j=0) and read by statement 2 (`..`) at
/// (i=0, j=1); the transformed nest reads it before it is written (N=6)", or, for a mark,
/// `mark` says how the loop would break the pair.
pub(super) fn witness(sample: &str, origins: &[Origin], state: &State, mark: Option<&str>) -> String {
    let (params, a, b) = point(sample);
    let (Some((ka, va)), Some((kb, vb))) = (a, b) else {
        return format!("a dependence would be reversed: {sample}");
    };
    let (Some(oa), Some(ob)) = (origins.get(ka), origins.get(kb)) else {
        return format!("a dependence would be reversed: {sample}");
    };
    let env = |o: &Origin, vals: &[i64]| -> BTreeMap<String, i64> {
        let mut m: BTreeMap<String, i64> =
            o.iters.iter().map(|i| i.to_string()).zip(vals.iter().copied()).collect();
        for (p, v) in &params {
            m.entry(p.clone()).or_insert(*v);
        }
        for (p, v) in &state.consts {
            m.entry(p.to_string()).or_insert(*v);
        }
        m
    };
    let (ea, eb) = (env(oa, &va), env(ob, &vb));
    let at = |x: &Access, e: &BTreeMap<String, i64>| -> Option<Vec<i64>> {
        x.index.iter().map(|i| i.eval(&|v| e.get(v).copied()).ok()).collect()
    };
    // The pair of accesses that meet at one element (the updates of one reduction apart:
    // those of one value of the iterators it does not sum over).
    let one_sum = ka == kb
        && oa
            .iters
            .iter()
            .zip(&oa.inst.reduction)
            .zip(va.iter().zip(&vb))
            .all(|((_, r), (x, y))| *r || x == y);
    let mut found = None;
    'outer: for x in &oa.accesses {
        for y in &ob.accesses {
            if x.tensor == y.tensor
                && (x.write || y.write)
                && !(one_sum && x.accumulates && y.accumulates)
                && let (Some(i), Some(j)) = (at(x, &ea), at(y, &eb))
                && i == j
            {
                found = Some((x, y, i));
                break 'outer;
            }
        }
    }
    let inst = |o: &Origin, vals: &[i64]| -> String {
        let parts: Vec<String> = o.iters.iter().zip(vals).map(|(i, v)| format!("{i}={v}")).collect();
        format!("({})", parts.join(", "))
    };
    let stmt = |k: usize, o: &Origin| format!("statement {} (`{}`)", k + 1, o.stmt);
    let sizes: Vec<String> = params.iter().map(|(p, v)| format!("{p}={v}")).collect();
    let sizes = if sizes.is_empty() { String::new() } else { format!(" ({})", sizes.join(", ")) };
    match found {
        Some((x, y, el)) => {
            let element: String = el.iter().map(|i| format!("[{i}]")).collect();
            let (verb_a, verb_b, reversed) = match (x.write, y.write) {
                (true, false) => ("written", "read", "the transformed nest reads it before it is written"),
                (false, true) => {
                    ("read", "overwritten", "the transformed nest overwrites it before it is read")
                }
                _ => ("written", "written again", "the transformed nest writes it in the opposite order"),
            };
            let how = mark.unwrap_or(reversed);
            // Two updates of one sum that are no reduction: say why (an integer element summing
            // non-integers truncates at each update, `model::origins`).
            let why = if one_sum
                && x.write
                && y.write
                && !x.accumulates
                && lower(&oa.stmt).is_some_and(|lw| lw.truncates())
            {
                format!(
                    " ({} is an integer summing values that are not integers: each update truncates, so the \
                     updates keep their order)",
                    x.tensor
                )
            } else {
                String::new()
            };
            format!(
                "{}{element} is {verb_a} by {} at {} and {verb_b} by {} at {}; {how}{sizes}{why}",
                x.tensor,
                stmt(ka, oa),
                inst(oa, &va),
                stmt(kb, ob),
                inst(ob, &vb)
            )
        }
        None if one_sum && oa.accesses.iter().any(|x| x.accumulates && x.zeroed) => format!(
            "{} at {} is the first update of its sum, which zeroes the element, and must come before {} at {}; \
             {}{sizes}",
            stmt(ka, oa),
            inst(oa, &va),
            stmt(kb, ob),
            inst(ob, &vb),
            mark.unwrap_or("the transformed nest runs them in the opposite order")
        ),
        None => format!(
            "{} at {} must come before {} at {}; {}{sizes}",
            stmt(ka, oa),
            inst(oa, &va),
            stmt(kb, ob),
            inst(ob, &vb),
            mark.unwrap_or("the transformed nest runs them in the opposite order")
        ),
    }
}
