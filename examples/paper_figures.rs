//! Builds the paper's Fig. 4-6 programs with the core builtins and prints the trees, the loop
//! nests `build` gives, and a few transformations of them.
//!
//! Run with `cargo run --example paper_figures`.

use teml::ir::{Expr, State};
use teml::ops::{ArgVal, exec};

fn its(xs: &[&str]) -> ArgVal {
    ArgVal::List(xs.iter().map(|x| ArgVal::Index(Expr::var(x))).collect())
}

fn id(x: &str) -> ArgVal {
    ArgVal::Word(x.into())
}

fn main() -> Result<(), Box<teml::Error>> {
    let n = || ArgVal::List(vec![id("N"), id("N")]);
    let s = State::new();
    let s = exec(&s, "A", None, "tensor", &[n()]).map_err(Box::new)?;
    let s = exec(&s, "B", None, "tensor", &[n()]).map_err(Box::new)?;
    let s = exec(&s, "C", None, "tensor", &[n()]).map_err(Box::new)?;
    // Fig. 6: D = vadd(A, B, [[i1, i2], [i1, i2]]); E = mul(C, D, [[i1, i2], ] -> [i1, i2])
    let s = exec(
        &s,
        "D",
        None,
        "vadd",
        &[id("A"), id("B"), ArgVal::List(vec![its(&["i1", "i2"]), its(&["i1", "i2"])])],
    )
    .map_err(Box::new)?;
    let s = exec(
        &s,
        "E",
        None,
        "mul",
        &[id("C"), id("D"), ArgVal::List(vec![its(&["i1", "i2"]), ArgVal::Omitted]), its(&["i1", "i2"])],
    )
    .map_err(Box::new)?;
    let s = exec(&s, "l", None, "build", &[id("E")]).map_err(Box::new)?;
    let s =
        exec(&s, "l1", None, "stripmine", &[id("l"), ArgVal::Int(2), ArgVal::Int(8)]).map_err(Box::new)?;
    let s = exec(&s, "l2", None, "parallelize", &[id("l1"), ArgVal::Int(1)]).map_err(Box::new)?;
    for name in ["D", "E", "l", "l1", "l2"] {
        let v = s.get(name).expect("bound");
        println!("{name} =\n{}", v.tree());
        println!("  paper notation: {}\n", v.paper());
    }
    Ok(())
}
