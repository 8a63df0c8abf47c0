//! The pest parser and the conversion of its pairs into the syntax tree of [`super::ast`].
//!
//! Every token of the grammar is a named rule, so a syntax error can say which tokens were
//! expected where; [`syntax_error`] words them ("`,`", "an identifier", ...) and names the
//! token found instead.

use super::ast::{Arg, CallExpr, Ident, Program, Span, Stmt, StmtKind};
use super::diag::Located;
use crate::ir::Expr;
use crate::ops::ArgVal;
use pest::Parser as _;
use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;

/// The generated parser of `teml.pest`.
#[derive(pest_derive::Parser)]
#[grammar = "lang/teml.pest"]
struct TemlParser;

/// The deepest nesting of brackets and parentheses accepted (deeper input is refused before
/// parsing, so that no recursion can exhaust the stack).
pub const MAX_DEPTH: usize = 64;

/// Parses a whole program.
pub fn parse(src: &str, file: &str) -> Result<Program, Located> {
    check_depth(src, file)?;
    // A call may go on over several lines inside its brackets; the joined text has the same
    // byte offsets, so every location still refers to `src`.
    let joined = join_bracketed_lines(src);
    let mut pairs = TemlParser::parse(Rule::program, &joined).map_err(|e| syntax_error(src, file, &e))?;
    let cx = Cx { src, file };
    let mut stmts = Vec::new();
    if let Some(program) = pairs.next() {
        for p in program.into_inner() {
            if p.as_rule() == Rule::stmt {
                stmts.push(cx.stmt(p)?);
            }
        }
    }
    Ok(Program { file: file.to_string(), src: src.to_string(), stmts })
}

