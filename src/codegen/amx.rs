//! AMX tiles (`amx`): a reduction loop's whole block of the result summed in tile registers,
//! printed before the loop's `dot` form as `#if TEML_AMX_<kind> if (tiles ready && block whole)
//! { tiles } else #endif { groups }`: where the compiler does not target the tiles, the Linux
//! kernel refuses their state, or the block is partial, the groups run.

use super::*;
use crate::analysis::amx::{self, TILE};
use crate::ir::TExpr;

impl NestPrinter<'_> {
    /// The tile form of loop `l` (marked `amx`, in groups of `l.annot.dot`): its opening `#if`,
    /// the `if (..) { .. } else` the groups' block completes, and the `#endif` before it.
    pub(super) fn amx_block(&mut self, l: &Arc<Loop>, depth: usize) -> std::result::Result<(), String> {
        let g = l.annot.dot;
        let k = l.iter.clone();
        let s = amx::shape(l).map_err(|why| format!("amx: loop `{k}` is not a block of tiles: {why}"))?;
        let (a, b) = (s.a.dtype, s.b.dtype);
        let (insn, _) =
            amx::instruction(a, b).ok_or_else(|| format!("amx: {a} x {b} has no tile product"))?;
        let kind = if a == crate::ir::DType::Bf16 { "BF16" } else { "INT8" };
        let kt = TILE * g as i64;
        if s.target.id().is_some_and(|t| self.bands.iter().any(|b| b.tensors.contains(t))) {
            return Err(format!(
                "amx: {} is kept in registers around `{k}`: its block is the tiles' (leave `registers` out)",
                s.target.access()
            ));
        }
        // B's columns: the tile load reads 16 of them, a group each, from every group-row.
        let Some(p) = self.grouped(&s.b, g) else {
            return Err(format!(
                "amx: {} must be read from a buffer packed in groups of {g} (`pack(l, r, {}, order, pad, {g})` \
                 outside `{k}`): the layout a tile load of its columns reads",
                s.b.access(),
                s.b.id().map(|t| t.to_string()).unwrap_or_default()
            ));
        };
        self.group_start(&p, &l.lb, &k, g)?;
        self.tile_rows(&s.b, &s.cols.iter, Some(&p))?;
        self.tile_rows(&s.a, &k, None)?;
        self.tile_rows(&s.target, &s.cols.iter, None)?;
        let (nc, na, nb) = s.tiles();
        let cols = (s.col_trip / TILE) as usize;
        let c = |r: usize, q: usize| r * cols + q;
        let (ta, tb) = (nc, nc + na);
        // The block's elements at its tiles' corners.
        let at = |x: &TExpr, r: i64, q: i64| {
            x.subst_iters(&|v| {
                if v == &*s.rows.iter {
                    Some(s.rows.lb.add_int(r))
                } else if v == &*s.cols.iter {
                    Some(s.cols.lb.add_int(q))
                } else {
                    None
                }
            })
        };
        let kv = self.helpers.names.var(&k).to_string();
        let lb = c_expr(&l.lb, self.helpers, true);
        let ub = c_expr(&l.ub, self.helpers, true);
        let mut whole = vec!["teml_amx_ready()".to_string()];
        for x in [&*s.rows, &*s.cols] {
            for (e, u) in crate::analysis::vector::block(x).map(|b| b.full_when).unwrap_or_default() {
                whole.push(format!(
                    "{} <= {}",
                    c_expr(&e, self.helpers, true),
                    c_expr(&u, self.helpers, true)
                ));
            }
        }
        match crate::analysis::vector::constant_trip(l) {
            Some(n) if n % kt == 0 => {}
            Some(n) => {
                let why =
                    format!("/* `{kv}` runs {n} iterations, not a multiple of a tile's {kt}: no tiles */");
                self.line(depth, &why);
                return Ok(());
            }
            None => whole.push(format!("({ub} - {lb} + 1) % {kt} == 0")),
        }
        self.helpers.amx.insert(kind);
        let names = |x: &TExpr| x.id().map(|t| self.helpers.names.tensor(t).to_string()).unwrap_or_default();
        let (tc, tn, bn) = (names(&s.target), names(&s.a), names(&s.b));
        self.line(0, &format!("#ifdef TEML_AMX_{kind}"));
        self.line(
            depth,
            &format!(
                "if ({})  /* {tc}'s {} x {} block in {nc} AMX tiles across `{kv}`: {insn} every {kt} iterations */",
                whole.join(" && "),
                s.row_trip,
                s.col_trip
            ),
        );
        self.line(depth, "{");
        let d = depth + 1;
        // Bytes from a tile's row to the next: the result's and A's rows, B's group-rows.
        let next = |x: &TExpr, v: &Name, by: i64| {
            x.subst_iters(&|w| (w == &**v).then(|| Expr::var_name(v).add_int(by)))
        };
        // (At the loop's first iteration: the strides are computed before it.)
        let first = |x: &TExpr| x.subst_iters(&|w| (w == &*k).then(|| l.lb.clone()));
        let c0 = self.c_leaf(&at(&s.target, 0, 0));
        let c1 = self.c_leaf(&at(&next(&s.target, &s.rows.iter, 1), 0, 0));
        let a0 = self.c_leaf(&first(&at(&s.a, 0, 0)));
        let a1 = self.c_leaf(&first(&at(&next(&s.a, &s.rows.iter, 1), 0, 0)));
        let b0 = self.tile_b(&p, &first(&at(&s.b, 0, 0)));
        let b1 = self.tile_b(&p, &first(&at(&next(&s.b, &k, g as i64), 0, 0)));
        let stride = |x: &str, y: &str| format!("(long)((const char *)&{y} - (const char *)&{x})");
        self.line(
            d,
            &format!(
                "const long teml_rows_{tc} = {};  /* bytes from a row of {tc} to the next */",
                stride(&c0, &c1)
            ),
        );
        self.line(d, &format!("const long teml_rows_{tn} = {};", stride(&a0, &a1)));
        self.line(
            d,
            &format!(
                "const long teml_rows_{bn} = {};  /* from a group of {g} rows of {bn} to the next */",
                stride(&b0, &b1)
            ),
        );
        let mut tiles_c = Vec::new();
        for r in 0..(s.row_trip / TILE) {
            for q in 0..(s.col_trip / TILE) {
                let e = self.c_leaf(&at(&s.target, r * TILE, q * TILE));
                tiles_c.push((c(r as usize, q as usize), e));
            }
        }
        for (t, e) in &tiles_c {
            self.line(d, &format!("_tile_loadd({t}, &{e}, teml_rows_{tc});"));
        }
        self.line(d, &format!("for (int {kv} = {lb}; {kv} <= {ub}; {kv} += {kt})"));
        self.line(d, "{");
        for r in 0..na {
            let e = self.c_leaf(&at(&s.a, r as i64 * TILE, 0));
            self.line(d + 1, &format!("_tile_loadd({}, &{e}, teml_rows_{tn});", ta + r));
        }
        for q in 0..nb {
            let e = self.tile_b(&p, &at(&s.b, 0, q as i64 * TILE));
            self.line(d + 1, &format!("_tile_loadd({}, &{e}, teml_rows_{bn});", tb + q));
        }
        for r in 0..na {
            for q in 0..nb {
                self.line(d + 1, &format!("{insn}({}, {}, {});", c(r, q), ta + r, tb + q));
            }
        }
        self.line(d, "}");
        for (t, e) in &tiles_c {
            self.line(d, &format!("_tile_stored({t}, &{e}, teml_rows_{tc});"));
        }
        self.line(d, "_tile_release();");
        self.line(depth, "}");
        self.line(depth, "else");
        self.line(0, "#endif");
        Ok(())
    }

    /// The first element of a group of B in its buffer in groups.
    fn tile_b(&mut self, p: &Packed, leaf: &TExpr) -> String {
        self.packed_leaf(p, leaf.index_list().unwrap_or(&[]), true)
    }

    /// Checks that a tile load can read `leaf`'s rows: 16 consecutive values of `v` adjacent
    /// (in the buffer in groups `p`: 16 groups adjacent).
    fn tile_rows(&self, leaf: &TExpr, v: &Name, p: Option<&Packed>) -> std::result::Result<(), String> {
        let index = leaf.index_list().unwrap_or(&[]);
        let unit = |d: usize| index.get(d).is_some_and(|x| x.is_affine() && x.coeff(v) == 1);
        let only = |d: usize| index.iter().enumerate().all(|(e, x)| e == d || !x.mentions(v));
        let packed = p
            .cloned()
            .or_else(|| leaf.id().and_then(|t| self.packed.iter().rev().find(|q| &q.tensor == t).cloned()));
        let ok = match packed {
            Some(p) => {
                p.order.last().is_some_and(|&d| unit(d) && only(d)) && (p.group <= 1 || p.order.len() > 1)
            }
            None => crate::analysis::vector::lane_access(leaf, v, false, &self.lane_layouts()) == Ok(true),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "amx: {} is not contiguous in `{v}`: a tile load reads 64 adjacent bytes of each of its rows",
                leaf.access()
            ))
        }
    }
}

