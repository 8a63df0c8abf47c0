//! Layouts: a tensor stored regrouped (`regroup`), with its dimensions permuted, or padded.

use super::*;

/// What a layout builtin changes: the tensor's current layout in `nest` and its rank, after
/// checking that the nest accesses it and does not store it per iteration.
pub(super) fn layout_of(nest: &Nest, b: &str, tensor: &Name) -> Result<(crate::ir::Layout, usize)> {
    let rank = nest.rank_of(tensor);
    let bad = |expected: &str, found: String| Error::bad_argument(b, Arg::new(2, "tensor"), expected, found);
    let rank =
        rank.ok_or_else(|| bad("a tensor the nest accesses", format!("`{tensor}`, which it does not")))?;
    if rank == 0 {
        return Err(bad("a tensor with dimensions", format!("the scalar `{tensor}`")));
    }
    if let Some(r) = nest.refusal(Mark::Layout, tensor) {
        return Err(bad(r.expected, r.found));
    }
    Ok((nest.layouts.get(tensor).cloned().unwrap_or_default(), rank))
}

pub(super) fn with_layout(nest: &Nest, tensor: &Name, layout: crate::ir::Layout, rank: usize) -> Nest {
    let mut out = nest.with_items(nest.items.clone());
    if layout.is_plain(rank) {
        out.layouts.remove(tensor);
    } else {
        out.layouts.insert(tensor.clone(), layout);
    }
    out
}

/// `regroup(l, T, d, V [, pad])` (Sinkarovs and Scholz 2013's layout type `d`): tensor `T` is stored with its
/// dimension `d` regrouped into blocks of `V`: element `x` lives at
/// `[x1, .., xd div V, .., xn, xd mod V]` (its `I_d`), AoS to SoA (`d` the rows of structures)
/// or AoSoA. The kernel converts `T` at entry and back at exit. `V` must divide the extent, or
/// `pad` be true (the last block is padded). The meaning is unchanged: `I_d` is injective.
pub fn regroup(state: &State, nest: &Nest, tensor: &Name, dim: i64, width: i64, pad: bool) -> Result<Nest> {
    let b = "regroup";
    let (mut layout, rank) = layout_of(nest, b, tensor)?;
    if dim < 1 || dim as usize > rank {
        return Err(Error::bad_argument(
            b,
            Arg::new(3, "dimension"),
            format!("a dimension of `{tensor}`, from 1 to {rank}"),
            dim.to_string(),
        ));
    }
    if !(2..=4096).contains(&width) {
        return Err(Error::bad_argument(
            b,
            Arg::new(4, "width"),
            "a block width from 2 to 4096",
            width.to_string(),
        ));
    }
    if !layout.is_plain(rank) {
        return Err(Error::Illegal {
            builtin: b.into(),
            reason: format!(
                "`{tensor}` already has the layout {}: expected regroup first, then permute_layout and pad",
                layout.describe(rank)
            ),
        });
    }
    let k = dim as usize - 1;
    let extent = state.real_tensor(tensor).and_then(|t| match t.shape.dims()?.get(k)? {
        crate::ir::Dim::Known(e) => e.eval(&|v| state.constant(v)).ok(),
        crate::ir::Dim::Unknown => None,
    });
    if let Some(n) = extent
        && n % width != 0
        && !pad
    {
        return Err(Error::bad_argument(
            b,
            Arg::new(4, "width"),
            format!(
                "a width that divides dimension {dim} of `{tensor}` (extent {n}), or regroup(l, {tensor}, {dim}, \
                 {width}, true) to pad its last block"
            ),
            width.to_string(),
        ));
    }
    layout.regroup = Some((k, width));
    Ok(with_layout(nest, tensor, layout, rank))
}

/// `permute_layout(l, T, order)`: tensor `T` is stored with its dimensions in `order` (1-based;
/// after a `regroup`, its block dimension is the last): a transpose kept as the layout instead
/// of a copy. The kernel converts `T` at entry and back at exit.
pub fn permute_layout(nest: &Nest, tensor: &Name, order: &[i64]) -> Result<Nest> {
    let b = "permute_layout";
    let (mut layout, rank) = layout_of(nest, b, tensor)?;
    let r = layout.rank(rank);
    let mut sorted: Vec<i64> = order.to_vec();
    sorted.sort_unstable();
    if sorted != (1..=r as i64).collect::<Vec<_>>() {
        return Err(Error::bad_argument(
            b,
            Arg::new(3, "order"),
            format!("a permutation of 1..{r}: the {r} dimensions of `{tensor}`'s buffer"),
            format!("[{}]", order.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
        ));
    }
    if layout.pad.iter().any(|(m, e)| *m > 1 || *e > 0) {
        return Err(Error::Illegal {
            builtin: b.into(),
            reason: format!("`{tensor}` is already padded: expected permute_layout before pad"),
        });
    }
    let current = layout.order(rank);
    layout.order = order.iter().map(|d| current[*d as usize - 1]).collect();
    Ok(with_layout(nest, tensor, layout, rank))
}

/// `pad(l, T, d, m [, extra])` (Rink 2018's padding): dimension `d` of `T`'s buffer is rounded
/// up to a multiple of `m`, then `extra` more elements are added (leading-dimension padding
/// against conflict misses; rows of whole vectors). The padding is never read by the program;
/// inputs and outputs keep their shape (the kernel converts at entry and exit).
pub fn pad(nest: &Nest, tensor: &Name, dim: i64, multiple: i64, extra: i64) -> Result<Nest> {
    let b = "pad";
    let (mut layout, rank) = layout_of(nest, b, tensor)?;
    let r = layout.rank(rank);
    let bad = |pos: usize, role: &str, expected: String, found: i64| {
        Error::bad_argument(b, Arg::new(pos, role), expected, found.to_string())
    };
    if dim < 1 || dim as usize > r {
        return Err(bad(3, "dimension", format!("a dimension of `{tensor}`'s buffer, from 1 to {r}"), dim));
    }
    if !(1..=MAX_PAD as i64).contains(&multiple) {
        return Err(bad(4, "multiple", format!("a multiple from 1 to {MAX_PAD}"), multiple));
    }
    if !(0..=4096).contains(&extra) {
        return Err(bad(5, "extra", "from 0 to 4096 more elements".into(), extra));
    }
    layout.pad.resize(r, (1, 0));
    layout.pad[dim as usize - 1] = (multiple, extra);
    Ok(with_layout(nest, tensor, layout, rank))
}

/// Largest padding multiple `pack` accepts.
pub const MAX_PAD: usize = 64;
