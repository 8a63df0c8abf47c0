//! A register block whose lanes run along a loop the result is not contiguous in, gathered
//! and stored lane by lane ([`gathered_plan`], [`register_block`]): gconv's output channels.

use super::*;

pub(in crate::schedule::space) struct GatheredBlock;

/// How many more useful lanes per vector operation the gathered block must have to be listed
/// ahead of the contiguous block (half as many useful lanes: 7 of 8, say, against 8 of 8
/// gathered).
const LANES_AHEAD: f64 = 1.5;

impl Rule for GatheredBlock {
    fn name(&self) -> &'static str {
        "gathered_block"
    }

    fn detect(&'static self, cx: &Cx) -> Result<Found, String> {
        let t = cx.target()?;
        let g = gathered_plan(cx.w, t, cx.m).ok_or_else(|| {
            format!(
                "no data-parallel loop of a vector's lanes or more that {} is not contiguous in and every operand is read along in lanes (as declared or stored with it last)",
                t.tensor
            )
        })?;
        let reason = format!(
            "a block of {} in vector registers, {}",
            g.target,
            g.gather.as_ref().map_or("", |x| &x.why)
        );
        // First where the contiguous block fills its vectors badly.
        let place = match cx.plan("register_block") {
            Some(Plan::Block(b)) if lanes_per_op(&g, cx.m) >= LANES_AHEAD * lanes_per_op(b, cx.m) => {
                Place::Before("register_block")
            }
            _ => Place::Last,
        };
        Ok(found(self, Plan::Block(g), reason, place))
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
    fn gconvs_channels_are_gathered_ahead_of_its_seven_wide_rows() {
        let src = "I = tensor([1, 2, 8, 13, 13])\nW = tensor([2, 16, 8, 7, 7])\nO = tensor([1, 2, 16, 7, 7])\n\
                   init(O, 0)\nP = vmul(I, W, [[n, g, c, h+kh, w+kw], [g, o, c, kh, kw]])\n\
                   O = add(O, P, [[n, g, o, h, w], ] -> [n, g, o, h, w])\nl = build(O)\n";
        let (found, _) = rules(src);
        let at = |n: &str| found.iter().position(|f| *f == n);
        assert!(at("gathered_block").is_some() && at("gathered_block") < at("register_block"), "{found:?}");
    }
}