/// The prelude of a kernel with tile products of `kinds` ("BF16", "INT8"): where the compiler
/// targets them (`__AMX_TILE__` and `__AMX_BF16__` / `__AMX_INT8__`), `TEML_AMX_<kind>` and
/// `teml_amx_ready()`, which asks Linux for the tiles' state once per process and loads their
/// configuration for each block. With `model` (`TEML_AMX_MODEL=1` at generation) the tile
/// instructions are C functions instead, on any host.
pub(super) fn prelude(kinds: &std::collections::BTreeSet<&'static str>, model: bool) -> String {
    if kinds.is_empty() {
        return String::new();
    }
    if model {
        return MODEL.to_string();
    }
    let mut s = String::from(
        "/* AMX tiles (`amx`): where the compiler targets them (-march with amx-tile and the product's extension). */\n",
    );
    for k in kinds {
        s.push_str(&format!(
            "#if defined(__x86_64__) && defined(__linux__) && defined(__AMX_TILE__) && defined(__AMX_{k}__)\n#define TEML_AMX_{k} 1\n#endif\n"
        ));
    }
    let any: Vec<String> = kinds.iter().map(|k| format!("defined(TEML_AMX_{k})")).collect();
    s.push_str(&format!("#if {}\n", any.join(" || ")));
    s.push_str(READY);
    s.push_str("#endif\n\n");
    s
}

