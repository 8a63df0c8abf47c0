//! Any nest: a legal loop order, tiles, threads and lanes ([`loops`]); first where a block
//! has nothing to keep or share ([`in_order`]).

use super::*;

pub(in crate::schedule::space) struct Loops;

impl Rule for Loops {
    fn name(&self) -> &'static str {
        "loops"
    }

    fn detect(&'static self, cx: &Cx) -> Result<Found, String> {
        // Nothing for a block to keep or share: the loops first.
        let (reason, place) = match in_order(cx.w) {
            Some(true) => (
                "every element is used once (no reduction, every access varies along every loop): the loops in order on threads and in lanes, nothing for registers or tiles to keep",
                Place::First,
            ),
            Some(false) => (
                "no reduction for a block of registers to stay across and no operand its rows would share (a stencil's neighbouring rows come from the cache): the loops in order on threads and in lanes",
                Place::First,
            ),
            None => ("a legal loop order, tiles, threads and lanes (any nest)", Place::Last),
        };
        Ok(found(self, Plan::Workload, reason.into(), place))
    }

    fn emit(&self, out: &mut Out, w: &Workload, m: &Machine, _: &Plan) {
        loops(out, w, m);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rules;

    #[test]
    fn an_elementwise_product_is_loops_first() {
        let src = "N = 512\nA = tensor([N, N])\nB = tensor([N, N])\nC = mul(A, B, [[i, j], [i, j]] -> [i, j])\nl = build(C)\n";
        let (found, _) = rules(src);
        assert_eq!(found.first(), Some(&"loops"), "{found:?}");
    }
}
