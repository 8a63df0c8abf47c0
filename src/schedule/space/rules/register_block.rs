//! A register block along a loop contiguous in the result ([`block_plan`], [`register_block`]).

use super::*;

pub(in crate::schedule::space) struct RegisterBlock;

impl Rule for RegisterBlock {
    fn name(&self) -> &'static str {
        "register_block"
    }

    fn detect(&'static self, cx: &Cx) -> Result<Found, String> {
        let t = cx.target()?;
        let b = block_plan(cx.w, t).ok_or_else(|| {
            format!(
                "no block of {}: no data-parallel loop contiguous in it that every operand is read along in lanes (as declared or stored transposed), or no loop to take its rows from",
                t.tensor
            )
        })?;
        let reason = format!(
            "{} contiguous in {} (data-parallel): a block of {} in vector registers{}",
            b.target,
            b.lane_iter,
            b.target,
            b.layouts
                .iter()
                .map(|(n, o)| format!(
                    "; {n} stored with {} last ({o:?}), read across it as declared",
                    b.lane_iter
                ))
                .collect::<String>()
        );
        Ok(found(self, Plan::Block(b), reason, Place::Last))
    }

    fn emit(&self, out: &mut Out, w: &Workload, m: &Machine, plan: &Plan) {
        if let Plan::Block(b) = plan {
            register_block(out, w, b, m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rules;

    #[test]
    fn a_convolution_gets_a_block_along_its_contiguous_columns() {
        // mttkrp's A[i][j] += B[i][k][l] D[l][j] C[k][j]: j contiguous in A, D and C.
        let src = "N = 64\nB = tensor([N, N, N])\nD = tensor([N, N])\nC = tensor([N, N])\n\
                   A = einsum(\"ikl,lj,kj->ij\", [B, D, C])\nl = build(A)\n";
        let (found, _) = rules(src);
        assert_eq!(found.first(), Some(&"register_block"), "{found:?}");
    }
}
