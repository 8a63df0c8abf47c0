//! Values and the state σ (Sec. 3.2, eq. 4-5): identifiers mapped to tensor expressions or
//! loop nests, plus the named constants (`-D N=250`) that extents may use.

use super::expr::Name;
use super::loops::Nest;
use super::texpr::{Iters, Op, TExpr, TNode, real_leaf};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What an identifier denotes: `T + L`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Value {
    /// A tensor expression (a declaration, a virtual expression, or an assignment).
    Tensor(TExpr),
    /// A loop nest.
    Nest(Nest),
}

impl Value {
    /// A short description of the kind, for error messages.
    pub fn kind(&self) -> String {
        match self {
            Value::Nest(_) => "a loop nest".into(),
            Value::Tensor(t) => describe_tensor(t),
        }
    }

    /// The readable printing of either kind.
    pub fn tree(&self) -> String {
        match self {
            Value::Tensor(t) => t.tree(),
            Value::Nest(n) => n.tree(),
        }
    }

    /// The paper's notation.
    pub fn paper(&self) -> String {
        match self {
            Value::Tensor(t) => t.paper(),
            Value::Nest(n) => n.paper(),
        }
    }
}

/// Describes a tensor expression by its root, e.g. "an assignment `B[i2][i1] = A[i1][i2]`".
pub fn describe_tensor(t: &TNode) -> String {
    match &t.op {
        Op::Assign(_) => format!("an assignment `{t}`"),
        Op::Id(n) if t.iters == Iters::Bullet => format!("the scalar `{n}`"),
        Op::Id(n) => format!("the tensor `{n}` {}", t.shape),
        Op::Hole => "an unnamed tensor".into(),
        Op::Lit(x) => format!("the literal {x}"),
        _ => format!("the tensor expression `{t}` {}", t.shape),
    }
}

/// What a tensor is to its program: its values after the kernel are wanted (a result), or
/// not (a temporary: teml may keep only the part an iteration needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `result(T)`: kept whole, `-o T` saves it.
    Result,
    /// `temporary(T)`: its values may be dropped after the kernel (storage contraction).
    Temporary,
}

impl Role {
    /// The builtin that declares it.
    pub fn builtin(self) -> &'static str {
        match self {
            Role::Result => "result",
            Role::Temporary => "temporary",
        }
    }
}

/// Each declared tensor's role.
pub type Roles = BTreeMap<Name, Role>;

/// The state σ.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// σ: identifier ↦ value.
    pub vars: BTreeMap<Name, Value>,
    /// Named constants that extents may mention.
    #[serde(default)]
    pub consts: BTreeMap<Name, i64>,
    /// The named constants a program's `N = 250` statement has defined (a program defines
    /// each once; a value given on the command line, `-D N=100`, is in `consts` but not here,
    /// and overrides the program's default).
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub const_defs: std::collections::BTreeSet<Name>,
    /// How tensors get their initial data (`init` statements).
    #[serde(default)]
    pub inits: BTreeMap<Name, Init>,
    /// The kernels `codegen` statements asked for, in order.
    #[serde(default)]
    pub kernels: Vec<KernelRequest>,
    /// Transformations are not checked against the dependences (`--unchecked`): an illegal
    /// path then reaches verification, which reports the mismatch.
    #[serde(default)]
    pub unchecked: bool,
    /// What the program (`result(T)`, `temporary(T)`) or the command line (`--result`,
    /// `--temporary`) said each tensor is. A declared result is never contracted (`store_at`,
    /// `privatize`, code generation's own contraction); a tensor declared neither way is a
    /// temporary where a later statement of its kernel reads it, a result otherwise
    /// (docs/guide.md, "Results and temporaries"). The last declaration of a tensor wins; the
    /// command line's wins over the program's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: Roles,
    /// The tensors of `roles` the command line declared: they override the program's own
    /// `result`/`temporary` statements, as `-D` overrides `N = ...`.
    #[serde(skip)]
    pub roles_given: std::collections::BTreeSet<Name>,
    /// The tuning parameters of this evaluation (`param(name, choices)`): never saved, never
    /// compared.
    #[serde(skip)]
    pub params: super::params::Params,
    /// What the evaluation warned about, in order: never saved, never compared.
    #[serde(skip)]
    pub warnings: Warnings,
}

/// Warnings of an evaluation, each `file:line:col: message` (docs: `--deny-warnings`). Two
/// states that differ only in their warnings are the same state.
#[derive(Clone, Debug, Default)]
pub struct Warnings(pub Vec<String>);

impl PartialEq for Warnings {
    fn eq(&self, _: &Warnings) -> bool {
        true
    }
}

