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
    Ok(Shape { rows, cols, row_trip, col_trip, target, a, b })
}

#[cfg(test)]
mod tests {
    use super::*;

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