/// The tiles' state and configuration (Intel SDM vol. 1, 18.2; Linux's Documentation/arch/x86/xstate.rst).
const READY: &str = "#include <immintrin.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Linux gives a process the tiles' 8 KiB of state only when asked: ARCH_REQ_XCOMP_PERM (0x1023)
   for XFEATURE_XTILEDATA (18), once, when a block first wants the tiles. Where it refuses, no
   block runs in tiles. Each block loads the configuration (every tile 16 rows of 64 bytes,
   palette 1) and releases the tiles after its stores, so that no other code's tiles on the
   thread are assumed, and none stay live after the kernel. */
static int teml_amx_allowed;  /* 0: not asked yet; 1: given; -1: refused */
static inline int teml_amx_ready(void)
{
  int allowed = __atomic_load_n(&teml_amx_allowed, __ATOMIC_RELAXED);
  if (allowed == 0) {
    allowed = syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? 1 : -1;
    __atomic_store_n(&teml_amx_allowed, allowed, __ATOMIC_RELAXED);
  }
  if (allowed != 1)
    return 0;
  struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg = { 1 };
  for (int t = 0; t < 8; t++) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  return 1;
}
";

/// The tile instructions as C (`TEML_AMX_MODEL=1`), after Intel's pseudo-code (SDM vol. 2,
/// TILELOADD, TILESTORED, TDPBF16PS, TDPBUSD and its sign variants): the tile form's data
/// movement checked on any host.
const MODEL: &str = "/* TEML_AMX_MODEL=1: the tile instructions are the C functions below, after Intel's pseudo-code
   (SDM vol. 2: TILELOADD, TILESTORED, TDPBF16PS, TDPB[SU][SU]D), so that the tile form runs and is
   verified on any host. For testing teml's tile form: far slower than the instructions. */
