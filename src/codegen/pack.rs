//! Buffers per loop: packed panels (`pack`) copied before a loop, and tensors stored per
//! iteration (`store_at`).

use super::*;

/// A tensor packed by a loop around the one being printed.
#[derive(Clone, Debug)]
pub(super) struct Packed {
    pub(super) tensor: Name,
    /// The buffer's C name.
    pub(super) buf: String,
    /// The block's first element in the tensor.
    pub(super) lo: Vec<Expr>,
    /// The block's dimensions in the buffer's order (those of extent 1 in a buffer per
    /// iteration left out).
    pub(super) order: Vec<usize>,
    /// The tensor's rank.
    pub(super) rank: usize,
    /// The buffer's first dimension in groups of this many elements, innermost (`pack`'s
    /// group); 1: none.
    pub(super) group: usize,
}

impl NestPrinter<'_> {
    /// A loop marked `pack`: each packed tensor's block copied into a buffer before it (row by
    /// row, within the tensor's edges; element by element where the layout reorders the block),
    /// the loop reading the buffer, the buffer freed after it.
    pub(super) fn packed_loop(
        &mut self,
        l: &Arc<Loop>,
        body: &[PlacedNode],
        panels: &[Panel],
        depth: usize,
    ) -> std::result::Result<(), String> {
        self.helpers.packs = true;
        let mut bufs: Vec<Packed> = Vec::new();
        self.line(depth, "{");
        for Panel { tensor: t, block: fp, layout, dims } in panels {
            let fp = fp.clone();
            let rank = fp.extent.len();
            let order = layout.order(rank);
            let tc = self.helpers.names.tensor(t).to_string();
            let buf = format!("teml_{tc}_pack");
            let ty = fp.dtype.c_name();
            let ext: Vec<String> = fp.extent.iter().map(|e| c_expr(e, self.helpers, false)).collect();
            if layout.group > 1 {
                let p = self.grouped_copy(l, t, &fp, layout, dims, depth + 1);
                bufs.push(p);
                continue;
            }
            // The buffer's extents: the block's, in the layout's order, the last rounded up.
            let mut shape: Vec<String> = order.iter().map(|d| ext[*d].clone()).collect();
            if layout.pad > 1 {
                let p = layout.pad;
                let last = fp.extent[order[rank - 1]].clone();
                shape[rank - 1] = match last.as_const() {
                    Some(n) => ((n + p as i64 - 1) / p as i64 * p as i64).to_string(),
                    None => format!("(({} + {}) / {p} * {p})", ext[order[rank - 1]], p - 1),
                };
            }
            let how =
                if layout.is_plain() { String::new() } else { format!(", laid out {}", layout.describe()) };
            self.open_panel(l, t, &fp, &shape, &how, depth + 1);
            // One loop per buffer dimension, up to the block's extent and the tensor's edge (a
            // strip-mined tail's block reaches past it); the last, a row copy where the block's
            // last dimension stays last.
            self.helpers.min = true;
            // The first element of each dimension the copy takes: the block's, or the tensor's
            // edge where the block may start before it (a backward loop strip-mined: the box
            // counts a block's full range, `-3*io` reaching -3 where `io` stops at 0).
            let outer: Vec<&Loop> = self.outer.iter().collect();
            let first: Vec<Option<String>> = fp
                .lo
                .iter()
                .map(|lo| {
                    let inside = match lo.as_const() {
                        Some(c) => c >= 0,
                        None => crate::analysis::legality::always_nonneg(&outer, lo) == Some(true),
                    };
                    (!inside).then(|| format!("teml_max(0, {})", c_expr(&lo.scale(-1), self.helpers, false)))
                })
                .collect();
            // Whether the last dimension's block starts inside the tensor at every point.
            let reaches = crate::analysis::legality::always_nonneg(
                &outer,
                &dims[rank - 1].add_int(-1).sub(&fp.lo[rank - 1]),
            ) == Some(true);
            if first.iter().any(Option::is_some) {
                self.helpers.max = true;
            }
            let keeps_rows = order[rank - 1] == rank - 1;
            let loops = if keeps_rows { rank - 1 } else { rank };
            let mut d2 = depth + 1;
            let mut src_idx: Vec<String> = vec![String::new(); rank];
            let mut idx: Vec<String> = Vec::new();
            for (k, d) in order.iter().enumerate().take(loops) {
                let p = format!("teml_p{k}");
                let edge = c_expr(&dims[*d].add_int(-1).sub(&fp.lo[*d]), self.helpers, false);
                let last = c_expr(&fp.extent[*d].add_int(-1), self.helpers, true);
                let from = first[*d].as_deref().unwrap_or("0");
                self.line(d2, &format!("for (int {p} = {from}; {p} <= teml_min({last}, {edge}); {p}++)"));
                idx.push(format!("[{p}]"));
                src_idx[*d] = format!("[{} + {p}]", c_expr(&fp.lo[*d], self.helpers, true));
                d2 += 1;
            }
            if keeps_rows {
                let lo_last = c_expr(&fp.lo[rank - 1], self.helpers, false);
                let edge = c_expr(&dims[rank - 1].sub(&fp.lo[rank - 1]), self.helpers, false);
                // A row that may start before the tensor (above) or lie past its end (a block
                // the loop's guarded statements never reach: an unrolled tail's) copies what
                // lies inside, if anything.
                if first[rank - 1].is_none() && reaches {
                    let dst = if rank == 1 { buf.clone() } else { format!("&{buf}{}[0]", idx.join("")) };
                    let src = format!("&{tc}{}[{lo_last}]", src_idx[..rank - 1].join(""));
                    self.line(
                        d2,
                        &format!("memcpy({dst}, {src}, sizeof({ty}) * teml_min({}, {edge}));", ext[rank - 1]),
                    );
                } else {
                    let from = first[rank - 1].as_deref().unwrap_or("0");
                    let dst = format!("&{buf}{}[teml_s]", idx.join(""));
                    let src = format!("&{tc}{}[{lo_last} + teml_s]", src_idx[..rank - 1].join(""));
                    self.line(
                        d2,
                        &format!(
                            "{{ int teml_s = {from}, teml_n = teml_min({}, {edge}) - teml_s; \
                             if (teml_n > 0) memcpy({dst}, {src}, sizeof({ty}) * teml_n); }}",
                            ext[rank - 1]
                        ),
                    );
                }
            } else {
                self.line(d2, &format!("{buf}{} = {tc}{};", idx.join(""), src_idx.join("")));
            }
            bufs.push(Packed { tensor: t.clone(), buf, lo: fp.lo, order, rank, group: 1 });
        }
        let n = bufs.len();
        self.packed.extend(bufs.iter().cloned());
        let mut inner = (**l).clone();
        inner.annot.pack.clear();
        inner.annot.pack_layout.clear();
        let r = self.part(l, inner, body, depth + 1);
        self.packed.truncate(self.packed.len() - n);
        r?;
        for p in &bufs {
            self.line(depth + 1, &format!("free({});", p.buf));
        }
        self.line(depth, "}");
        Ok(())
    }

    /// A packed block's buffer `teml_<T>_pack` of the extents `shape`: what it holds (`how` it
    /// is laid out), its allocation, and the message where memory runs out.
    fn open_panel(
        &mut self,
        l: &Loop,
        t: &Name,
        fp: &crate::analysis::packing::Footprint,
        shape: &[String],
        how: &str,
        depth: usize,
    ) {
        let tc = self.helpers.names.tensor(t).to_string();
        let (buf, ty) = (format!("teml_{tc}_pack"), fp.dtype.c_name());
        let ext: Vec<String> = fp.extent.iter().map(|e| c_expr(e, self.helpers, false)).collect();
        let from: String = fp.lo.iter().map(|e| format!("[{}]", c_expr(e, self.helpers, false))).collect();
        let iter = self.helpers.names.var(&l.iter).to_string();
        self.line(
            depth,
            &format!(
                "/* `{tc}` packed for loop `{iter}`: the {} block from {tc}{from}{how} */",
                ext.join(" x ")
            ),
        );
        let tail: String = shape[1..].iter().map(|e| format!("[{e}]")).collect();
        let decl = if shape.len() == 1 {
            format!("{ty} *restrict {buf}")
        } else {
            format!("{ty} (*restrict {buf}){tail}")
        };
        let bytes: String = shape.iter().map(|e| format!("[{e}]")).collect();
        self.line(depth, &format!("{decl} = malloc(sizeof({ty}{bytes}));"));
        self.line(
            depth,
            &format!("if (!{buf}) {{ fputs(\"teml: out of memory packing `{tc}`\\n\", stderr); abort(); }}"),
        );
    }

    /// A block packed in groups (`pack`'s group g): the buffer `[e0/g][e1]...[g]` (its first
    /// dimension rounded up to whole groups), each element copied from the tensor where the
    /// block and the tensor hold it and 0 elsewhere (the last group's missing products are
    /// zeros).
    fn grouped_copy(
        &mut self,
        l: &Loop,
        t: &Name,
        fp: &crate::analysis::packing::Footprint,
        layout: &crate::ir::PackLayout,
        dims: &[Expr],
        depth: usize,
    ) -> Packed {
        let g = layout.group;
        let rank = fp.extent.len();
        let order = layout.order(rank);
        let tc = self.helpers.names.tensor(t).to_string();
        let buf = format!("teml_{tc}_pack");
        let ext: Vec<String> = fp.extent.iter().map(|e| c_expr(e, self.helpers, false)).collect();
        let first = order[0];
        let groups = match fp.extent[first].as_const() {
            Some(n) => ((n + g as i64 - 1) / g as i64).to_string(),
            None => format!("(({} + {}) / {g})", ext[first], g - 1),
        };
        let mut shape: Vec<String> = vec![groups];
        shape.extend(order[1..].iter().map(|d| ext[*d].clone()));
        shape.push(g.to_string());
        let how = format!(", in groups of {g} along its first dimension (zeros past its end)");
        self.open_panel(l, t, fp, &shape, &how, depth);
        self.helpers.min = true;
        let mut d2 = depth;
        let mut idx = Vec::new();
        let mut src: Vec<String> = vec![String::new(); rank];
        let mut inside: Vec<String> = Vec::new();
        for (k, d) in order.iter().enumerate() {
            let p = format!("teml_p{k}");
            let n = if k == 0 { shape[0].clone() } else { ext[*d].clone() };
            self.line(d2, &format!("for (int {p} = 0; {p} < {n}; {p}++)"));
            d2 += 1;
            idx.push(format!("[{p}]"));
            let at = if k == 0 { format!("{g}*{p} + teml_q") } else { p.clone() };
            let lo = c_expr(&fp.lo[*d], self.helpers, true);
            // Within the block and within the tensor (a block may reach past its edge).
            let last = c_expr(&fp.extent[*d].add_int(-1), self.helpers, true);
            let edge = c_expr(&dims[*d].add_int(-1).sub(&fp.lo[*d]), self.helpers, false);
            inside.push(format!("{at} <= teml_min({last}, {edge})"));
            if fp.lo[*d].as_const().is_none_or(|c| c < 0) {
                inside.push(format!("{lo} + {at} >= 0"));
            }
            src[*d] = format!("[{lo} + {at}]");
        }
        self.line(d2, &format!("for (int teml_q = 0; teml_q < {g}; teml_q++)"));
        self.line(
            d2 + 1,
            &format!("{buf}{}[teml_q] = {} ? {tc}{} : 0;", idx.join(""), inside.join(" && "), src.join("")),
        );
        Packed { tensor: t.clone(), buf, lo: fp.lo.clone(), order, rank, group: g }
    }

    /// The buffers of the tensors loop `l` stores per iteration (`store_at`, their `blocks`
    /// planned): their declarations, at the start of its body, and how accesses find them.
    pub(super) fn locals(
        &mut self,
        l: &Loop,
        blocks: Vec<(Name, crate::analysis::packing::Footprint)>,
    ) -> Vec<(String, Packed)> {
        let mut out = Vec::new();
        for (t, fp) in blocks {
            let t = &t;
            let tc = self.helpers.names.tensor(t).to_string();
            let buf = format!("teml_{tc}_local");
            let ext: Vec<String> = fp.extent.iter().map(|e| c_expr(e, self.helpers, false)).collect();
            let from: String =
                fp.lo.iter().map(|e| format!("[{}]", c_expr(e, self.helpers, false))).collect();
            // The block's dimensions in the order `store_at` asked for; one the iteration fixes
            // (extent 1) is left out of the buffer.
            let layout: Vec<usize> =
                l.annot.store_layout.get(t).cloned().unwrap_or_else(|| (0..fp.extent.len()).collect());
            let order: Vec<usize> =
                layout.into_iter().filter(|d| fp.extent[*d].as_const() != Some(1)).collect();
            let dims: String = order.iter().map(|d| format!("[{}]", ext[*d])).collect();
            let who = if self.auto.contains(t) {
                " (by code generation: no iteration reads what another wrote)"
            } else {
                ""
            };
            let decl = format!(
                "{} {buf}{dims} __attribute__((aligned(64)));  /* `{tc}` stored per iteration of `{}`{who}: the {} block from {tc}{from} */",
                fp.dtype.c_name(),
                self.helpers.names.var(&l.iter),
                ext.join(" x ")
            );
            let rank = fp.extent.len();
            out.push((decl, Packed { tensor: t.clone(), buf, lo: fp.lo, order, rank, group: 1 }));
        }
        out
    }
}
