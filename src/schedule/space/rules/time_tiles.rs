//! Pluto's time tiling of a stencil swept in place ([`time_tiled`], [`time_tiles`]).

use super::*;

pub(in crate::schedule::space) struct TimeTiles;

impl Rule for TimeTiles {
    fn name(&self) -> &'static str {
        "time_tiles"
    }

    fn detect(&'static self, cx: &Cx) -> Result<Found, String> {
        let w = cx.w;
        if !time_tiled(w) {
            return Err("not a stencil swept in place over time (2 or 3 loops, each carrying a dependence, the outermost a time loop)".into());
        }
        let names: Vec<String> = w.loops.iter().map(|l| l.iter.to_string()).collect();
        let reason = format!(
            "every loop carries a dependence ({}; {} a time loop no access uses): skewed into a permutable band, then tiled across time (Pluto's time tiling)",
            names.join(", "),
            names[0]
        );
        Ok(found(self, Plan::Workload, reason, Place::First))
    }

    fn emit(&self, out: &mut Out, w: &Workload, _: &Machine, _: &Plan) {
        time_tiles(out, w);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::rules;

    #[test]
    fn a_stencil_swept_in_place_over_time_is_time_tiled_first() {
        // seidel-2d's 1-D cousin: A[i] = (A[i-1] + A[i] + A[i+1]) / 3, in place, T times.
        let src = "T = 20\nN = 200\nA = tensor([N])\ns0 = vadd(A, A, [[i-1], [i]])\n\
                   s1 = vadd(s0, A, [, [i+1]])\na = @A: div(s1, 3.0, [, ] -> [i])\n\
                   l1 = build(a, [[i, 1, N-2]])\nl = around(t, [0, T-1], l1)\n";
        let (found, not) = rules(src);
        assert_eq!(found.first(), Some(&"time_tiles"), "{found:?} {not:?}");
    }
}
