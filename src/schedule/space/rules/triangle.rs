//! A product over a triangle: square tiles, those off the diagonal given the register tile
//! ([`triangle_like`]).

use super::*;

pub(in crate::schedule::space) struct Triangle;

impl Rule for Triangle {
    fn name(&self) -> &'static str {
        "triangle"
    }

    fn detect(&'static self, cx: &Cx) -> Result<Found, String> {
        if cx.plan("register_tile").is_some() {
            return Err("the product as written takes the register tile".into());
        }
        let (t, c) = triangle_like(cx.w, cx.target()?).ok_or_else(|| {
            format!(
                "not a product over a triangle (three loops, the second from the first or one past it, at least {} rows)",
                4 * TRIANGLE_TILE
            )
        })?;
        let reason = format!(
            "{}: a product over a triangle ({} from {}{}): {TRIANGLE_TILE} x {TRIANGLE_TILE} tiles, those off the diagonal rectangular, each with BLIS's register tile; the diagonal's as written",
            t.target,
            t.j,
            t.i,
            if c > 0 { format!(" + {c}") } else { String::new() }
        );
        Ok(found(self, Plan::Triangle(t), reason, Place::Last))
    }

    fn emit(&self, out: &mut Out, _: &Workload, m: &Machine, plan: &Plan) {
        let Plan::Triangle(t) = plan else { return };
        out.stmts(&[
            step("stripmine", vec![int(1), int(TRIANGLE_TILE), text("aligned")]),
            step("stripmine", vec![int(3), int(TRIANGLE_TILE), text("aligned")]),
            step("interchange", vec![int(2), int(3)]),
        ]);
        out.comment("the tiles off the diagonal (jo > io) apart: rectangular");
        out.stmt(let_("io", call("iterators", vec![local("p")]).at(int(0))));
        out.stmts(&[
            step("split", vec![int(2), call("iter", vec![local("io")]).plus(int(1))]),
            step("distribute", vec![int(1)]),
            step("focus", vec![local("io").plus(text("#2"))]),
        ]);
        register_tile(out, t, m);
        out.stmt(step("focus", vec![]));
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rules;

    #[test]
    fn the_upper_triangle_of_a_gram_matrix_is_tiled_and_a_square_one_is_not_a_triangle() {
        let src = "M = 200\nN = 70\nX = tensor([N, M])\nG = einsum(\"ki,kj->ij\", [X, X])\n\
                   l = build(G, [[i, 0, M-1], [j, i, M-1]])\n";
        let (found, _) = rules(src);
        assert_eq!(found.first(), Some(&"triangle"), "{found:?}");
        let (found, not) =
            rules("M = 200\nN = 70\nX = tensor([N, M])\nG = einsum(\"ki,kj->ij\", [X, X])\nl = build(G)\n");
        assert!(!found.contains(&"triangle"), "{found:?}");
        assert!(
            not.iter().any(|w| w == "triangle: the product as written takes the register tile"),
            "{not:?}"
        );
    }
}
