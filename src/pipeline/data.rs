//! The data a kernel starts from and leaves: the `-i` files, `init` statements or the seeded
//! fill (cropped to the leading block at a reduced size), the bytes of the shared mapping, and
//! `-o` files.

use super::options::{RunError, RunOptions};
use crate::interp::{self, Buffers, Tensor};
use crate::ir::{DType, Init, Name, Nest, State};
use crate::runtime;

pub use crate::interp::{random_data, random_positive_data, splitmix};

/// Initial data of a tensor: `-i` file, else its `init` statement, else seeded random values.
pub fn initial_data(
    state: &State,
    opts: &RunOptions,
    name: &Name,
    dtype: DType,
    dims: &[usize],
) -> Result<Vec<f64>, RunError> {
    initial_data_cropped(state, opts, name, dtype, dims, false, positive(state, &[]))
}

/// Whether the program's seeded data is positive: some statement of its kernels, or of
/// `nests`, computes a `sqrt`, `log` or `pow`, or divides ([`interp::needs_positive_data`]);
/// else it is of both signs. One answer per program, so that every kernel of a program starts
/// from the same data.
fn positive(state: &State, nests: &[Nest]) -> bool {
    let stmts: Vec<crate::ir::TExpr> = state
        .kernels
        .iter()
        .flat_map(|k| k.nests.iter())
        .chain(nests)
        .flat_map(|n| n.stmts().into_iter().chain(n.origin.iter().cloned()))
        .collect();
    interp::needs_positive_data(&stmts)
}

/// [`initial_data`]; with `crop`, data from a file larger than `dims` gives its leading block
/// (element `[i][j]` of the smaller tensor is `[i][j]` of the file's), which is how a program
/// verified at a reduced size reads the inputs given for the full size.
fn initial_data_cropped(
    state: &State,
    opts: &RunOptions,
    name: &Name,
    dtype: DType,
    dims: &[usize],
    crop: bool,
    positive: bool,
) -> Result<Vec<f64>, RunError> {
    let n: usize = dims.iter().product();
    let from_file = |path: &std::path::Path| -> Result<Vec<f64>, RunError> {
        let a = runtime::npy::read_npy(path)?;
        let shape: Vec<usize> = a.shape.iter().map(|&d| d as usize).collect();
        let found = a.data.dtype();
        // A double file for a float tensor is rounded (as before the other types): any other
        // pair of types is refused, so that no data is silently narrowed or reinterpreted.
        if found != dtype && !(found == DType::Double && dtype == DType::Float) {
            return Err(RunError::Data(format!(
                "{}: expected dtype {} ({}) for tensor `{name}`, declared {dtype}, found {} ({})",
                path.display(),
                runtime::npy::descr(dtype),
                runtime::npy::numpy_name(dtype),
                runtime::npy::descr(found),
                runtime::npy::numpy_name(found),
            )));
        }
        let fits = crop && shape.len() == dims.len() && shape.iter().zip(dims).all(|(f, d)| f >= d);
        if shape != dims && !fits {
            return Err(RunError::Data(format!(
                "{}: expected shape {dims:?} for tensor `{name}`, found {shape:?}",
                path.display()
            )));
        }
        let mut v = a.data.to_f64();
        if shape != dims {
            v = leading_block(&v, &shape, dims);
        }
        Ok(v.into_iter().map(|x| dtype.round(x)).collect())
    };
    if let Some(p) = opts.inputs.get(name) {
        return from_file(p);
    }
    match state.inits.get(name) {
        Some(Init::Value(x)) => Ok(vec![dtype.round(*x); n]),
        Some(Init::Npy(p)) => from_file(std::path::Path::new(p)),
        Some(Init::Random) | None if positive => Ok(random_positive_data(opts.seed, name, n, dtype)),
        Some(Init::Random) | None => Ok(random_data(opts.seed, name, n, dtype)),
    }
}

