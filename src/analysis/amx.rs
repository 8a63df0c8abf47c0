//! AMX tiles (`amx`): which reduction loops a block of the result can sum in Intel's tile
//! registers (eight tiles of 16 rows x 64 bytes), and the tile instruction a pair of operand
//! types has. A tile product `_tile_dpbf16ps(c, a, b)` adds to the 16 x 16 floats of tile `c`
//! the products of `a`'s 16 x 32 bf16 and `b`'s 16 pair-rows of 16 x 2 bf16 (`b`: the 32 x 16
//! block of B stored in the pair layout `pack(.., group)` writes); `_tile_dpbusd` and its
//! sign variants do the same for 16 x 64 bytes and quad-rows into i32. The transformation asks
//! it to validate the mark, code generation for the block's shape, the scheduler whether to
//! offer it.

use super::vector;
use crate::ir::{DType, LNode, Loop, Name, TExpr};
use std::sync::Arc;

/// The tile product of operand types `a` (the rows' operand) and `b` (the columns' operand)
/// and the CPU flag (`/proc/cpuinfo`'s word) that provides it besides `amx_tile`.
pub fn instruction(a: DType, b: DType) -> Option<(&'static str, &'static str)> {
    Some(match (a, b) {
        (DType::Bf16, DType::Bf16) => ("_tile_dpbf16ps", "amx_bf16"),
        (DType::U8, DType::I8) => ("_tile_dpbusd", "amx_int8"),
        (DType::I8, DType::U8) => ("_tile_dpbsud", "amx_int8"),
        (DType::I8, DType::I8) => ("_tile_dpbssd", "amx_int8"),
        (DType::U8, DType::U8) => ("_tile_dpbuud", "amx_int8"),
        _ => return None,
    })
}

/// Rows (and columns) of one tile of the result.
pub const TILE: i64 = 16;

/// A reduction loop whose block of the result runs in tiles: `for k { for i { for j {
/// t[i][j] += a[i][k] * b[k][j] } } }` with `i` and `j` blocks of 16 or 32 iterations.
#[derive(Clone, Debug)]
pub struct Shape {
    /// The rows' loop (`i`), as written.
    pub rows: Arc<Loop>,
    /// The columns' loop (`j`), inside the rows'.
    pub cols: Arc<Loop>,
    /// The rows' full block's trip count (16 or 32).
    pub row_trip: i64,
    /// The columns' (16 or 32).
    pub col_trip: i64,
    /// The statement's target.
    pub target: TExpr,
    /// The operand indexed by the rows and the reduction.
    pub a: TExpr,
    /// The operand indexed by the reduction and the columns.
    pub b: TExpr,
}

impl Shape {
    /// Tiles of the result (at most 4), of `a` and of `b` (2 each): 8 at most, AMX's count.
    pub fn tiles(&self) -> (usize, usize, usize) {
        let (r, c) = ((self.row_trip / TILE) as usize, (self.col_trip / TILE) as usize);
        (r * c, r, c)
    }
}

