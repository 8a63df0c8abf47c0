//! No input makes the parser or the evaluator panic: random bytes, random token soups,
//! random well-formed statements (whose arguments are random) and random chains of loop
//! transformations (levels and factors up to i64 extremes) all give a value or a located error.

use proptest::prelude::*;
use teml::ir::State;
use teml::lang::{eval, parse};

const PRELUDE: &str =
    "A = tensor([4, 4])\nB = tensor([4, 6])\ns = scalar()\nT = eq(A, [i, j] -> [j, i])\nl = build(T)\n";

const TOKENS: &[&str] = &[
    "A",
    "B",
    "C",
    "T",
    "l",
    "l1",
    "s",
    "i",
    "j",
    "k",
    "i1",
    "i2",
    "N",
    "double",
    "float",
    "random",
    "0",
    "1",
    "2",
    "3",
    "-1",
    "32",
    "250",
    "9223372036854775807",
    "1.5",
    "1e-3",
    "\"a.npy\"",
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    "->",
    "@",
    ":",
    "+",
    "-",
    "*",
    "\n",
    ";",
    "#",
    " ",
    "\t",
    "\"",
];

fn names() -> Vec<&'static str> {
    teml::ops::builtins().iter().map(|b| b.name).collect()
}

/// Parses and evaluates; the only requirement is that it returns, and that an error points
/// inside the input.
fn check(src: &str) {
    if let Err(e) = parse(src, "p") {
        assert!(e.line >= 1 && e.col >= 1 && e.width >= 1);
        assert!(e.line <= src.matches('\n').count() + 1, "{e}");
        let _ = e.to_string();
    }
    for start in [State::new(), State::new().with_const("N", 5)] {
        if let Err(e) = eval(src, "p", &start) {
            let _ = e.to_string();
        }
    }
}

fn token() -> impl Strategy<Value = String> {
    let names = names();
    prop_oneof![
        3 => proptest::sample::select(TOKENS).prop_map(str::to_string),
        1 => proptest::sample::select(names).prop_map(str::to_string),
    ]
}

fn arg() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        proptest::sample::select(&["A", "B", "T", "l", "s", "i", "j", "k", "N", "double", "random", "Q"][..])
            .prop_map(str::to_string),
        (-3i64..300).prop_map(|i| i.to_string()),
        Just("i+1".to_string()),
        Just("9223372036854775807".to_string()),
        Just("-9223372036854775807".to_string()),
        Just("4611686018427387904".to_string()),
        Just("2*j".to_string()),
        Just("-i+4".to_string()),
        Just("1.5".to_string()),
        Just("\"x.npy\"".to_string()),
        Just(String::new()),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(|xs| format!("[{}]", xs.join(", "))),
            (inner.clone(), inner).prop_map(|(a, b)| format!("{a} -> {b}")),
        ]
    })
}

fn statement() -> impl Strategy<Value = String> {
    let names = names();
    (
        proptest::sample::select(&["", "x = ", "A = ", "T = ", "y = @A: ", "l2 = ", "N = 3\n"][..]),
        proptest::sample::select(names),
        proptest::collection::vec(arg(), 0..5),
    )
        .prop_map(|(lhs, f, args)| format!("{lhs}{f}({})", args.join(", ")))
}

/// 256 cases each (PROPTEST_CASES=N for more); no failure files written.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    // 256 cases each (about a second in all); PROPTEST_CASES=N for a longer run.
    #![proptest_config(config())]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        check(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_tokens(tokens in proptest::collection::vec(token(), 0..60), prelude in any::<bool>(), spaced in any::<bool>()) {
        let body = tokens.join(if spaced { " " } else { "" });
        check(&if prelude { format!("{PRELUDE}{body}") } else { body });
    }

    #[test]
    fn random_statements(stmts in proptest::collection::vec(statement(), 1..6)) {
        check(&format!("{PRELUDE}{}", stmts.join("\n")));
    }
}

#[test]
fn deep_and_long_inputs() {
    check(&"[".repeat(100_000));
    check(&format!("x = f({})", "(".repeat(5_000)));
    check(&format!("x = f({})", "-".repeat(5_000)));
    check(&format!("x = f({})", vec!["i"; 5_000].join("+")));
    check(&"x = f(A)\n".repeat(2_000));
    check(&format!("x = f({}0)", "1*".repeat(2_000)));
}

/// `codegen()` with too few arguments is an error, not an overflow in the argument check.
#[test]
fn codegen_without_arguments() {
    let e = eval("codegen()", "p", &State::new()).unwrap_err();
    assert!(e.message.starts_with("codegen: "), "{e}");
}

fn level() -> impl Strategy<Value = i64> {
    prop_oneof![8 => -1i64..6, 1 => Just(i64::MAX), 1 => Just(i64::MIN + 1), 1 => Just(1i64 << 62)]
}

fn transform() -> impl Strategy<Value = String> {
    (0u8..7, level(), level(), 0usize..4).prop_map(|(t, a, b, src)| {
        let l = ["l", "x1", "x2", "x3"][src];
        match t {
            0 => format!("stripmine({l}, {a}, {b})"),
            1 => format!("interchange({l}, {a}, {b})"),
            2 => format!("interchange({l}, [{a}, {b}])"),
            3 => format!("unroll({l}, {a})"),
            4 => format!("fuse_inner({l}, {a})"),
            5 => format!("fuse_outer({l}, x1, {a})"),
            _ => format!("parallelize({l}, {a})"),
        }
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_transformation_chains(ts in proptest::collection::vec(transform(), 1..4), n in 1i64..40) {
        let mut src = format!("N = {n}\nA = tensor([N, 5, 3])\nT = eq(A, [i, j, k] -> [k, i, j])\nl = build(T)\nx1 = build(T)\n");
        for (k, t) in ts.iter().enumerate() {
            src.push_str(&format!("x{} = {t}\n", k + 1));
        }
        check(&src);
    }
}