/// Blanks the line breaks (and comments) inside brackets and parentheses, byte for byte, so that
/// `f(a,\n  b)` reads as one statement.
fn join_bracketed_lines(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut depth = 0usize;
    let mut chars = src.chars().peekable();
    let mut in_str = false;
    while let Some(c) = chars.next() {
        match c {
            '"' => in_str = !in_str,
            '\\' if in_str => {
                out.push(c);
                if let Some(d) = chars.next() {
                    out.push(d);
                }
                continue;
            }
            '(' | '[' if !in_str => depth += 1,
            ')' | ']' if !in_str => depth = depth.saturating_sub(1),
            '#' if !in_str => {
                // a comment: copied at the top level, blanked inside brackets; never counted
                out.push(if depth > 0 { ' ' } else { '#' });
                while let Some(&d) = chars.peek() {
                    if d == '\n' {
                        break;
                    }
                    chars.next();
                    if depth > 0 {
                        out.extend(std::iter::repeat_n(' ', d.len_utf8()));
                    } else {
                        out.push(d);
                    }
                }
                continue;
            }
            '\n' if depth > 0 => {
                out.push(' ');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

/// Refuses input nested deeper than [`MAX_DEPTH`], pointing at the first bracket too deep.
fn check_depth(src: &str, file: &str) -> Result<(), Located> {
    let mut depth = 0usize;
    let mut chars = src.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '#' => {
                for (_, c) in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '"' => {
                while let Some((_, c)) = chars.next() {
                    match c {
                        '"' | '\n' => break,
                        '\\' => {
                            chars.next();
                        }
                        _ => {}
                    }
                }
            }
            '(' | '[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    let msg = format!("brackets nested too deep: at most {MAX_DEPTH} levels");
                    return Err(Located::at(file, src, i, 1, msg));
                }
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            '\n' => depth = 0,
            _ => {}
        }
    }
    Ok(())
}

/// How a rule is called in a message, and where it sorts among the expected tokens.
fn word(rule: Rule) -> (u8, &'static str) {
    match rule {
        // `program` fails as a whole only where its first statement cannot start.
        Rule::program | Rule::stmt | Rule::assign | Rule::const_def | Rule::call_stmt => (0, "a statement"),
        Rule::eq_tok => (1, "`=`"),
        Rule::lparen => (2, "`(`"),
        Rule::comma => (3, "`,`"),
        Rule::rparen => (4, "`)`"),
        Rule::rbracket => (5, "`]`"),
        Rule::lbracket => (6, "`[`"),
        Rule::arrow => (7, "`->`"),
        Rule::colon => (8, "`:`"),
        Rule::at | Rule::at_tok => (9, "`@id:`"),
        Rule::call | Rule::callee => (10, "a builtin call"),
        Rule::args | Rule::arg | Rule::omitted_arrow | Rule::value | Rule::elem => (11, "a value"),
        Rule::ident => (12, "an identifier"),
        Rule::list => (13, "a list"),
        Rule::sum | Rule::product | Rule::factor => (14, "an index expression"),
        Rule::int | Rule::signed_int => (15, "an integer"),
        Rule::float => (16, "a number"),
        Rule::string => (17, "a string"),
        Rule::neg | Rule::add_op | Rule::times => (18, "an operator"),
        Rule::sep | Rule::EOI => (19, "end of line"),
        Rule::WHITESPACE | Rule::COMMENT | Rule::id_chars | Rule::exponent => (20, "whitespace"),
    }
}

/// "a, b or c".
fn one_of(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [w] => (*w).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// The token at byte `pos`, as a message names it, and its length in bytes.
fn found(src: &str, pos: usize) -> (String, usize) {
    let rest = src.get(pos..).unwrap_or("");
    let Some(c) = rest.chars().next() else { return ("end of input".into(), 1) };
    if c == '\n' || rest.starts_with("\r\n") {
        return ("end of line".into(), 1);
    }
    if c == '"' {
        let line = rest.split('\n').next().unwrap_or(rest);
        let mut escaped = false;
        for (i, d) in line.char_indices().skip(1) {
            match d {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => return (format!("`{}`", &line[..=i]), i + 1),
                _ => escaped = false,
            }
        }
        return ("an unterminated string".into(), line.len());
    }
    if c.is_ascii_alphanumeric() || c == '_' {
        let n =
            rest.find(|d: char| !(d.is_ascii_alphanumeric() || d == '_' || d == '.')).unwrap_or(rest.len());
        return (format!("`{}`", &rest[..n]), n);
    }
    if rest.starts_with("->") {
        return ("`->`".into(), 2);
    }
    (format!("`{c}`"), c.len_utf8())
}

/// A pest error as a located diagnostic: what was expected, what was found, and where.
fn syntax_error(src: &str, file: &str, e: &pest::error::Error<Rule>) -> Located {
    let pos = match e.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((p, _)) => p,
    };
    let (what, len) = found(src, pos);
    let message = match &e.variant {
        ErrorVariant::ParsingError { positives, .. } => {
            let statement = positives.iter().any(|r| matches!(r, Rule::stmt | Rule::program));
            let mut words: Vec<(u8, &str)> = positives
                .iter()
                .map(|r| word(*r))
                .filter(|(_, w)| !(statement && *w == "end of line"))
                .collect();
            words.sort();
            words.dedup();
            let words: Vec<&str> = words.into_iter().map(|(_, w)| w).collect();
            if words.is_empty() {
                format!("syntax error: unexpected {what}")
            } else {
                let mut m = format!("expected {}, found {what}", one_of(&words));
                // `build(eq(A, ...))`: a call inside a call's arguments.
                let before = src[..pos].trim_end();
                if what == "`(`"
                    && words.contains(&"`)`")
                    && before.ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                {
                    m.push_str(
                        ": in the paper's syntax a call's arguments are names or literals, so bind the inner \
                         call to a name first (`x = eq(...)`, then `build(x)`); the Rhai front-end (`.rhai`) \
                         allows nested calls",
                    );
                }
                m
            }
        }
        ErrorVariant::CustomError { message } => format!("syntax error: {message}"),
    };
    Located::at(file, src, pos, len, message)
}

/// The argument an affine expression gives: an integer, a bare identifier, or an index
/// expression.
fn into_arg(e: Expr) -> ArgVal {
    match (e.as_const(), e.as_var()) {
        (Some(c), _) => ArgVal::Int(c),
        (_, Some(v)) => ArgVal::Word(v.clone()),
        _ => ArgVal::Index(e),
    }
}

/// The conversion context: the source and file name, for diagnostics.
struct Cx<'a> {
    src: &'a str,
    file: &'a str,
}

fn span(p: &Pair<'_, Rule>) -> Span {
    let s = p.as_span();
    Span { start: s.start(), end: s.end() }
}

impl Cx<'_> {
    fn err(&self, at: Span, message: impl Into<String>) -> Located {
        Located::at(self.file, self.src, at.start, at.len(), message)
    }

    fn ident(&self, p: &Pair<'_, Rule>) -> Ident {
        Ident { name: p.as_str().to_string(), span: span(p) }
    }

    fn stmt(&self, p: Pair<'_, Rule>) -> Result<Stmt, Located> {
        let whole = span(&p);
        let Some(inner) = p.into_inner().next() else {
            return Err(self.err(whole, "syntax error: empty statement"));
        };
        let kind = match inner.as_rule() {
            Rule::assign => {
                let (mut target, mut at, mut call) = (None, None, None);
                for q in inner.into_inner() {
                    match q.as_rule() {
                        Rule::ident => target = Some(self.ident(&q)),
                        Rule::at => {
                            at = q.into_inner().find(|r| r.as_rule() == Rule::ident).map(|r| self.ident(&r))
                        }
                        Rule::call => call = Some(self.call(q)?),
                        _ => {}
                    }
                }
                match (target, call) {
                    (Some(target), Some(call)) => StmtKind::Assign { target, at, call },
                    _ => return Err(self.err(whole, "syntax error: malformed assignment")),
                }
            }
            Rule::const_def => {
                let (mut name, mut value) = (None, None);
                for q in inner.into_inner() {
                    match q.as_rule() {
                        Rule::ident => name = Some(self.ident(&q)),
                        Rule::signed_int => value = Some(self.int(&q)?),
                        Rule::float => {
                            return Err(self.err(
                                span(&q),
                                format!("a named constant takes an integer, found the number {}", q.as_str()),
                            ));
                        }
                        _ => {}
                    }
                }
                match (name, value) {
                    (Some(name), Some(value)) => StmtKind::Const { name, value },
                    _ => return Err(self.err(whole, "syntax error: malformed constant")),
                }
            }
            _ => match inner.into_inner().find(|q| q.as_rule() == Rule::call) {
                Some(call) => StmtKind::Call(self.call(call)?),
                None => return Err(self.err(whole, "syntax error: malformed statement")),
            },
        };
        Ok(Stmt { kind, span: whole })
    }

    fn int(&self, p: &Pair<'_, Rule>) -> Result<i64, Located> {
        p.as_str()
            .parse::<i64>()
            .map_err(|_| self.err(span(p), format!("integer out of range: {} (at most 2^63-1)", p.as_str())))
    }

    fn call(&self, p: Pair<'_, Rule>) -> Result<CallExpr, Located> {
        let whole = span(&p);
        let mut name = None;
        let mut args = Vec::new();
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::callee => name = Some(self.ident(&q)),
                Rule::args => {
                    for a in q.into_inner().filter(|a| a.as_rule() == Rule::arg) {
                        self.arg(a, &mut args)?;
                    }
                }
                _ => {}
            }
        }
        match name {
            Some(name) => Ok(CallExpr { name, args, span: whole }),
            None => Err(self.err(whole, "syntax error: a call without a name")),
        }
    }

    /// One argument; an arrow `X -> Y` pushes two.
    fn arg(&self, p: Pair<'_, Rule>, out: &mut Vec<Arg>) -> Result<(), Located> {
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::omitted_arrow => {
                    for r in q.into_inner() {
                        match r.as_rule() {
                            Rule::arrow => out.push(Arg { value: ArgVal::Omitted, span: span(&r) }),
                            Rule::value => out.push(Arg { span: span(&r), value: self.value(r)? }),
                            _ => {}
                        }
                    }
                }
                Rule::value => out.push(Arg { span: span(&q), value: self.value(q)? }),
                _ => {}
            }
        }
        Ok(())
    }

    fn value(&self, p: Pair<'_, Rule>) -> Result<ArgVal, Located> {
        let whole = span(&p);
        let Some(q) = p.into_inner().next() else {
            return Err(self.err(whole, "syntax error: empty value"));
        };
        match q.as_rule() {
            Rule::list => {
                let mut items = Vec::new();
                for e in q.into_inner().filter(|e| e.as_rule() == Rule::elem) {
                    match e.into_inner().next() {
                        Some(v) => items.push(self.value(v)?),
                        None => items.push(ArgVal::Omitted),
                    }
                }
                Ok(ArgVal::List(items))
            }
            Rule::string => Ok(ArgVal::Str(unescape(q.as_str()))),
            Rule::float => match q.as_str().parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(ArgVal::Float(x)),
                _ => Err(self.err(span(&q), format!("number out of range: {}", q.as_str()))),
            },
            Rule::sum => Ok(into_arg(self.sum(q)?)),
            _ => Err(self.err(whole, "syntax error: unknown value")),
        }
    }

    fn overflow(&self, at: Span) -> Located {
        self.err(at, "integer overflow in the index expression")
    }

    fn sum(&self, p: Pair<'_, Rule>) -> Result<Expr, Located> {
        let whole = span(&p);
        let mut acc = Expr::int(0);
        let mut sign = 1;
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::add_op => sign = if q.as_str() == "-" { -1 } else { 1 },
                Rule::product => {
                    let x = self.product(q)?;
                    acc = x
                        .checked_scale(sign)
                        .and_then(|x| acc.checked_add(&x))
                        .map_err(|_| self.overflow(whole))?;
                }
                _ => {}
            }
        }
        Ok(acc)
    }

    fn product(&self, p: Pair<'_, Rule>) -> Result<Expr, Located> {
        let whole = span(&p);
        let mut acc: Option<Expr> = None;
        for q in p.into_inner().filter(|q| q.as_rule() == Rule::factor) {
            let x = self.factor(q)?;
            acc = Some(match acc {
                None => x,
                Some(a) => match (a.as_const(), x.as_const()) {
                    (Some(k), _) => x.checked_scale(k).map_err(|_| self.overflow(whole))?,
                    (_, Some(k)) => a.checked_scale(k).map_err(|_| self.overflow(whole))?,
                    (None, None) => {
                        return Err(self.err(
                            whole,
                            format!(
                                "expected an affine index expression (a product needs a constant \
                                 factor), found `{}`",
                                p_str(self.src, whole)
                            ),
                        ));
                    }
                },
            });
        }
        Ok(acc.unwrap_or_default())
    }

    fn factor(&self, p: Pair<'_, Rule>) -> Result<Expr, Located> {
        let whole = span(&p);
        let mut negate = false;
        let mut x = Expr::int(0);
        for q in p.into_inner() {
            match q.as_rule() {
                Rule::neg => negate = true,
                Rule::int => x = Expr::int(self.int(&q)?),
                Rule::ident => x = Expr::var(q.as_str()),
                Rule::sum => x = self.sum(q)?,
                _ => {}
            }
        }
        if negate { x.checked_scale(-1).map_err(|_| self.overflow(whole)) } else { Ok(x) }
    }
}

