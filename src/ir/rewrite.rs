//! The record of an algebraic rewrite a nest computes (`lift`, TeIL Sec. 5; `factor`,
//! `expand`, Sec. 3.6): which assignment it replaced by which sequence (or which single
//! assignment), and the figures that show what it saved. Verification reads it: a rewritten
//! nest is compared with the original assignment, not with its own statements, at a tolerance
//! derived from the operation count (docs/algebra.md).

use super::expr::Name;
use super::texpr::TExpr;
use serde::{Deserialize, Serialize};

/// One assignment replaced by a sequence of single contractions through temporaries (`lift`),
/// or by one assignment of the same tensor (`factor`, `expand`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rewrite {
    /// The builtin that rewrote it: `lift`, `factor` or `expand`.
    #[serde(default = "lift")]
    pub by: String,
    /// The assignment as the program wrote it (its meaning: what verification runs).
    pub original: TExpr,
    /// The tensor it defines; the last statement of the sequence writes it.
    pub result: Name,
    /// The fresh temporaries, in the order the sequence writes them: internal to the rewrite,
    /// never compared (the original does not compute them).
    pub temps: Vec<Name>,
    /// The contraction order, opt_einsum's path: each step contracts the operands at these
    /// two positions of the current list, removes them and appends the result.
    pub order: Vec<(usize, usize)>,
    /// Floating-point operations of the original at the program's sizes.
    pub flops_before: f64,
    /// ... and of the sequence.
    pub flops_after: f64,
    /// Products summed into each element of the result by the original (1 without a sum).
    pub terms: f64,
    /// Factors of each product (the operands).
    pub factors: usize,
    /// The product of the literal factors (`2.0 * A * B`).
    pub scale: f64,
}

fn lift() -> String {
    "lift".into()
}

impl Rewrite {
    /// What the reports call it: `lifted`, `factored`, `expanded`.
    pub fn done(&self) -> &'static str {
        match self.by.as_str() {
            "factor" => "factored",
            "expand" => "expanded",
            _ => "lifted",
        }
    }

    /// One line for trees and reports: `v: 8.2e9 -> 3.3e8 flops (25x fewer), order [[2, 3], ...]`.
    pub fn describe(&self) -> String {
        if self.by != "lift" {
            let ratio = self.flops_before / self.flops_after.max(1.0);
            return format!(
                "{}: {} from {} -> {} flops ({}), verified against the expression as written",
                self.done(),
                self.result,
                flops(self.flops_before),
                flops(self.flops_after),
                if ratio >= 1.0 { format!("{ratio:.1}x fewer") } else { format!("{:.1}x more", 1.0 / ratio) }
            );
        }
        let temps: Vec<String> = self.temps.iter().map(|t| t.to_string()).collect();
        format!(
            "lifted: {} from {} -> {} flops ({:.1}x fewer), order {}, temporaries {}",
            self.result,
            flops(self.flops_before),
            flops(self.flops_after),
            self.flops_before / self.flops_after.max(1.0),
            path(&self.order),
            if temps.is_empty() { "none".into() } else { temps.join(", ") }
        )
    }

    /// The absolute difference that rounding alone allows between the original and the
    /// sequence on data of magnitude `m`: each computes a sum of `terms` products of
    /// `factors` values, with an error of at most γ_n Σ|terms| (Higham, Sec. 3.1), n =
    /// terms + factors operations, u the unit roundoff; both sides err, hence the 2.
    /// `terms`: the products per element at the sizes compared (a reduced size has fewer than
    /// the program's [`Rewrite::terms`]).
    pub fn rounding_bound(&self, unit_roundoff: f64, m: f64, terms: f64) -> f64 {
        let n = terms + self.factors as f64;
        let gamma = n * unit_roundoff / (1.0 - (n * unit_roundoff).min(0.5));
        2.0 * gamma * terms * m.max(1.0).powi(self.factors as i32) * self.scale.abs().max(1.0)
    }
}

/// `[[2, 3], [1, 2], [0, 1]]`.
pub fn path(order: &[(usize, usize)]) -> String {
    let steps: Vec<String> = order.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
    format!("[{}]", steps.join(", "))
}

/// `1.2e9`, `3400`.
pub fn flops(x: f64) -> String {
    if x < 1e5 { format!("{x:.0}") } else { format!("{x:.2e}") }
}