/// Loop `k`'s body as a block of tiles, or why it is not one: exactly one loop (rows) holding
/// exactly one loop (columns) holding one statement `+=` a product, each loop a block of 16 or
/// 32 iterations; the target indexed by both and not by `k`, one operand by the rows and `k`
/// only, the other by `k` and the columns only. (The product's types are `dot`'s to check.)
pub fn shape(k: &Loop) -> Result<Shape, String> {
    let only_loop = |items: &[LNode], what: &str| -> Result<Arc<Loop>, String> {
        match items {
            [LNode::Loop(l)] => Ok(l.clone()),
            _ => Err(format!("expected exactly one loop ({what}) directly inside `{}`", k.iter)),
        }
    };
    let rows = only_loop(&k.body, "the rows of the result's block")?;
    let cols = only_loop(&rows.body, "the columns, inside the rows")?;
    let [LNode::Stmt(s)] = &cols.body[..] else {
        return Err(format!("expected exactly one statement inside loop `{}`", cols.iter));
    };
    let trip = |l: &Loop| -> Result<i64, String> {
        match vector::block(l).map(|b| b.trip) {
            Some(t) if t == TILE || t == 2 * TILE => Ok(t),
            t => Err(format!(
                "loop `{}` runs {}: expected blocks of 16 or 32 iterations (one or two tiles of 16 rows or columns)",
                l.iter,
                t.map_or("a trip count that is not a constant block".to_string(), |t| format!(
                    "{t} iterations"
                ))
            )),
        }
    };
    let (row_trip, col_trip) = (trip(&rows)?, trip(&cols)?);
    let lw = crate::ir::lower(s).ok_or_else(|| format!("not an assignment: {s}"))?;
    if let Some(g) = lw.when.first() {
        return Err(format!(
            "{} runs only where {g} >= 0: expected a statement every element of the block runs",
            lw.target.access()
        ));
    }
    let p = super::dot::product(&lw, &k.iter)?;
    let by = |x: &TExpr, v: &Name| x.index_list().unwrap_or(&[]).iter().any(|e| e.mentions(v));
    let (i, j) = (&rows.iter, &cols.iter);
    let target = lw.target.clone();
    if !by(&target, i) || !by(&target, j) {
        return Err(format!(
            "{} is not indexed by both `{i}` and `{j}`: expected a block of the result",
            target.access()
        ));
    }
    let (a, b) = match (by(&p.x, i) && !by(&p.x, j), by(&p.y, j) && !by(&p.y, i)) {
        (true, true) => (p.x, p.y),
        _ if by(&p.y, i) && !by(&p.y, j) && by(&p.x, j) && !by(&p.x, i) => (p.y, p.x),
        _ => {
            return Err(format!(
                "{} x {}: expected one operand indexed by `{i}` and `{}` (not `{j}`) and the other by `{}` and `{j}` (not `{i}`)",
                p.x.access(),
                p.y.access(),
                k.iter,
                k.iter
            ));
        }
    };
    // A tile's rows are a constant stride apart: every index affine (not `A[i/2][k]`).
    if let Some(x) =
        [&target, &a, &b].into_iter().find(|x| !x.index_list().unwrap_or(&[]).iter().all(|e| e.is_affine()))
    {
        return Err(format!(
            "{} has an index that is not affine: expected rows a constant stride apart",
            x.access()
        ));
    }
    Ok(Shape { rows, cols, row_trip, col_trip, target, a, b })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Expr, State, Value};

    /// The k loop of a 64^3 bf16 product in 32 x 32 blocks (`for io, jo, k, i, j`).
    fn k_loop() -> Loop {
        let src = "A = tensor(bf16, [64, 64])\nB = tensor(bf16, [64, 64])\nC = tensor(float, [64, 64])\n\
                   C = contract(A, B, [[2, 1]])\nl0 = build(C)\nl1 = stripmine(l0, 1, 32)\n\
                   l2 = stripmine(l1, 3, 32)\nl = permute(l2, [1, 3, 5, 2, 4])\n";
        let s = crate::lang::eval_with(src, "t.teml", &State::new(), &crate::script::Stdlib::get()).unwrap();
        let Some(Value::Nest(n)) = s.get("l") else { panic!("no nest l") };
        (*n.path()[2]).clone()
    }

    /// `k` with its statement run only where `g >= 0`.
    fn guarded(k: &Loop, g: Expr) -> Loop {
        let mut k = k.clone();
        let mut i = (*k.body[0].as_loop().unwrap().clone()).clone();
        let mut j = (*i.body[0].as_loop().unwrap().clone()).clone();
        let LNode::Stmt(st) = &j.body[0] else { panic!() };
        let mut inst = st.inst.as_deref().unwrap().clone();
        inst.guard.push(g);
        j.body = vec![LNode::Stmt(st.with_instance(inst))];
        i.body = vec![LNode::Loop(Arc::new(j))];
        k.body = vec![LNode::Loop(Arc::new(i))];
        k
    }

    #[test]
    fn a_block_of_tiles_and_what_is_not_one() {
        let k = k_loop();
        let s = shape(&k).unwrap();
        assert_eq!((s.row_trip, s.col_trip, s.tiles()), (32, 32, (4, 2, 2)));
        assert_eq!((s.a.access(), s.b.access()), ("A[i1][k1]".to_string(), "B[k1][i2]".to_string()), "{s:?}");
        // A statement under a guard (the tiles would update every element of the block).
        let j = k.body[0].as_loop().unwrap().body[0].as_loop().unwrap().iter.clone();
        let why = shape(&guarded(&k, Expr::var_name(&j).add_int(-3))).unwrap_err();
        assert!(why.contains("runs only where") && why.contains("every element of the block"), "{why}");
        // The rows' loop inside the columns', or no loop at all.
        let i = k.body[0].as_loop().unwrap();
        let why = shape(i).unwrap_err();
        assert!(why.contains("expected exactly one loop"), "{why}");
    }

    #[test]
    fn tile_products_by_type() {
        assert_eq!(instruction(DType::Bf16, DType::Bf16), Some(("_tile_dpbf16ps", "amx_bf16")));
        assert_eq!(instruction(DType::U8, DType::I8).map(|x| x.0), Some("_tile_dpbusd"));
        assert_eq!(instruction(DType::I8, DType::U8).map(|x| x.0), Some("_tile_dpbsud"));
        assert_eq!(instruction(DType::I8, DType::I8).map(|x| x.0), Some("_tile_dpbssd"));
        assert_eq!(instruction(DType::U8, DType::U8).map(|x| x.0), Some("_tile_dpbuud"));
        assert!(instruction(DType::Float, DType::Float).is_none());
        assert!(instruction(DType::F16, DType::F16).is_none());
    }
}
