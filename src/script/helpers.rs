//! The host helpers the standard library is written with (their table is
//! [`super::library::HELPERS`]): they inspect values (`rank`, `shape`, `iterators`, ...), ask
//! the legality analysis (`legal`, `legal_permutations`, `permute`), and reach the shell
//! (`param`, `time`).

use super::shared::Shared;
use super::values::{IndexVal, TensorVal, describe, index_dynamic, short, to_dynamic, to_value};
use crate::error::{Arg, Error};
use crate::ir::{Dim, Expr, Iters, Name, Nest, Op, State, TExpr, Value};
use crate::ops;
use rhai::{Array, Dynamic, Engine, EvalAltResult, ImmutableString, NativeCallContext};
use std::collections::BTreeSet;
use std::rc::Rc;

type RhaiResult<T> = Result<T, Box<EvalAltResult>>;

/// A JSON object as a Rhai map (numbers, booleans, strings, `()` for null).
fn json_map(v: &serde_json::Value) -> rhai::Map {
    fn dynamic(v: &serde_json::Value) -> Dynamic {
        match v {
            serde_json::Value::Null => Dynamic::UNIT,
            serde_json::Value::Bool(b) => Dynamic::from(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Dynamic::from(i),
                None => Dynamic::from(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Dynamic::from(s.clone()),
            serde_json::Value::Array(xs) => Dynamic::from(xs.iter().map(dynamic).collect::<Array>()),
            serde_json::Value::Object(_) => Dynamic::from(json_map(v)),
        }
    }
    match v {
        serde_json::Value::Object(m) => m.iter().map(|(k, x)| (k.as_str().into(), dynamic(x))).collect(),
        _ => rhai::Map::new(),
    }
}

fn tensor_of(d: &Dynamic, helper: &str) -> RhaiResult<TExpr> {
    match to_value(d) {
        Some(Value::Tensor(t)) => Ok(t),
        _ => Err(format!("{helper}: expected a tensor expression, found {}", describe(d)).into()),
    }
}

/// `auto_space(l)`: the space the rules generate from `l`, evaluated here (its `param` calls
/// are this program's parameters, so a hand-written space can start from it); `auto(l)`
/// (`first`): its first legal point in the model's order, parameters untouched.
fn generated(
    ctx: &NativeCallContext,
    sh: &Rc<Shared>,
    l: &Dynamic,
    helper: &str,
    first: Option<()>,
) -> RhaiResult<Dynamic> {
    use crate::schedule;
    let nest = nest_of(l, helper)?;
    let state = sh.state.borrow().clone();
    let name = Name::from("l");
    let space = schedule::Machine::this()
        .and_then(|m| schedule::generate(&state, &[(name, nest.clone())], &m))
        .map_err(|e| format!("{helper}: {e}"))?;
    let src = format!("{}\np", space.body);
    let run = |values: Option<&std::collections::BTreeMap<String, String>>| -> Result<Dynamic, String> {
        let mut scope = rhai::Scope::new();
        scope.push_dynamic("l", to_dynamic(Value::Nest(nest.clone())));
        let mut tensors: Vec<Name> = Vec::new();
        for s in nest.stmts() {
            s.visit(&mut |t| {
                if let Some(id) = t.id().filter(|_| t.is_tensor_leaf())
                    && !tensors.contains(id)
                {
                    tensors.push(id.clone());
                }
            });
        }
        for t in tensors {
            if let Some(x) = state.real_tensor(&t) {
                scope.push_dynamic(t.to_string(), to_dynamic(Value::Tensor(x)));
            }
        }
        // auto(l) takes the model's choices without asking the program's parameters.
        let saved = values.map(|v| {
            let p = crate::ir::Params { values: v.clone(), ..Default::default() };
            std::mem::replace(&mut sh.state.borrow_mut().params, p)
        });
        let out = ctx.engine().eval_with_scope::<Dynamic>(&mut scope, &src).map_err(|e| e.to_string());
        if let Some(p) = saved {
            sh.state.borrow_mut().params = p;
        }
        out
    };
    match first {
        None => run(None).map_err(|e| format!("{helper}: {e}").into()),
        Some(()) => schedule::first_legal(&space, &mut |v| run(Some(v))).map(|(d, _)| d).map_err(|why| {
            format!("{helper}: no point of the generated space is legal here: {}", why.join("; ")).into()
        }),
    }
}

fn nest_of(d: &Dynamic, helper: &str) -> RhaiResult<Nest> {
    match to_value(d) {
        Some(Value::Nest(n)) => Ok(n),
        _ => Err(format!("{helper}: expected a loop nest, found {}", describe(d)).into()),
    }
}

/// The tensor an expression denotes as an operand: an assignment's real target.
fn operand_view(t: &TExpr) -> TExpr {
    if t.is_assign() { crate::ir::real_leaf(t.target().unwrap_or(t)) } else { t.clone() }
}

fn free_iters(state: &State, t: &TExpr) -> Vec<Name> {
    if t.is_assign() {
        return t
            .target()
            .and_then(|x| x.index_list())
            .map(|xs| xs.iter().filter_map(|x| x.as_var().cloned()).collect())
            .unwrap_or_default();
    }
    let consts = crate::analysis::infer::constants(state, &[t]);
    let bound: BTreeSet<Name> = t.bound_iters().into_iter().collect();
    crate::analysis::infer::iterators(t, &consts).into_iter().filter(|v| !bound.contains(v)).collect()
}

fn index_list(d: &Dynamic, helper: &str) -> RhaiResult<Vec<Expr>> {
    let Some(xs) = d.clone().try_cast::<Array>() else {
        return Err(format!("{helper}: expected a list of indices, found {}", describe(d)).into());
    };
    xs.iter()
        .map(|x| {
            if let Some(IndexVal(e)) = x.clone().try_cast::<IndexVal>() {
                Ok(e)
            } else if let Ok(i) = x.as_int() {
                Ok(Expr::int(i))
            } else {
                Err(format!("{helper}: expected indices in the list, found {}", describe(x)).into())
            }
        })
        .collect()
}

fn names_to_avoid(state: &State, avoid: &Dynamic) -> BTreeSet<Name> {
    let mut out: BTreeSet<Name> = state.consts.keys().cloned().collect();
    let items: Array = avoid.clone().try_cast::<Array>().unwrap_or_else(|| vec![avoid.clone()]);
    for x in &items {
        if let Some(Value::Tensor(t)) = to_value(x) {
            out.extend(crate::analysis::infer::constants(state, &[&t]));
            out.extend(t.bound_iters());
        } else if let Some(IndexVal(e)) = x.clone().try_cast::<IndexVal>() {
            out.extend(e.vars());
        } else if x.is_string() {
            out.insert(Name::from(x.to_string().as_str()));
        }
    }
    out
}

fn fresh_list(prefix: &str, n: i64, avoid: &BTreeSet<Name>) -> Array {
    let mut out = Array::new();
    let mut k = 1i64;
    while (out.len() as i64) < n {
        let name = format!("{prefix}{k}");
        if !avoid.contains(name.as_str()) {
            out.push(Dynamic::from(IndexVal(Expr::var(&name))));
        }
        k += 1;
    }
    out
}

/// Registers every helper on `engine`.
pub(crate) fn register(engine: &mut Engine, shared: &Rc<Shared>) {
    register_values(engine, shared);
    register_search(engine, shared);
    register_iterators(engine, shared);
    register_printing(engine, shared);
}

/// `at`, `rank`, `shape`: a tensor expression's target and shape.
fn register_values(engine: &mut Engine, shared: &Rc<Shared>) {
    let sh = shared.clone();
    engine.register_fn(
        "at",
        move |ctx: NativeCallContext, id: ImmutableString, t: Dynamic| -> RhaiResult<Dynamic> {
            let v = match to_value(&t) {
                Some(v @ Value::Tensor(_)) => v,
                _ => {
                    return Err(format!(
                        "at: argument 2: expected a tensor expression, found {}",
                        describe(&t)
                    )
                    .into());
                }
            };
            const TMP: &str = "\u{1}at";
            let s2 = ops::assign(&sh.state.borrow(), TMP, Some(id.as_str()), v).map_err(|e| sh.fail(e))?;
            let bound = s2.get(TMP).cloned();
            // `@C:` declares C when it is not declared yet (eq. 18); a native function called from
            // the top level runs at call level 1.
            if ctx.call_level() <= 1
                && let Some(decl) = s2.get(id.as_str())
            {
                sh.state.borrow_mut().vars.entry(Name::from(id.as_str())).or_insert_with(|| decl.clone());
            }
            Ok(bound.map(to_dynamic).unwrap_or(Dynamic::UNIT))
        },
    );
    engine.register_fn("rank", |t: Dynamic| -> RhaiResult<i64> {
        Ok(operand_view(&tensor_of(&t, "rank")?).shape.rank() as i64)
    });
    engine.register_fn("shape", |t: Dynamic| -> RhaiResult<Array> {
        let t = operand_view(&tensor_of(&t, "shape")?);
        Ok(t.shape
            .dims()
            .unwrap_or(&[])
            .iter()
            .map(|d| match d {
                Dim::Known(e) => index_dynamic(e.clone()),
                Dim::Unknown => Dynamic::UNIT,
            })
            .collect())
    });
}

/// What a search space asks of a nest: `param`, `time`, `history`, `legal`, the parallel
/// levels, the legal permutations and fusions, the contraction orders.
fn register_search(engine: &mut Engine, shared: &Rc<Shared>) {
    let sh = shared.clone();
    engine.register_fn("param", move |name: ImmutableString, choices: Array| -> RhaiResult<Dynamic> {
        if choices.is_empty() {
            return Err(format!(
                "param: argument 2: expected a non-empty list of choices for `{name}`, found []"
            )
            .into());
        }
        let text = |i: usize| choices[i].to_string();
        let i = sh
            .state
            .borrow_mut()
            .params
            .pick(name.as_str(), choices.len(), &text)
            .map_err(|e| format!("param: {e}"))?;
        Ok(choices[i].clone())
    });
    let sh = shared.clone();
    engine.register_fn("time", move |l: Dynamic| -> RhaiResult<rhai::Map> {
        let nests: Vec<Nest> = if l.is_array() {
            l.clone()
                .into_array()
                .unwrap_or_default()
                .iter()
                .map(|x| nest_of(x, "time"))
                .collect::<Result<_, _>>()?
        } else {
            vec![nest_of(&l, "time")?]
        };
        if nests.is_empty() {
            return Err("time: expected a loop nest or a list of loop nests, found []".into());
        }
        let Some(measure) = sh.env.measure.clone() else {
            return Err(
                "time: measurements run under `teml run`, `teml tune` and the REPL (not `teml check`)".into(),
            );
        };
        let named: Vec<(Name, Nest)> = sh
            .arg_names(&nests.iter().cloned().map(Value::Nest).collect::<Vec<_>>())
            .into_iter()
            .zip(nests)
            .enumerate()
            .map(|(k, (n, x))| (n.unwrap_or_else(|| Name::from(format!("nest{}", k + 1).as_str())), x))
            .collect();
        let start = std::time::Instant::now();
        let state = sh.state.borrow().clone();
        let v = measure(&state, &named);
        // Time spent measuring does not count against the script's time limit.
        if let Some(d) = sh.deadline.get() {
            sh.deadline.set(d.checked_add(start.elapsed()));
        }
        Ok(json_map(&v))
    });
    let sh = shared.clone();
    engine.register_fn("auto_space", move |ctx: NativeCallContext, l: Dynamic| -> RhaiResult<Dynamic> {
        generated(&ctx, &sh, &l, "auto_space", None)
    });
    let sh = shared.clone();
    engine.register_fn("auto", move |ctx: NativeCallContext, l: Dynamic| -> RhaiResult<Dynamic> {
        generated(&ctx, &sh, &l, "auto", Some(()))
    });
    engine.register_fn("history", |l: Dynamic| -> RhaiResult<Array> {
        Ok(nest_of(&l, "history")?.history.lines().into_iter().map(Dynamic::from).collect())
    });
    let sh = shared.clone();
    engine.register_fn("legal", move |l: Dynamic| -> RhaiResult<Dynamic> {
        let n = nest_of(&l, "legal")?;
        match crate::ops::explore::legal(&sh.state.borrow(), &n) {
            Ok(_) => Ok(Dynamic::TRUE),
            Err(why) => Ok(Dynamic::from(why)),
        }
    });
    let sh = shared.clone();
    let perms = move |l: &Dynamic, d: Option<i64>| -> RhaiResult<Array> {
        let n = nest_of(l, "legal_permutations")?;
        let d = d.map_or(usize::MAX, |d| d.max(0) as usize);
        let ps = crate::ops::explore::permutations(&sh.state.borrow(), &n, d)
            .map_err(|e| format!("legal_permutations: {e}"))?;
        Ok(ps
            .into_iter()
            .map(|p| Dynamic::from(p.into_iter().map(|x| Dynamic::from(x as i64)).collect::<Array>()))
            .collect())
    };
    // The levels of the loops whose parallelism `keep` accepts (explore::parallelism).
    use crate::ops::explore::Parallelism;
    let levels = |name: &'static str, keep: fn(Parallelism, &crate::ir::Loop) -> bool| {
        let sh = shared.clone();
        move |l: Dynamic| -> RhaiResult<Array> {
            let n = nest_of(&l, name)?;
            let ps = crate::ops::explore::parallelism(&sh.state.borrow(), &n)
                .map_err(|e| format!("{name}: {e}"))?;
            let path = n.view().path();
            Ok(ps
                .into_iter()
                .filter(|(r, _, p)| path.get(r - 1).is_some_and(|l| keep(*p, l)))
                .map(|(r, _, _)| Dynamic::from(r as i64))
                .collect())
        }
    };
    // A reduction loop counts where code generation realizes it: one accumulated element per
    // iteration (not `mean[j]` with `j` inside the loop, which `codegen` refuses to run on threads).
    engine.register_fn(
        "parallel_levels",
        levels("parallel_levels", |p, l| match p {
            Parallelism::Independent => true,
            Parallelism::Reduction => crate::analysis::reduction::plan(l, true).is_ok(),
            Parallelism::Carried => false,
        }),
    );
    engine.register_fn(
        "data_parallel_levels",
        levels("data_parallel_levels", |p, _| p == Parallelism::Independent),
    );
    let p2 = perms.clone();
    engine.register_fn("legal_permutations", move |l: Dynamic| perms(&l, None));
    engine.register_fn("legal_permutations", move |l: Dynamic, d: i64| p2(&l, Some(d)));
    let sh = shared.clone();
    engine.register_fn("permute", move |l: Dynamic, order: Array| -> RhaiResult<Dynamic> {
        let full = nest_of(&l, "permute")?;
        let n = full.view();
        let order: Vec<usize> = order
            .iter()
            .map(|x| x.as_int().map(|v| v.max(0) as usize))
            .collect::<Result<_, _>>()
            .map_err(|t| format!("permute: expected a list of levels, found an element of type {t}"))?;
        let mut sorted = order.clone();
        sorted.sort();
        if sorted != (1..=order.len()).collect::<Vec<_>>() || order.len() > n.path().len() {
            return Err(format!(
                "permute: expected a permutation of the levels 1..={}, found {order:?}",
                n.path().len()
            )
            .into());
        }
        let Some(p) = crate::ops::explore::permute(&n, &order) else { return Ok(Dynamic::UNIT) };
        let mut p = full.splice(p);
        let state = sh.state.borrow();
        if !state.unchecked {
            ops::registry::legality_gate(&state, "permute", &p).map_err(|e| sh.fail(e))?;
        }
        // One step, as a person writes it (not the adjacent interchanges that realize it).
        let order: Vec<String> = order.iter().map(|k| k.to_string()).collect();
        p.history = crate::ir::History::step(
            "permute",
            vec![
                crate::ir::StepArg::Nest(full.history.clone()),
                crate::ir::StepArg::Text(format!("[{}]", order.join(", "))),
            ],
        );
        Ok(to_dynamic(Value::Nest(p)))
    });
    let sh = shared.clone();
    engine.register_fn("legal_fusions", move |a: Dynamic, b: Dynamic| -> RhaiResult<Array> {
        let (a, b) = (nest_of(&a, "legal_fusions")?, nest_of(&b, "legal_fusions")?);
        let rs = crate::ops::explore::fusion_levels(&sh.state.borrow(), &a, &b)
            .map_err(|e| format!("legal_fusions: {e}"))?;
        Ok(rs.into_iter().map(|r| Dynamic::from(r as i64)).collect())
    });
    let sh = shared.clone();
    engine.register_fn("contraction_orders", move |t: Dynamic| -> RhaiResult<Array> {
        let t = tensor_of(&t, "contraction_orders")?;
        let orders = crate::ops::lift::orders(&sh.state.borrow(), &t).map_err(|e| sh.fail(e))?;
        Ok(orders
            .into_iter()
            .map(|(path, _)| {
                let steps: Array = path
                    .into_iter()
                    .map(|(a, b)| Dynamic::from(vec![Dynamic::from(a as i64), Dynamic::from(b as i64)]))
                    .collect();
                Dynamic::from(steps)
            })
            .collect())
    });
}

/// Iterators and named constants: `depth`, `iterators`, `iter`, fresh and free iterators,
/// `with_iters`, `constant`, `constant_names`.
fn register_iterators(engine: &mut Engine, shared: &Rc<Shared>) {
    engine.register_fn("depth", |l: Dynamic| -> RhaiResult<i64> {
        Ok(nest_of(&l, "depth")?.view().path().len() as i64)
    });
    engine.register_fn("iterators", |l: Dynamic| -> RhaiResult<Array> {
        Ok(nest_of(&l, "iterators")?
            .view()
            .path()
            .iter()
            .map(|x| Dynamic::from(x.iter.to_string()))
            .collect())
    });
    engine.register_fn("iter", |s: ImmutableString| -> RhaiResult<IndexVal> {
        let ok = s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_alphanumeric() || c == '_');
        if !ok {
            return Err(format!("iter: expected an identifier, found \"{s}\"").into());
        }
        Ok(IndexVal(Expr::var(&s)))
    });
    let sh = shared.clone();
    engine.register_fn("fresh_iters", move |n: i64, avoid: Dynamic| -> RhaiResult<Array> {
        if !(0..=64).contains(&n) {
            return Err(format!("fresh_iters: expected a count in 0..=64, found {n}").into());
        }
        Ok(fresh_list("i", n, &names_to_avoid(&sh.state.borrow(), &avoid)))
    });
    let sh = shared.clone();
    engine.register_fn(
        "fresh_iters",
        move |prefix: ImmutableString, n: i64, avoid: Dynamic| -> RhaiResult<Array> {
            if !(0..=64).contains(&n) {
                return Err(format!("fresh_iters: expected a count in 0..=64, found {n}").into());
            }
            Ok(fresh_list(&prefix, n, &names_to_avoid(&sh.state.borrow(), &avoid)))
        },
    );
    let sh = shared.clone();
    engine.register_fn("free_iters", move |t: Dynamic| -> RhaiResult<Array> {
        let t = tensor_of(&t, "free_iters")?;
        Ok(free_iters(&sh.state.borrow(), &t)
            .iter()
            .map(|v| Dynamic::from(IndexVal(Expr::var_name(v))))
            .collect())
    });
    engine.register_fn("carries_iters", |t: Dynamic| -> RhaiResult<bool> {
        let t = operand_view(&tensor_of(&t, "carries_iters")?);
        Ok(!matches!((&t.op, &t.iters), (Op::Id(_) | Op::Hole, Iters::Unset)))
    });
    let sh = shared.clone();
    engine.register_fn("with_iters", move |t: Dynamic, list: Dynamic| -> RhaiResult<Dynamic> {
        let t = tensor_of(&t, "with_iters")?;
        let xs = index_list(&list, "with_iters")?;
        let state = sh.state.borrow();
        let arg = Arg::new(2, "iterators");
        if t.children.is_empty() && matches!(t.iters, Iters::List(_)) {
            // An indexed access: substitute its free iterators position by position.
            let free = free_iters(&state, &t);
            if free.len() != xs.len() {
                return Err(sh.fail(Error::IteratorList {
                    builtin: "with_iters".into(),
                    arg,
                    expected: format!("{} iterators to rename the free iterators of `{t}`", free.len()),
                    found: xs.len().to_string(),
                }));
            }
            let sub = |v: &str| free.iter().position(|f| &**f == v).map(|k| xs[k].clone());
            return Ok(Dynamic::from(TensorVal(t.subst_iters(&sub))));
        }
        let r = ops::operand(&state, "with_iters", &arg, &t, Some(&xs)).map_err(|e| sh.fail(e))?;
        if r.has_hole() {
            sh.holes.set(true);
        }
        Ok(Dynamic::from(TensorVal(r)))
    });
    let sh = shared.clone();
    // A composite's result as one step of its history (`tile(l, 32)`, not the strip-mines and
    // interchanges it is made of): the path a person reads is the calls a person writes.
    engine.register_fn(
        "recorded",
        move |p: Dynamic, name: ImmutableString, args: Array| -> RhaiResult<Dynamic> {
            let mut n = nest_of(&p, "recorded")?;
            let state = sh.state.borrow();
            let mut steps = Vec::new();
            for (k, a) in args.iter().enumerate() {
                let arg = super::values::to_arg(a)
                    .map_err(|e| format!("recorded: argument {} of `{name}`: {e}", k + 1))?;
                steps.push(ops::registry::step_arg(&state, &arg));
            }
            n.history = crate::ir::History::step(name.as_str(), steps);
            Ok(to_dynamic(Value::Nest(n)))
        },
    );
    let sh = shared.clone();
    // A program variable by name, for names Rhai reserves (`var`, `fn`, `in`, ...: the `.teml`
    // front-end accepts them); generated spaces refer to such values this way (`lang::rhai_ref`).
    engine.register_fn("lookup", move |name: ImmutableString| -> RhaiResult<Dynamic> {
        let v = sh.state.borrow().get(name.as_str()).cloned();
        match v {
            Some(v) => {
                sh.remember(&name, &v);
                Ok(to_dynamic(v))
            }
            None => Err(format!(
                "lookup: expected the name of a tensor or nest of the program, found `{name}`, which names none"
            )
            .into()),
        }
    });
    let sh = shared.clone();
    engine.register_fn("constant", move |name: ImmutableString| -> Dynamic {
        sh.state.borrow().constant(&name).map(Dynamic::from).unwrap_or(Dynamic::UNIT)
    });
    // `constant("N", 512)`: the paper syntax's `N = 512` line, the named constant's default
    // where -D did not give it.
    let sh = shared.clone();
    engine.register_fn("constant", move |name: ImmutableString, value: i64| -> RhaiResult<i64> {
        let mut state = sh.state.borrow_mut();
        let ident = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ident {
            return Err(format!(
                "constant: argument 1 (name): expected an identifier (a letter or _ first, then letters, digits or _), found \"{name}\""
            )
            .into());
        }
        if state.const_defs.contains(name.as_str()) {
            let old = state.constant(&name).unwrap_or(value);
            return Err(format!(
                "constant: named constant `{name}` is already defined ({name} = {old}): expected one definition per constant (-D {name}=INT overrides it), found a second"
            )
            .into());
        }
        if state.constant(&name).is_none() {
            *state = state.with_const(&name, value);
        }
        state.const_defs.insert(name.as_str().into());
        Ok(state.constant(&name).unwrap_or(value))
    });
    let sh = shared.clone();
    engine.register_fn("constant_names", move |ts: Dynamic| -> Array {
        let state = sh.state.borrow();
        let mut out: BTreeSet<Name> = state.consts.keys().cloned().collect();
        let items: Array = ts.clone().try_cast::<Array>().unwrap_or_else(|| vec![ts.clone()]);
        for x in &items {
            if let Some(Value::Tensor(t)) = to_value(x) {
                out.extend(crate::analysis::infer::constants(&state, &[&t]));
            }
        }
        out.iter().map(|n| Dynamic::from(n.to_string())).collect()
    });
}

