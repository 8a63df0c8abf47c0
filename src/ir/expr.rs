//! Integer expressions: affine index expressions (`i`, `i+1`, `h+kh`, `2*i`) and loop bounds.
//!
//! An [`Expr`] is kept in a normal form: a sorted linear combination of atoms plus a constant.
//! An atom is a variable (an iterator or a named constant such as `N`), or one of the few
//! non-affine forms that loop bounds need after strip-mining: `min`, `max` and floor division
//! by a positive constant. Index expressions are always affine (only variable atoms); loop
//! bounds may use the other atoms. The normal form makes structural equality meaningful:
//! `i+1+i` and `2*i+1` are the same value.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

/// A name: iterator, tensor identifier or named constant.
pub type Name = Arc<str>;

/// Makes a [`Name`] from a string slice.
pub fn name(s: &str) -> Name {
    Arc::from(s)
}

/// True for a C identifier (and so a TeML one): a letter or `_`, then letters, digits, `_`.
pub fn is_c_ident(s: &str) -> bool {
    let mut cs = s.chars();
    cs.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A named constant's binding, `NAME=INT` (`-D N=64` of `teml run`, `:load FILE -D N=64` of
/// the REPL): the one rule for both, NAME a C identifier.
pub fn parse_define(s: &str) -> Result<(String, i64), String> {
    let (n, v) = s.split_once('=').ok_or_else(|| format!("expected NAME=INT, found `{s}`"))?;
    let (n, v) = (n.trim(), v.trim());
    if !is_c_ident(n) {
        return Err(format!("expected a constant name (a C identifier) before `=`, found `{n}`"));
    }
    let v: i64 = v.parse().map_err(|_| format!("expected an integer after `{n}=`, found `{v}`"))?;
    Ok((n.to_string(), v))
}

/// The largest integer a kernel may use (an extent, a bound, an index, a named constant's
/// value, a factor): the generated C's loops run over `int`.
pub const INT_MAX: i64 = i32::MAX as i64;

/// An affine computation whose result does not fit in an `i64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("integer overflow")]
pub struct Overflow;

/// Why an expression has no value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A variable with no value.
    #[error("unbound `{0}`")]
    Unbound(Name),
    /// A result that does not fit in an `i64`.
    #[error("integer overflow")]
    Overflow,
}

/// What the unchecked forms give on overflow: a constant far outside any range
/// [`Expr::within`] accepts, never a wrapped value.
fn poison() -> Expr {
    Expr::int(i64::MAX)
}

/// A non-constant building block of an [`Expr`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Atom {
    /// An iterator or a named constant.
    Var(Name),
    /// The minimum of two or more expressions.
    Min(Vec<Expr>),
    /// The maximum of two or more expressions.
    Max(Vec<Expr>),
    /// `floor(e / d)` for a constant `d > 1`.
    FloorDiv(Box<Expr>, i64),
}

/// An integer expression in normal form: `sum(coef * atom) + constant`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Expr {
    terms: Vec<(Atom, i64)>,
    constant: i64,
}

impl Default for Expr {
    fn default() -> Self {
        Expr::int(0)
    }
}

impl From<i64> for Expr {
    fn from(c: i64) -> Self {
        Expr::int(c)
    }
}

impl From<&str> for Expr {
    fn from(v: &str) -> Self {
        Expr::var(v)
    }
}

impl Expr {
    /// The constant `c`.
    pub fn int(c: i64) -> Expr {
        Expr { terms: Vec::new(), constant: c }
    }

    /// The variable `v`.
    pub fn var(v: &str) -> Expr {
        Expr::atom(Atom::Var(name(v)))
    }

    /// The variable `v` (from a [`Name`]).
    pub fn var_name(v: &Name) -> Expr {
        Expr::atom(Atom::Var(v.clone()))
    }

    fn atom(a: Atom) -> Expr {
        Expr { terms: vec![(a, 1)], constant: 0 }
    }

