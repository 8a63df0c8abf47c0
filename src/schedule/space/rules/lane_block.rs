//! A block of lanes without rows, across the reductions after it ([`lane_plan`],
//! [`lane_block`]): a 1-D convolution's.

use super::*;

pub(in crate::schedule::space) struct LaneBlock;

impl Rule for LaneBlock {
    fn name(&self) -> &'static str {
        "lane_block"
    }

    fn detect(&'static self, cx: &Cx) -> Result<Found, String> {
        if cx.plan("register_block").is_some() {
            return Err("a register block (with rows) applies".into());
        }
        let t = cx.target()?;
        let lb = lane_plan(cx.w, t, cx.m).ok_or_else(|| {
            format!(
                "no data-parallel loop contiguous in {} (and in every operand along it) of a vector's lanes or more followed only by reductions",
                t.tensor
            )
        })?;
        let reason = format!(
            "{} contiguous in {} (data-parallel), no other loop of {} to take rows from: a block of {} lanes in vector registers across {}",
            lb.target,
            lb.lane_iter,
            lb.target,
            lb.lane_iter,
            lb.reductions.join(", ")
        );
        Ok(found(self, Plan::Lanes(lb), reason, Place::Last))
    }

    fn emit(&self, out: &mut Out, w: &Workload, m: &Machine, plan: &Plan) {
        if let Plan::Lanes(lb) = plan {
            lane_block(out, w, lb, m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rules;

    #[test]
    fn a_one_dimensional_convolution_is_a_block_of_lanes_across_its_taps() {
        let src = "N = 4096\nK = 32\nX = tensor([N+K-1])\nF = tensor([K])\nY = tensor([N])\ninit(Y, 0)\n\
                   P = vmul(X, F, [[i+k], [k]])\nY = add(Y, P, [[i], ] -> [i])\nl = build(Y)\n";
        let (found, not) = rules(src);
        assert_eq!(found.first(), Some(&"lane_block"), "{found:?} {not:?}");
    }
}