/// Values as text and the stdlib's own errors: `stmts`, `tree`, `paper`, `infix`,
/// `describe`, `fail`.
fn register_printing(engine: &mut Engine, shared: &Rc<Shared>) {
    engine.register_fn("stmts", |l: Dynamic| -> RhaiResult<Array> {
        Ok(nest_of(&l, "stmts")?.stmts().into_iter().map(|s| Dynamic::from(TensorVal(s))).collect())
    });
    engine.register_fn("tree", |x: Dynamic| -> RhaiResult<String> {
        match to_value(&x) {
            Some(v) => Ok(v.tree().trim_end().to_string()),
            None => {
                Err(format!("tree: expected a tensor expression or a loop nest, found {}", describe(&x))
                    .into())
            }
        }
    });
    engine.register_fn("paper", |x: Dynamic| -> RhaiResult<String> {
        match to_value(&x) {
            Some(v) => Ok(v.paper()),
            None => {
                Err(format!("paper: expected a tensor expression or a loop nest, found {}", describe(&x))
                    .into())
            }
        }
    });
    engine
        .register_fn("infix", |t: Dynamic| -> RhaiResult<String> { Ok(tensor_of(&t, "infix")?.to_string()) });
    engine.register_fn("describe", |x: Dynamic| describe(&x));
    let sh = shared.clone();
    engine.register_fn(
        "fail",
        move |builtin: ImmutableString,
              pos: i64,
              role: ImmutableString,
              expected: ImmutableString,
              found: Dynamic|
              -> RhaiResult<Dynamic> {
            let found = if found.is_string() { found.to_string() } else { short(&found) };
            Err(sh.fail(Error::bad_argument(
                builtin.to_string(),
                Arg::new(usize::try_from(pos).unwrap_or(0), &role),
                expected.to_string(),
                found,
            )))
        },
    );
}