#include <stdint.h>
#include <string.h>
#define TEML_AMX_BF16 1
#define TEML_AMX_INT8 1
static __thread unsigned char teml_tiles[8][16][64];
static inline int teml_amx_ready(void) { return 1; }
static void teml_tile_load(int t, const void *p, long stride)
{
  for (int r = 0; r < 16; r++)
    memcpy(teml_tiles[t][r], (const char *)p + r * stride, 64);
}
static void teml_tile_store(int t, void *p, long stride)
{
  for (int r = 0; r < 16; r++)
    memcpy((char *)p + r * stride, teml_tiles[t][r], 64);
}
static float teml_tile_bf16(const unsigned char *b)
{
  uint32_t u = (uint32_t)(b[0] | b[1] << 8) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void teml_tile_dpbf16ps(int c, int a, int b)
{
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < 16; n++) {
      float acc;
      memcpy(&acc, &teml_tiles[c][m][4 * n], 4);
      for (int k = 0; k < 16; k++)
        for (int e = 0; e < 2; e++)
          acc += teml_tile_bf16(&teml_tiles[a][m][4 * k + 2 * e]) * teml_tile_bf16(&teml_tiles[b][k][4 * n + 2 * e]);
      memcpy(&teml_tiles[c][m][4 * n], &acc, 4);
    }
}
static void teml_tile_dpb(int c, int a, int b, int a_signed, int b_signed)
{
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < 16; n++) {
      uint32_t acc;
      memcpy(&acc, &teml_tiles[c][m][4 * n], 4);
      for (int k = 0; k < 16; k++)
        for (int e = 0; e < 4; e++) {
          unsigned char x = teml_tiles[a][m][4 * k + e], y = teml_tiles[b][k][4 * n + e];
          int32_t xv = a_signed ? (int32_t)(int8_t)x : (int32_t)x, yv = b_signed ? (int32_t)(int8_t)y : (int32_t)y;
          acc += (uint32_t)(xv * yv);
        }
      memcpy(&teml_tiles[c][m][4 * n], &acc, 4);
    }
}
#undef _tile_release
#undef _tile_loadd
#undef _tile_stored
#undef _tile_dpbf16ps
#undef _tile_dpbusd
#undef _tile_dpbsud
#undef _tile_dpbssd
#undef _tile_dpbuud
#define _tile_release() ((void)0)
#define _tile_loadd(t, p, s) teml_tile_load(t, p, s)
#define _tile_stored(t, p, s) teml_tile_store(t, p, s)
#define _tile_dpbf16ps(c, a, b) teml_tile_dpbf16ps(c, a, b)
#define _tile_dpbusd(c, a, b) teml_tile_dpb(c, a, b, 0, 1)
#define _tile_dpbsud(c, a, b) teml_tile_dpb(c, a, b, 1, 0)
#define _tile_dpbssd(c, a, b) teml_tile_dpb(c, a, b, 1, 1)
#define _tile_dpbuud(c, a, b) teml_tile_dpb(c, a, b, 0, 0)

";

/// Whether `TEML_AMX_MODEL=1` asks for the tile instructions as C.
pub(super) fn model() -> bool {
    std::env::var("TEML_AMX_MODEL").is_ok_and(|v| v == "1")
}
