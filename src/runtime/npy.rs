//! Reading and writing NumPy `.npy` files: little-endian float64 (`<f8`) and float32 (`<f4`)
//! arrays in C order, the data of `init` statements and of saved kernel outputs.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use npyz::{DType, NpyFile, Order, TypeChar, TypeStr, WriteOptions, WriterBuilder};

use super::RuntimeError;

/// The elements of an array.
#[derive(Clone, Debug, PartialEq)]
pub enum NpyData {
    /// `<f8` elements.
    F64(Vec<f64>),
    /// `<f4` elements.
    F32(Vec<f32>),
}

impl NpyData {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            NpyData::F64(v) => v.len(),
            NpyData::F32(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements as float64 (float32 elements are widened exactly).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            NpyData::F64(v) => v.clone(),
            NpyData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
        }
    }

    /// The elements as float32 (float64 elements are rounded to nearest).
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            NpyData::F64(v) => v.iter().map(|&x| x as f32).collect(),
            NpyData::F32(v) => v.clone(),
        }
    }
}

/// An array read from a `.npy` file.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// The extents, outermost first (empty for a 0-d array).
    pub shape: Vec<u64>,
    /// The elements in C (row-major) order.
    pub data: NpyData,
}

/// The dtypes this module reads and writes.
const EXPECTED: &str = "dtype <f8 (little-endian float64) or <f4 (little-endian float32)";

fn npy_error(path: &Path, message: impl Into<String>) -> RuntimeError {
    RuntimeError::Npy { path: path.to_path_buf(), message: message.into() }
}

/// Reads a C-order `<f8` or `<f4` array from `path`. Any other dtype (an integer, a
/// big-endian float, a structured dtype), Fortran order, a missing file or truncated data is an
/// error naming the path, what was expected and what was found.
pub fn read_npy(path: impl AsRef<Path>) -> Result<NpyArray, RuntimeError> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|e| npy_error(path, format!("cannot open the .npy file: {e}")))?;
    let npy = NpyFile::new(BufReader::new(file))
        .map_err(|e| npy_error(path, format!("expected a .npy file, found an unreadable header: {e}")))?;
    if npy.order() == Order::Fortran {
        return Err(npy_error(path, "expected C order (fortran_order: False), found Fortran order"));
    }
    let shape = npy.shape().to_vec();
    let ty = match npy.dtype() {
        DType::Plain(ty) => ty,
        _ => return Err(npy_error(path, format!("expected {EXPECTED}, found a structured dtype"))),
    };
    let corrupt = |e: std::io::Error| npy_error(path, format!("cannot read the {ty} data: {e}"));
    let data = match ty.to_string().as_str() {
        "<f8" => NpyData::F64(npy.into_vec::<f64>().map_err(corrupt)?),
        "<f4" => NpyData::F32(npy.into_vec::<f32>().map_err(corrupt)?),
        other => return Err(npy_error(path, format!("expected {EXPECTED}, found {other}{}", describe(&ty)))),
    };
    Ok(NpyArray { shape, data })
}

/// ` (int64)` and the like: the NumPy name of a type string, where it has a simple one.
fn describe(ty: &TypeStr) -> String {
    let bits = ty.size_field() * 8;
    let name = match ty.type_char() {
        TypeChar::Bool => "bool".to_string(),
        TypeChar::Int => format!("int{bits}"),
        TypeChar::Uint => format!("uint{bits}"),
        TypeChar::Float => format!("float{bits}"),
        TypeChar::Complex => format!("complex{bits}"),
        _ => return String::new(),
    };
    let endian = if ty.to_string().starts_with('>') { "big-endian " } else { "" };
    format!(" ({endian}{name})")
}

/// Writes `data` as a C-order `<f8` array of `shape` to `path`.
pub fn write_npy_f64(path: impl AsRef<Path>, shape: &[u64], data: &[f64]) -> Result<(), RuntimeError> {
    write_npy(path.as_ref(), shape, data, "<f8")
}

/// Writes `data` as a C-order `<f4` array of `shape` to `path`.
pub fn write_npy_f32(path: impl AsRef<Path>, shape: &[u64], data: &[f32]) -> Result<(), RuntimeError> {
    write_npy(path.as_ref(), shape, data, "<f4")
}

fn write_npy<T: npyz::Serialize + Copy>(
    path: &Path,
    shape: &[u64],
    data: &[T],
    descr: &str,
) -> Result<(), RuntimeError> {
    let count = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
    if count != Some(data.len() as u64) {
        let needed = count.map_or_else(|| "more than 2^64".to_string(), |n| n.to_string());
        return Err(npy_error(
            path,
            format!("cannot write: expected {needed} elements for shape {shape:?}, found {}", data.len()),
        ));
    }
    let ty: TypeStr = descr.parse().map_err(|e| npy_error(path, format!("bad dtype {descr}: {e}")))?;
    let fail = |e: std::io::Error| npy_error(path, format!("cannot write the .npy file: {e}"));
    let file = File::create(path).map_err(fail)?;
    let mut writer = WriteOptions::<T>::new()
        .dtype(DType::Plain(ty))
        .shape(shape)
        .writer(BufWriter::new(file))
        .begin_nd()
        .map_err(fail)?;
    writer.extend(data.iter().copied()).map_err(fail)?;
    writer.finish().map_err(fail)
}