    fn from_terms(mut terms: Vec<(Atom, i64)>, constant: i64) -> Result<Expr, Overflow> {
        terms.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Atom, i64)> = Vec::with_capacity(terms.len());
        for (a, c) in terms {
            match out.last_mut() {
                Some((last, lc)) if *last == a => *lc = lc.checked_add(c).ok_or(Overflow)?,
                _ => out.push((a, c)),
            }
        }
        out.retain(|(_, c)| *c != 0);
        Ok(Expr { terms: out, constant })
    }

    // The checked arithmetic: the one place where coefficients and constants are combined.
    // Builtins use these on anything a program gives them; the unchecked forms below are for
    // values already known to be small.

    /// `self + other`, or [`Overflow`].
    pub fn checked_add(&self, other: &Expr) -> Result<Expr, Overflow> {
        let mut terms = self.terms.clone();
        terms.extend(other.terms.iter().cloned());
        Expr::from_terms(terms, self.constant.checked_add(other.constant).ok_or(Overflow)?)
    }

    /// `self + c`, or [`Overflow`].
    pub fn checked_add_int(&self, c: i64) -> Result<Expr, Overflow> {
        Ok(Expr { terms: self.terms.clone(), constant: self.constant.checked_add(c).ok_or(Overflow)? })
    }

    /// `self - other`, or [`Overflow`].
    pub fn checked_sub(&self, other: &Expr) -> Result<Expr, Overflow> {
        self.checked_add(&other.checked_scale(-1)?)
    }

    /// `k * self`, or [`Overflow`].
    pub fn checked_scale(&self, k: i64) -> Result<Expr, Overflow> {
        if k == 0 {
            return Ok(Expr::int(0));
        }
        Ok(Expr {
            terms: self
                .terms
                .iter()
                .map(|(a, c)| Ok((a.clone(), c.checked_mul(k).ok_or(Overflow)?)))
                .collect::<Result<_, Overflow>>()?,
            constant: self.constant.checked_mul(k).ok_or(Overflow)?,
        })
    }

    /// True when every coefficient and constant, at any depth, lies in `-limit..=limit`.
    pub fn within(&self, limit: i64) -> bool {
        let ok = |c: i64| (-limit..=limit).contains(&c);
        ok(self.constant)
            && self.terms.iter().all(|(a, c)| {
                ok(*c)
                    && match a {
                        Atom::Var(_) => true,
                        Atom::Min(xs) | Atom::Max(xs) => xs.iter().all(|x| x.within(limit)),
                        Atom::FloorDiv(x, d) => ok(*d) && x.within(limit),
                    }
            })
    }

    /// `self + other`; on overflow the constant `i64::MAX` (never a wrapped value), which
    /// [`Expr::within`] refuses. Use [`Expr::checked_add`] on a program's values.
    pub fn add(&self, other: &Expr) -> Expr {
        self.checked_add(other).unwrap_or_else(|_| poison())
    }

    /// `self + c` (see [`Expr::add`] for overflow).
    pub fn add_int(&self, c: i64) -> Expr {
        self.checked_add_int(c).unwrap_or_else(|_| poison())
    }

    /// `self - other` (see [`Expr::add`] for overflow).
    pub fn sub(&self, other: &Expr) -> Expr {
        self.checked_sub(other).unwrap_or_else(|_| poison())
    }

    /// `k * self` (see [`Expr::add`] for overflow).
    pub fn scale(&self, k: i64) -> Expr {
        self.checked_scale(k).unwrap_or_else(|_| poison())
    }

    /// `min(a, b)`, simplified where the difference of two arguments is a known constant.
    pub fn min(a: &Expr, b: &Expr) -> Expr {
        Expr::extremum(vec![a.clone(), b.clone()], true)
    }

    /// `max(a, b)`, simplified where the difference of two arguments is a known constant.
    pub fn max(a: &Expr, b: &Expr) -> Expr {
        Expr::extremum(vec![a.clone(), b.clone()], false)
    }

    fn extremum(args: Vec<Expr>, is_min: bool) -> Expr {
        // Flatten nested min/min (or max/max).
        let mut flat: Vec<Expr> = Vec::new();
        for a in args {
            match a.single_atom() {
                Some(Atom::Min(xs)) if is_min => flat.extend(xs.iter().cloned()),
                Some(Atom::Max(xs)) if !is_min => flat.extend(xs.iter().cloned()),
                _ => flat.push(a),
            }
        }
        // Drop arguments dominated by another one with a constant difference.
        let mut kept: Vec<Expr> = Vec::new();
        'outer: for a in flat {
            for k in kept.iter_mut() {
                if let Some(d) = a.checked_sub(k).ok().and_then(|d| d.as_const()) {
                    let a_wins = if is_min { d < 0 } else { d > 0 };
                    if a_wins {
                        *k = a.clone();
                    }
                    continue 'outer;
                }
            }
            kept.push(a);
        }
        // Arguments keep the order they were given in (`min(8*io+7, N-1)` reads as strip-mining
        // wrote it); constants go last.
        kept.sort_by_key(|a| a.as_const().is_some());
        kept.dedup();
        if kept.len() == 1 {
            return kept.pop().unwrap_or_default();
        }
        Expr::atom(if is_min { Atom::Min(kept) } else { Atom::Max(kept) })
    }

    /// `floor(self / d)` for `d >= 1`, simplified where exact.
    pub fn floordiv(&self, d: i64) -> Expr {
        assert!(d >= 1, "floordiv by a non-positive constant");
        if d == 1 {
            return self.clone();
        }
        if self.terms.iter().all(|(_, c)| c % d == 0) {
            return Expr {
                terms: self.terms.iter().map(|(a, c)| (a.clone(), c / d)).collect(),
                constant: self.constant.div_euclid(d),
            };
        }
        // floor((floor(x/b) + c)/d) = floor((x + c*b)/(b*d)): a block of blocks is one block
        // (strip-mining a block loop again), which keeps bounds one floor deep for interchange.
        if let ([(Atom::FloorDiv(x, b), 1)], c) = (self.terms.as_slice(), self.constant)
            && let Some(bd) = b.checked_mul(d)
            && let Some(cb) = c.checked_mul(*b)
            && let Ok(y) = x.checked_add_int(cb)
        {
            return y.floordiv(bd);
        }
        Expr::atom(Atom::FloorDiv(Box::new(self.clone()), d))
    }

    /// The value, if the expression is a constant.
    pub fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    /// The constant part.
    pub fn constant(&self) -> i64 {
        self.constant
    }

    /// The variable, if the expression is exactly one variable (a "plain" index).
    pub fn as_var(&self) -> Option<&Name> {
        match (self.terms.as_slice(), self.constant) {
            ([(Atom::Var(v), 1)], 0) => Some(v),
            _ => None,
        }
    }

    /// The arguments, if the expression is exactly one `min(...)`.
    pub fn min_args(&self) -> Option<&[Expr]> {
        match self.single_atom() {
            Some(Atom::Min(xs)) => Some(xs),
            _ => None,
        }
    }

    /// `rest + a` where `a` is the expression's one `min`, `max` or `floor` atom, with
    /// coefficient 1, and `rest` is affine: e.g. `to + min(x, y)` is `(min(x, y), to)`.
    pub fn atom_plus(&self) -> Option<(&Atom, Expr)> {
        let mut found = None;
        let mut rest = Vec::new();
        for (a, c) in &self.terms {
            match a {
                Atom::Var(_) => rest.push((a.clone(), *c)),
                _ if *c == 1 && found.is_none() => found = Some(a),
                _ => return None,
            }
        }
        Some((found?, Expr { terms: rest, constant: self.constant }))
    }

    /// An affine bound of the expression where its only non-affine terms are `c * floor(x / d)`
    /// with `x` affine and `d` dividing `c`: `floor(x / d)` lies in `[(x - d + 1) / d, x / d]`,
    /// so each term is replaced by the end that keeps the result at least the value (`upper`)
    /// or at most it. (A strip-mined loop's last block reaches `d*floor((N-1)/d) + d - 1`: its
    /// upper bound `N + d - 2`, past the tensor by less than a block.) `None` for other forms.
    pub fn affine_bound(&self, upper: bool) -> Option<Expr> {
        let mut out = Expr::int(self.constant);
        for (a, c) in &self.terms {
            let term = match a {
                Atom::Var(_) => Expr::atom(a.clone()).checked_scale(*c).ok()?,
                Atom::FloorDiv(x, d) if x.is_affine() && c % d == 0 => {
                    // c * floor(x/d) <= (c/d) * x where c > 0, and >= where c < 0.
                    let high_end = (*c > 0) == upper;
                    let x = if high_end { (**x).clone() } else { x.checked_add_int(1 - d).ok()? };
                    x.checked_scale(c / d).ok()?
                }
                _ => return None,
            };
            out = out.checked_add(&term).ok()?;
        }
        Some(out)
    }

    /// The one atom the expression is, with coefficient 1 and no constant.
    pub fn single_atom(&self) -> Option<&Atom> {
        match (self.terms.as_slice(), self.constant) {
            ([(a, 1)], 0) => Some(a),
            _ => None,
        }
    }

    /// True when every atom is a variable (the expression is affine).
    pub fn is_affine(&self) -> bool {
        self.terms.iter().all(|(a, _)| matches!(a, Atom::Var(_)))
    }

    /// The affine terms `(variable, coefficient)`, or `None` if the expression is not affine.
    pub fn affine_terms(&self) -> Option<Vec<(Name, i64)>> {
        self.terms
            .iter()
            .map(|(a, c)| match a {
                Atom::Var(v) => Some((v.clone(), *c)),
                _ => None,
            })
            .collect()
    }

    /// The coefficient of variable `v` in an affine expression (0 if absent).
    pub fn coeff(&self, v: &str) -> i64 {
        self.terms
            .iter()
            .find_map(|(a, c)| match a {
                Atom::Var(x) if &**x == v => Some(*c),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// Every variable the expression mentions, at any depth.
    pub fn vars(&self) -> BTreeSet<Name> {
        let mut out = BTreeSet::new();
        self.collect_vars(&mut out);
        out
    }

    fn collect_vars(&self, out: &mut BTreeSet<Name>) {
        for (a, _) in &self.terms {
            match a {
                Atom::Var(v) => {
                    out.insert(v.clone());
                }
                Atom::Min(xs) | Atom::Max(xs) => xs.iter().for_each(|x| x.collect_vars(out)),
                Atom::FloorDiv(x, _) => x.collect_vars(out),
            }
        }
    }

    /// True if the expression mentions variable `v`.
    pub fn mentions(&self, v: &str) -> bool {
        self.vars().iter().any(|x| &**x == v)
    }

    /// Replaces variable `v` by `by` everywhere and re-normalizes.
    pub fn subst(&self, v: &str, by: &Expr) -> Expr {
        self.subst_with(&|x| (x == v).then(|| by.clone()))
    }

    /// Replaces variables by expressions, simultaneously, where `f` returns `Some`.
    pub fn subst_with(&self, f: &dyn Fn(&str) -> Option<Expr>) -> Expr {
        let mut acc = Expr::int(self.constant);
        for (a, c) in &self.terms {
            let e = match a {
                Atom::Var(x) => f(x).unwrap_or_else(|| Expr::var_name(x)),
                Atom::Min(xs) => Expr::extremum(xs.iter().map(|x| x.subst_with(f)).collect(), true),
                Atom::Max(xs) => Expr::extremum(xs.iter().map(|x| x.subst_with(f)).collect(), false),
                Atom::FloorDiv(x, d) => x.subst_with(f).floordiv(*d),
            };
            acc = acc.add(&e.scale(*c));
        }
        acc
    }

    /// [`Expr::subst_with`] with checked arithmetic.
    pub fn checked_subst_with(&self, f: &dyn Fn(&str) -> Option<Expr>) -> Result<Expr, Overflow> {
        let mut acc = Expr::int(self.constant);
        for (a, c) in &self.terms {
            let e = match a {
                Atom::Var(x) => f(x).unwrap_or_else(|| Expr::var_name(x)),
                Atom::Min(xs) => Expr::extremum(
                    xs.iter().map(|x| x.checked_subst_with(f)).collect::<Result<_, _>>()?,
                    true,
                ),
                Atom::Max(xs) => Expr::extremum(
                    xs.iter().map(|x| x.checked_subst_with(f)).collect::<Result<_, _>>()?,
                    false,
                ),
                Atom::FloorDiv(x, d) => x.checked_subst_with(f)?.floordiv(*d),
            };
            acc = acc.checked_add(&e.checked_scale(*c)?)?;
        }
        Ok(acc)
    }

    /// Evaluates with the values `env` gives; `Err(name)` names the first unbound variable.
    /// Gives `i64::MAX` on overflow (never a wrapped value); [`Expr::checked_eval`] reports it.
    pub fn eval(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<i64, Name> {
        match self.checked_eval(env) {
            Ok(v) => Ok(v),
            Err(EvalError::Unbound(n)) => Err(n),
            Err(EvalError::Overflow) => Ok(i64::MAX),
        }
    }

    /// Evaluates with the values `env` gives, with checked arithmetic.
    pub fn checked_eval(&self, env: &dyn Fn(&str) -> Option<i64>) -> Result<i64, EvalError> {
        let mut acc = self.constant;
        for (a, c) in &self.terms {
            let v = match a {
                Atom::Var(x) => env(x).ok_or_else(|| EvalError::Unbound(x.clone()))?,
                Atom::Min(xs) => {
                    let mut m = i64::MAX;
                    for x in xs {
                        m = m.min(x.checked_eval(env)?);
                    }
                    m
                }
                Atom::Max(xs) => {
                    let mut m = i64::MIN;
                    for x in xs {
                        m = m.max(x.checked_eval(env)?);
                    }
                    m
                }
                Atom::FloorDiv(x, d) => x.checked_eval(env)?.div_euclid(*d),
            };
            acc = c.checked_mul(v).and_then(|cv| acc.checked_add(cv)).ok_or(EvalError::Overflow)?;
        }
        Ok(acc)
    }

    /// Writes the expression with `render` deciding how atoms other than variables print.
    pub(crate) fn write_with(
        &self,
        f: &mut dyn fmt::Write,
        atom: &dyn Fn(&Atom, &mut dyn fmt::Write) -> fmt::Result,
    ) -> fmt::Result {
        let mut first = true;
        for (a, c) in &self.terms {
            let (sign, mag) = if *c < 0 { ("-", -c) } else { ("+", *c) };
            if first {
                if sign == "-" {
                    f.write_str("-")?;
                }
            } else {
                f.write_str(sign)?;
            }
            if mag != 1 {
                write!(f, "{mag}*")?;
            }
            atom(a, f)?;
            first = false;
        }
        if first {
            write!(f, "{}", self.constant)?;
        } else if self.constant > 0 {
            write!(f, "+{}", self.constant)?;
        } else if self.constant < 0 {
            write!(f, "-{}", -self.constant)?;
        }
        Ok(())
    }

    /// True if printing needs parentheses when embedded in a larger expression.
    pub fn is_compound(&self) -> bool {
        self.terms.len() + usize::from(self.constant != 0 && !self.terms.is_empty()) > 1
            || self.terms.iter().any(|(_, c)| *c != 1)
    }
}

fn write_atom(a: &Atom, f: &mut dyn fmt::Write) -> fmt::Result {
    match a {
        Atom::Var(v) => f.write_str(v),
        Atom::Min(xs) | Atom::Max(xs) => {
            f.write_str(if matches!(a, Atom::Min(_)) { "min(" } else { "max(" })?;
            for (k, x) in xs.iter().enumerate() {
                if k > 0 {
                    f.write_str(", ")?;
                }
                x.write_with(f, &write_atom)?;
            }
            f.write_str(")")
        }
        Atom::FloorDiv(x, d) => {
            f.write_str("floor((")?;
            x.write_with(f, &write_atom)?;
            write!(f, ")/{d})")
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_with(f, &write_atom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Expr {
        Expr::var(s)
    }

    #[test]
    fn normal_form_combines_terms() {
        let e = v("i").add(&Expr::int(1)).add(&v("i"));
        assert_eq!(e, v("i").scale(2).add_int(1));
        assert_eq!(e.to_string(), "2*i+1");
        assert_eq!(v("h").add(&v("kh")).to_string(), "h+kh");
        assert_eq!(v("N").add_int(-1).to_string(), "N-1");
        assert_eq!(v("i").sub(&v("i")).as_const(), Some(0));
        assert_eq!(Expr::int(-3).to_string(), "-3");
        assert_eq!(v("i").scale(-1).add_int(4).to_string(), "-i+4");
    }

    #[test]
    fn affine_bounds_of_floors_enclose_every_value() {
        // 8*floor((N-1)/8) + 7, the last column a block of 8 reaches.
        let e = v("N").add_int(-1).floordiv(8).scale(8).add_int(7);
        let (hi, lo) = (e.affine_bound(true).unwrap(), e.affine_bound(false).unwrap());
        assert_eq!(hi.to_string(), "N+6");
        assert_eq!(lo.to_string(), "N-1");
        for n in 1..40 {
            let at = |x: &Expr| x.eval(&|_| Some(n)).unwrap();
            assert!(at(&lo) <= at(&e) && at(&e) <= at(&hi), "N={n}");
        }
        // A negative coefficient swaps the ends; a coefficient the divisor does not divide, or
        // a min, has no such bound.
        let neg = v("N").floordiv(4).scale(-4);
        assert_eq!(neg.affine_bound(true).unwrap().to_string(), "-N+3");
        assert_eq!(neg.affine_bound(false).unwrap().to_string(), "-N");
        assert_eq!(v("N").floordiv(4).scale(3).affine_bound(true), None);
        assert_eq!(Expr::min(&v("N"), &v("M")).affine_bound(true), None);
        assert_eq!(v("i").scale(2).affine_bound(false), Some(v("i").scale(2)));
    }

    #[test]
    fn min_simplifies_constant_differences() {
        let a = v("o").scale(4).add_int(3);
        assert_eq!(Expr::min(&a, &a.add_int(2)), a);
        let m = Expr::min(&a, &Expr::int(9));
        assert_eq!(m.to_string(), "min(4*o+3, 9)");
        assert_eq!(m.eval(&|_| Some(2)), Ok(9));
        assert_eq!(m.eval(&|_| Some(1)), Ok(7));
        // nested mins flatten
        let m2 = Expr::min(&m, &Expr::int(5));
        assert_eq!(m2.to_string(), "min(4*o+3, 5)");
    }

    #[test]
    fn floordiv_exact_and_symbolic() {
        assert_eq!(Expr::int(9).floordiv(4).as_const(), Some(2));
        assert_eq!(Expr::int(-1).floordiv(4).as_const(), Some(-1));
        assert_eq!(v("o").scale(4).add_int(8).floordiv(4), v("o").add_int(2));
        let f = v("N").add_int(-1).floordiv(4);
        assert_eq!(f.to_string(), "floor((N-1)/4)");
        assert_eq!(f.eval(&|_| Some(10)), Ok(2));
        // a block of blocks is one block
        assert_eq!(f.floordiv(2).to_string(), "floor((N-1)/8)");
        assert_eq!(f.add_int(1).floordiv(2).to_string(), "floor((N+3)/8)");
        for n in -20..20 {
            let nested = v("N").add_int(-1).floordiv(4).add_int(1).floordiv(2);
            assert_eq!(nested.eval(&|_| Some(n)), Ok(((n - 1).div_euclid(4) + 1).div_euclid(2)));
        }
    }

    #[test]
    fn substitution_renormalizes() {
        let e = v("i").scale(2).add(&v("j"));
        let s = e.subst("i", &v("o").scale(4).add_int(1));
        assert_eq!(s.to_string(), "j+8*o+2");
        let m = Expr::min(&v("i").add_int(3), &Expr::int(9));
        assert_eq!(m.subst("i", &Expr::int(2)).as_const(), Some(5));
        assert_eq!(e.eval(&|x| (x == "i").then_some(1)), Err(name("j")));
    }

    #[test]
    fn checked_arithmetic_reports_overflow() {
        let big = Expr::int(i64::MAX);
        assert_eq!(big.checked_add_int(1), Err(Overflow));
        assert_eq!(v("i").scale(i64::MAX).checked_add(&v("i")), Err(Overflow));
        assert_eq!(v("i").checked_scale(i64::MIN).and_then(|e| e.checked_scale(-1)), Err(Overflow));
        assert_eq!(v("N").scale(2).checked_eval(&|_| Some(i64::MAX)), Err(EvalError::Overflow));
        assert_eq!(v("N").checked_eval(&|_| None), Err(EvalError::Unbound(name("N"))));
        // the unchecked forms never wrap: they give a value `within` refuses
        assert!(!big.add_int(1).within(INT_MAX));
        assert!(!v("i").scale(i64::MAX).add(&v("i")).within(INT_MAX));
        assert!(v("i").scale(3).add_int(-7).within(INT_MAX));
    }
}
