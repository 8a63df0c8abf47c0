//! Dot-product groups (`dot`): which statements a reduction loop can sum in groups of
//! consecutive iterations, each group's products added into a lane by one instruction
//! (`vdpbf16ps`: a pair of bf16 products into a float lane; `vpdpbusd`: four products of an
//! unsigned and a signed byte into an i32 lane), and which instruction a pair of operand types
//! has. The transformation asks it to validate the mark, code generation to print the group,
//! the scheduler whether to offer it.

use crate::ir::{DType, Lowered, Name, Op, TExpr, Update};

/// A statement `t += x * y` that a `dot` loop sums in groups.
#[derive(Clone, Debug)]
pub struct Product {
    /// The product's left operand, as written.
    pub x: TExpr,
    /// Its right operand.
    pub y: TExpr,
    /// Consecutive iterations a group sums: the products that fill a 32-bit lane.
    pub group: usize,
}

/// The group of a product of elements of types `a` and `b`: 2 for bf16 pairs, 4 for bytes
/// (the 32 bits of one lane of the accumulation type); none for other types.
pub fn group(a: DType, b: DType) -> Option<usize> {
    match (a, b) {
        (DType::Bf16, DType::Bf16) => Some(2),
        (DType::I8 | DType::U8, DType::I8 | DType::U8) => Some(4),
        _ => None,
    }
}

/// The instruction that sums a group of products of types `a` and `b` and the CPU flags
/// (`/proc/cpuinfo`'s words) any of which provides it at some vector width: bf16 pairs by
/// `vdpbf16ps` (AVX512-BF16), an unsigned and a signed byte by `vpdpbusd` (AVX512-VNNI, or
/// AVX-VNNI at 256 bits). Two signed or two unsigned bytes have none (they run as plain C).
pub fn instruction(a: DType, b: DType) -> Option<(&'static str, &'static [&'static str])> {
    match (a, b) {
        (DType::Bf16, DType::Bf16) => Some(("vdpbf16ps", &["avx512_bf16"])),
        (DType::U8, DType::I8) | (DType::I8, DType::U8) => Some(("vpdpbusd", &["avx512_vnni", "avx_vnni"])),
        _ => None,
    }
}

/// The flags `dot`'s instruction argument may name.
pub const FLAGS: &[&str] = &["avx512_bf16", "avx512_vnni", "avx_vnni"];

/// `lw` as a product a loop over `k` sums in groups, or why it is not one: an `+=` of the
/// product of two elements of bf16 (both) or of 8-bit integers (both), each indexed by `k`,
/// into an element of their accumulation type (float, i32) that `k` does not index.
pub fn product(lw: &Lowered, k: &Name) -> Result<Product, String> {
    let what = lw.target.access();
    if lw.update != Update::Add {
        return Err(format!("{what} is not summed (`+=`) over `{k}`"));
    }
    if lw.target.index_list().unwrap_or(&[]).iter().any(|x| x.mentions(k)) {
        return Err(format!("{what} varies with `{k}`: expected a target `{k}` sums into"));
    }
    if lw.rhs.op != Op::Mul || lw.rhs.children.len() != 2 {
        return Err(format!("the value added to {what} is not a product of two elements"));
    }
    let (x, y) = (&lw.rhs.children[0], &lw.rhs.children[1]);
    for v in [x, y] {
        if !v.is_tensor_leaf() || !v.index_list().unwrap_or(&[]).iter().any(|e| e.mentions(k)) {
            return Err(format!(
                "{} in the product added to {what} is not an element indexed by `{k}`",
                v.access()
            ));
        }
    }
    let Some(group) = group(x.dtype, y.dtype) else {
        return Err(format!(
            "{} x {} has no dot-product group: expected bf16 x bf16 (pairs) or 8-bit x 8-bit integers (quads)",
            x.dtype, y.dtype
        ));
    };
    let acc = x.dtype.compute();
    if lw.target.dtype != acc {
        return Err(format!(
            "{what} is {}: a group of {} x {} products sums in {acc}, expected a target of that type",
            lw.target.dtype, x.dtype, y.dtype
        ));
    }
    Ok(Product { x: x.clone(), y: y.clone(), group })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_instructions_by_type() {
        assert_eq!(group(DType::Bf16, DType::Bf16), Some(2));
        assert_eq!(group(DType::U8, DType::I8), Some(4));
        assert_eq!(group(DType::I8, DType::I8), Some(4));
        assert_eq!(group(DType::Float, DType::Float), None);
        assert_eq!(group(DType::Bf16, DType::F16), None);
        assert_eq!(instruction(DType::U8, DType::I8).map(|i| i.0), Some("vpdpbusd"));
        assert_eq!(instruction(DType::I8, DType::U8).map(|i| i.0), Some("vpdpbusd"));
        assert!(instruction(DType::I8, DType::I8).is_none());
        assert_eq!(instruction(DType::Bf16, DType::Bf16).map(|i| i.1), Some(&["avx512_bf16"][..]));
    }
}
