//! Loops carried only through a pivot split there ([`crate::schedule::pivots`]): `pivot`
//! true splits each such loop before, at and after the pivot and puts the pieces' free loops
//! on threads and in lanes; false keeps the nest for the rules after it. A row of
//! [`super::FORMS`].

use super::*;

/// The rule.
pub(in crate::schedule::space) struct Pivot;

impl FormRule for Pivot {
    fn name(&self) -> &'static str {
        "pivot"
    }

    fn detect(&self, state: &State, nest: &Nest, w: &Workload) -> Result<FormPlan, String> {
        crate::schedule::pivots::pivots(state, nest, w).map(FormPlan::Pivots).ok_or_else(|| {
            "no loop carried only through a pivot whose split leaves a loop on threads (isl)".into()
        })
    }

    fn emit(
        &self,
        out: &mut Out,
        plan: &FormPlan,
        _: &Workload,
        _: &Machine,
        rest: &mut dyn FnMut(&mut Out),
    ) {
        let FormPlan::Pivots(pv) = plan else { return };
        out.param(
            "pivot",
            "pivot",
            "loops carried only through a pivot split there, the pieces on threads and in lanes",
            vec![
                choice(
                    "true",
                    format!(
                        "split {} (before, at and after the pivot): each side's loops are free (isl), on threads and in lanes",
                        pv.why
                    ),
                ),
                choice("false", "as written, by the rules of a single nest"),
            ],
        );
        out.begin_if(local("pivot"));
        for l in &pv.steps {
            out.stmts(l);
        }
        out.else_();
        rest(out);
        out.end();
    }
}

#[cfg(test)]
mod tests {
    use super::super::detect_forms;
    use super::super::tests::workload_state;

    #[test]
    fn floyd_warshall_is_split_at_its_pivot_and_a_matrix_product_is_not() {
        let fw = "N = 64\npath = tensor([N, N])\nd = vadd(path, path, [[i, k], [k, j]])\n\
                  s = @path: min(path, d, [[i, j], ] -> [i, j])\nl1 = build(s, [[k]])\nl = around(k, [0, N-1], l1)\n";
        let (s, n, w) = workload_state(fw);
        let (found, _) = detect_forms(&s, &n, &w);
        assert_eq!(found.iter().map(|(r, _)| r.name()).collect::<Vec<_>>(), ["pivot"]);
        let mm = "N = 64\nA = tensor([N, N])\nB = tensor([N, N])\nC = einsum(\"ik,kj->ij\", [A, B])\nl = build(C)\n";
        let (s, n, w) = workload_state(mm);
        let (found, not) = detect_forms(&s, &n, &w);
        assert!(found.is_empty());
        assert!(not.iter().any(|x| x.starts_with("pivot: no loop carried only through a pivot")), "{not:?}");
        assert!(not.iter().any(|x| x.starts_with("lift: ")), "{not:?}");
    }
}