/// The source text of a span.
fn p_str(src: &str, s: Span) -> &str {
    src.get(s.start..s.end).unwrap_or("")
}

/// The contents of a string literal (quotes removed; `\"`, `\\`, `\n`, `\t` unescaped).
fn unescape(lit: &str) -> String {
    let inner = lit.strip_prefix('"').and_then(|s| s.strip_suffix('"')).unwrap_or(lit);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(d) => out.push(d),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_tokens() {
        assert_eq!(found("abc def", 4), ("`def`".into(), 3));
        assert_eq!(found("x 1.5e3)", 2), ("`1.5e3`".into(), 5));
        assert_eq!(found("x", 1), ("end of input".into(), 1));
        assert_eq!(found("x\r\ny", 1), ("end of line".into(), 1));
        assert_eq!(found("-> y", 0), ("`->`".into(), 2));
        assert_eq!(found("\"a\\\"b\" c", 0), ("`\"a\\\"b\"`".into(), 6));
        assert_eq!(found("\"ab\nc", 0), ("an unterminated string".into(), 3));
        assert_eq!(found("é", 0), ("`é`".into(), 2));
    }

    #[test]
    fn strings_unescape() {
        assert_eq!(unescape(r#""a\"b\\c\nd""#), "a\"b\\c\nd");
        assert_eq!(unescape(r#""""#), "");
    }

    #[test]
    fn affine_forms_and_overflow() {
        let x = Expr::var("i").checked_scale(2).and_then(|x| x.checked_sub(&Expr::int(3)));
        assert_eq!(x.map(into_arg), Ok(ArgVal::Index(Expr::var("i").scale(2).add_int(-3))));
        assert!(Expr::int(i64::MAX).checked_add(&Expr::int(1)).is_err());
        assert!(Expr::int(i64::MIN).checked_scale(-1).is_err());
        assert_eq!(Expr::var("i").checked_sub(&Expr::var("i")).map(into_arg), Ok(ArgVal::Int(0)));
        assert_eq!(into_arg(Expr::var("i")), ArgVal::Word("i".into()));
    }

    #[test]
    fn depth_is_checked_outside_strings_and_comments() {
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(check_depth(&deep, "f").is_err());
        assert!(check_depth(&format!("x = f(\"{deep}\") # {deep}\n{}", "[".repeat(MAX_DEPTH)), "f").is_ok());
        // Depth restarts on each line (a statement is one line).
        assert!(check_depth(&format!("{}\n{}", "[".repeat(40), "[".repeat(40)), "f").is_ok());
    }

    #[test]
    fn expected_words() {
        assert_eq!(one_of(&["`,`", "`]`", "an operator"]), "`,`, `]` or an operator");
        assert_eq!(one_of(&["`)`"]), "`)`");
    }
}
