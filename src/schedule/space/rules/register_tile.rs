//! BLIS's register tile of a matrix product ([`register_tile`]).

use super::*;

pub(in crate::schedule::space) struct RegisterTile;

impl Rule for RegisterTile {
    fn name(&self) -> &'static str {
        "register_tile"
    }

    fn detect(&'static self, cx: &Cx) -> Result<Found, String> {
        let t = matmul_why(cx.w, cx.target()?)?;
        let reason = format!(
            "{}: rows {}, columns {} contiguous in {}, a reduction {} of {} iterations: BLIS's register tile with cache blocks",
            t.target, t.i, t.j, t.target, t.k, t.k_extent
        );
        Ok(found(self, Plan::Tile(t), reason, Place::Last))
    }

    fn emit(&self, out: &mut Out, _: &Workload, m: &Machine, plan: &Plan) {
        if let Plan::Tile(t) = plan {
            register_tile(out, t, m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rules;

    #[test]
    fn a_matrix_product_gets_a_register_tile_and_a_short_reduction_says_why_not() {
        let mm = |n: i64, k: i64| {
            format!(
                "A = tensor([{n}, {k}])\nB = tensor([{k}, {n}])\nC = einsum(\"ik,kj->ij\", [A, B])\nl = build(C)\n"
            )
        };
        let (found, _) = rules(&mm(64, 64));
        assert_eq!(found.first(), Some(&"register_tile"), "{found:?}");
        let (found, not) = rules(&mm(64, 16));
        assert!(!found.contains(&"register_tile"), "{found:?}");
        let why = not.iter().find(|w| w.starts_with("register_tile: ")).unwrap();
        assert!(why.contains("64 iterations of the reduction"), "{why}");
    }
}
