//! Expressions in C: integer index expressions, tensor elements (through packed buffers,
//! layouts and register variables) and arithmetic.

use super::*;

/// An integer expression in C; `paren` wraps compound expressions, as in `i <= (N-1)`.
pub(super) fn c_expr(e: &Expr, h: &mut Helpers, paren: bool) -> String {
    let mut s = String::new();
    let h = std::cell::RefCell::new(h);
    fn atom(a: &Atom, f: &mut dyn std::fmt::Write, h: &std::cell::RefCell<&mut Helpers>) -> std::fmt::Result {
        match a {
            Atom::Var(v) => {
                let h = h.borrow();
                f.write_str(h.names.var(v))
            }
            Atom::Min(xs) | Atom::Max(xs) => {
                let is_min = matches!(a, Atom::Min(_));
                if is_min {
                    h.borrow_mut().min = true;
                } else {
                    h.borrow_mut().max = true;
                }
                let fname = if is_min { "teml_min" } else { "teml_max" };
                // teml_min(a, teml_min(b, c))
                for x in &xs[..xs.len() - 1] {
                    write!(f, "{fname}(")?;
                    x.write_with(f, &|a, f| atom(a, f, h))?;
                    f.write_str(", ")?;
                }
                xs[xs.len() - 1].write_with(f, &|a, f| atom(a, f, h))?;
                for _ in 1..xs.len() {
                    f.write_str(")")?;
                }
                Ok(())
            }
            Atom::FloorDiv(x, d) => {
                h.borrow_mut().floordiv = true;
                f.write_str("teml_floordiv(")?;
                x.write_with(f, &|a, f| atom(a, f, h))?;
                write!(f, ", {d})")
            }
        }
    }
    let _ = e.write_with(&mut s, &|a, f| atom(a, f, &h));
    if paren && e.is_compound() && e.as_const().is_none() { format!("({s})") } else { s }
}