/// Initial data of a tensor: the `init` statement (Sec. 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Init {
    /// Uniform pseudo-random values from a seeded generator (the default for every tensor).
    Random,
    /// Every element set to this value.
    Value(f64),
    /// Read from a `.npy` file.
    Npy(String),
}

impl Init {
    /// The second argument of the `init` statement that sets it: `random`, `0.5`, `"a.npy"`.
    pub fn teml(&self) -> String {
        match self {
            Init::Random => "random".into(),
            Init::Value(v) => format!("{v:?}"),
            Init::Npy(p) => format!("{p:?}"),
        }
    }
}

/// One `codegen(l1, l2, ...)` statement: the nests (as they were when it ran) that become one
/// kernel, in order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelRequest {
    /// The identifiers named in the statement.
    pub names: Vec<Name>,
    /// Their nests.
    pub nests: Vec<Nest>,
    /// Where the `codegen` statement is, `file:line:col` (`None` for requests made otherwise).
    #[serde(default)]
    pub at: Option<String>,
    /// The name the program gave the kernel (`codegen(l1, l2, "mm_tiled")`).
    #[serde(default)]
    pub label: Option<String>,
}

impl KernelRequest {
    /// Its nests with their names, as code generation takes them.
    pub fn named(&self) -> Vec<(Name, Nest)> {
        self.names.iter().cloned().zip(self.nests.iter().cloned()).collect()
    }

    /// The kernel's name before de-duplication: the program's, else its nests' joined by `_`.
    pub fn base_label(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.names.iter().map(|n| n.to_string()).collect::<Vec<_>>().join("_"))
    }
}

impl State {
    /// The stable name of kernel `k` (`codegen` number k+1): [`KernelRequest::base_label`],
    /// with `_2`, `_3`, ... when earlier kernels of the program have the same one. It names
    /// the kernel in reports, in JSON and in C (`teml_<name>`).
    pub fn kernel_label(&self, k: usize) -> String {
        let Some(req) = self.kernels.get(k) else { return format!("kernel{}", k + 1) };
        let base = req.base_label();
        let same = self.kernels[..k].iter().filter(|r| r.base_label() == base).count();
        if same == 0 { base } else { format!("{base}_{}", same + 1) }
    }

    /// The empty state.
    pub fn new() -> State {
        State::default()
    }

    /// σ(id).
    pub fn get(&self, id: &str) -> Option<&Value> {
        self.vars.get(id)
    }

    /// σ{id ↦ x}: a new state (the old one is unchanged).
    pub fn with(&self, id: &str, x: Value) -> State {
        let mut s = self.clone();
        s.vars.insert(Arc::from(id), x);
        s
    }

    /// The state a session or a program starts from: the named constants `consts` (`-D`,
    /// `:def`) bound, and `--unchecked`.
    pub fn starting<'a>(consts: impl IntoIterator<Item = (&'a str, i64)>, unchecked: bool) -> State {
        let base = State { unchecked, ..State::new() };
        consts.into_iter().fold(base, |s, (n, v)| s.with_const(n, v))
    }

    /// A new state with the named constant `name = value`.
    pub fn with_const(&self, name: &str, value: i64) -> State {
        let mut s = self.clone();
        s.consts.insert(Arc::from(name), value);
        s
    }

    /// Whether the program or the command line declared `t` a result (`result(t)`).
    pub fn is_result(&self, t: &Name) -> bool {
        self.roles.get(t) == Some(&Role::Result)
    }

    /// The value of a named constant.
    pub fn constant(&self, name: &str) -> Option<i64> {
        self.consts.get(name).copied()
    }

    /// The real tensor `id` denotes, as a leaf `(id, S, ε)`: its declaration, or the target of
    /// the assignment it is bound to when that target is `id` itself.
    pub fn real_tensor(&self, id: &str) -> Option<TExpr> {
        match self.get(id)? {
            Value::Tensor(t) if t.is_tensor_leaf() && t.iters == Iters::Unset => Some(t.clone()),
            Value::Tensor(t) if t.is_tensor_leaf() && t.iters == Iters::Bullet => Some(t.clone()),
            Value::Tensor(t) => {
                let x = t.target()?;
                (x.id().map(|n| &**n) == Some(id)).then(|| real_leaf(x))
            }
            Value::Nest(_) => None,
        }
    }

    /// Serializes the whole state (values and constants) as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Reads a state written by [`State::to_json`].
    pub fn from_json(s: &str) -> Result<State, serde_json::Error> {
        serde_json::from_str(s)
    }
}