/// The leading `dims` block of a row-major array of shape `shape` (every `dims[d] <= shape[d]`).
fn leading_block(data: &[f64], shape: &[usize], dims: &[usize]) -> Vec<f64> {
    let n: usize = dims.iter().product();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        let off = idx.iter().zip(shape).fold(0usize, |acc, (i, s)| acc * s + i);
        out.push(data[off]);
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            if idx[d] < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Writes `t`'s elements into `dst` in the kernel's layout (its element type, native order).
pub(super) fn write_bytes(t: &Tensor, dst: &mut [u8]) {
    let size = t.dtype.size();
    for (c, &x) in dst.chunks_exact_mut(size).zip(&t.data) {
        encode(x, t.dtype, c);
    }
}

/// `x` (a value of `dtype`) as `dtype`'s bytes, in native order, into `c` (its size).
fn encode(x: f64, dtype: DType, c: &mut [u8]) {
    match dtype {
        DType::Double => c.copy_from_slice(&x.to_ne_bytes()),
        DType::Float => c.copy_from_slice(&(x as f32).to_ne_bytes()),
        DType::Bf16 => c.copy_from_slice(&half::bf16::from_f64(x).to_bits().to_ne_bytes()),
        DType::F16 => c.copy_from_slice(&half::f16::from_f64(x).to_bits().to_ne_bytes()),
        DType::I32 => c.copy_from_slice(&(dtype.round(x) as i32).to_ne_bytes()),
        DType::I8 => c.copy_from_slice(&(dtype.round(x) as i8).to_ne_bytes()),
        DType::U8 => c.copy_from_slice(&(dtype.round(x) as u8).to_ne_bytes()),
    }
}

/// The value of one element's bytes `c` (`dtype`'s size, native order).
fn decode(c: &[u8], dtype: DType) -> f64 {
    let two = || u16::from_ne_bytes([c[0], c[1]]);
    match dtype {
        DType::Double => f64::from_ne_bytes(c.try_into().unwrap_or([0; 8])),
        DType::Float => f32::from_ne_bytes(c.try_into().unwrap_or([0; 4])) as f64,
        DType::Bf16 => half::bf16::from_bits(two()).to_f64(),
        DType::F16 => half::f16::from_bits(two()).to_f64(),
        DType::I32 => i32::from_ne_bytes(c.try_into().unwrap_or([0; 4])) as f64,
        DType::I8 => c[0] as i8 as f64,
        DType::U8 => c[0] as f64,
    }
}

/// The values of a buffer's bytes, one at a time (no copy of the whole buffer).
pub(super) fn values(b: &[u8], dtype: DType) -> impl Iterator<Item = f64> + '_ {
    b.chunks_exact(dtype.size()).map(move |c| decode(c, dtype))
}

pub(super) fn from_bytes(b: &[u8], dtype: DType) -> Vec<f64> {
    values(b, dtype).collect()
}

/// The initial data of every tensor the nests use: the `-i` files, `init` statements, else the
/// seeded fill (each kernel starts from its own copy).
pub fn initial_store(state: &State, nests: &[Nest], opts: &RunOptions) -> Result<Buffers, RunError> {
    initial_store_cropped(state, nests, opts, false)
}

pub(super) fn initial_store_cropped(
    state: &State,
    nests: &[Nest],
    opts: &RunOptions,
    crop: bool,
) -> Result<Buffers, RunError> {
    let mut err = None;
    let positive = positive(state, nests);
    let store = interp::buffers_for(state, nests, &mut |name, dtype, dims| {
        initial_data_cropped(state, opts, name, dtype, dims, crop, positive).unwrap_or_else(|e| {
            err.get_or_insert(e);
            Vec::new()
        })
    })
    .map_err(RunError::Data)?;
    match err {
        Some(e) => Err(e),
        None => Ok(store),
    }
}

/// Writes tensor `name` of `store` as `.npy` (in its element type).
pub fn save_npy(store: &Buffers, name: &str, path: &std::path::Path) -> Result<(), RunError> {
    let t = store
        .get(name)
        .ok_or_else(|| RunError::Data(format!("-o {name}: no tensor `{name}` was computed or used")))?;
    let shape: Vec<u64> = t.dims.iter().map(|&d| d as u64).collect();
    runtime::npy::write_npy_as(path, &shape, &t.data, t.dtype)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_blocks_crop_row_major_arrays() {
        let data: Vec<f64> = (0..12).map(f64::from).collect();
        assert_eq!(leading_block(&data, &[3, 4], &[2, 3]), vec![0.0, 1.0, 2.0, 4.0, 5.0, 6.0]);
    }
}