impl NestPrinter<'_> {
    pub(super) fn c_leaf(&mut self, t: &TNode) -> String {
        match (&t.op, t.index_list()) {
            (Op::Lit(x), _) => crate::ir::texpr::fmt_lit(*x),
            (Op::Id(n), Some(xs)) if !xs.is_empty() && self.packed.iter().any(|p| &p.tensor == n) => {
                let p = self.packed.iter().rev().find(|p| &p.tensor == n).cloned();
                let Some(p) = p else { return t.access() };
                self.packed_leaf(&p, xs, false)
            }
            (Op::Id(n), Some(xs)) if !xs.is_empty() && self.laid.contains_key(n) => {
                let Some((buf, lay)) = self.laid.get(n) else { return t.access() };
                let mut s = buf.clone();
                for x in lay.map(xs) {
                    s.push_str(&format!("[{}]", c_expr(&x, self.helpers, false)));
                }
                s
            }
            (Op::Id(n), Some(xs)) if !xs.is_empty() => {
                let mut s = self.helpers.names.tensor(n).to_string();
                for x in xs {
                    s.push_str(&format!("[{}]", c_expr(x, self.helpers, false)));
                }
                s
            }
            (Op::Id(n), _) => format!("(*{})", self.helpers.names.tensor(n)),
            _ => t.access(),
        }
    }

    /// The element at `xs` of the packed buffer `p`: `[x - lo]` per dimension in the buffer's
    /// order; in groups of g, the first `[(x - lo) / g]` and a last `[(x - lo) % g]` (`[0]`
    /// with `group_start`, the first element of its group).
    pub(super) fn packed_leaf(&mut self, p: &Packed, xs: &[Expr], group_start: bool) -> String {
        let mut s = p.buf.clone();
        let mut within = None;
        for (k, d) in p.order.iter().enumerate() {
            let (Some(x), Some(l)) = (xs.get(*d), p.lo.get(*d)) else { continue };
            let at = c_expr(&x.sub(l), self.helpers, false);
            if k == 0 && p.group > 1 {
                let at = c_expr(&x.sub(l), self.helpers, true);
                s.push_str(&format!("[{at} / {}]", p.group));
                within = Some(if group_start { "[0]".to_string() } else { format!("[{at} % {}]", p.group) });
            } else {
                s.push_str(&format!("[{at}]"));
            }
        }
        s.push_str(&within.unwrap_or_default());
        s
    }

    /// An arithmetic expression; `vector` is set where a block of lanes reads a vector.
    pub(super) fn c_value(
        &mut self,
        t: &TNode,
        lane: Option<&Lane>,
        vector: &mut bool,
    ) -> std::result::Result<String, String> {
        let prec = |t: &TNode| match t.op {
            Op::Add | Op::Sub => 1,
            Op::Mul | Op::Div => 2,
            _ => 3,
        };
        Ok(match t.op {
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                let p = prec(t);
                let (l, r) = (&t.children[0], &t.children[1]);
                let ls = self.c_value(l, lane, vector)?;
                let rs = self.c_value(r, lane, vector)?;
                // A literal in a float computation is a float literal, as in a float program
                // (PolyBench's float build): `(1.0f - alpha * alpha) * beta` stays in float.
                let float_lit = |c: &TNode, s: String| {
                    if t.dtype == DType::Float && matches!(c.op, Op::Lit(_)) && !s.ends_with('f') {
                        format!("{s}f")
                    } else {
                        s
                    }
                };
                let (ls, rs) = (float_lit(l, ls), float_lit(r, rs));
                let ls = if prec(l) < p { format!("({ls})") } else { ls };
                // A quotient of integers is the real quotient (docs/types.md), as the
                // reference computes it; a store into an integer truncates it.
                let ls =
                    if t.op == Op::Div && l.dtype.compute().is_integer() && r.dtype.compute().is_integer() {
                        format!("(double){ls}")
                    } else {
                        ls
                    };
                let rp = prec(r) < p || (prec(r) == p && matches!(t.op, Op::Sub | Op::Div));
                let rs = if rp { format!("({rs})") } else { rs };
                format!("{ls} {} {rs}", t.op.symbol())
            }
            Op::Call(f @ (Func::Max | Func::Min))
                if let Some(ln) = lane.filter(|ln| ln.width > 1 && t.children.len() == 2) =>
            {
                let mut parts = Vec::new();
                for c in &t.children {
                    let mut v = false;
                    let text = self.c_value(c, lane, &mut v)?;
                    parts.push((text, v));
                }
                let [(a, va), (b, vb)] = [&parts[0], &parts[1]];
                if !va && !vb {
                    self.helpers.math = true;
                    format!("{}({a}, {b})", f.c_name(t.dtype))
                } else {
                    *vector = true;
                    self.extreme(ln, f == Func::Max, (a, *va), (b, *vb))
                }
            }
            Op::Call(f) => {
                if lane.is_some_and(|ln| ln.width > 1) {
                    return Err(format!("`{}` in explicit vector lanes", f.name()));
                }
                let args = t
                    .children
                    .iter()
                    .map(|c| self.c_value(c, lane, vector))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                match (f.operator(), args.as_slice()) {
                    (Some(o), [a, b]) => format!("({a} {o} {b})"),
                    (None, [c, a, b]) if f == crate::ir::Func::Select => format!("({c} != 0 ? {a} : {b})"),
                    _ => {
                        self.helpers.math = true;
                        format!("{}({})", f.c_name(t.dtype), args.join(", "))
                    }
                }
            }
            Op::Lit(x) => {
                let s = crate::ir::texpr::fmt_lit(x);
                // A double literal beside float vectors would be a narrowing conversion.
                if lane.is_some_and(|ln| ln.dtype == DType::Float && ln.width > 1) {
                    format!("{s}f")
                } else {
                    s
                }
            }
            _ if t.is_tensor_leaf() => {
                let (text, is_vec) = self.mem(t, lane, false)?;
                *vector |= is_vec;
                // Lanes of a narrow type are read widened ([`Self::mem`]): already computed-type.
                if is_vec && t.dtype.is_narrow() { text } else { self.value_of(t, &text) }
            }
            _ => self.c_leaf(t),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_expressions() {
        let mut h = Helpers::default();
        assert_eq!(c_expr(&Expr::var("N").add_int(-1), &mut h, true), "(N-1)");
        assert_eq!(c_expr(&Expr::int(249), &mut h, true), "249");
        assert_eq!(c_expr(&Expr::var("i"), &mut h, true), "i");
        let m = Expr::min(&Expr::var("o").scale(4).add_int(3), &Expr::int(9));
        assert_eq!(c_expr(&m, &mut h, true), "teml_min(4*o+3, 9)");
        assert!(h.min);
        let f = Expr::var("N").add_int(-1).floordiv(8);
        assert_eq!(c_expr(&f, &mut h, true), "teml_floordiv(N-1, 8)");
    }
}
