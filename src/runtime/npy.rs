//! Reading and writing NumPy `.npy` files in C order, the data of `init` statements, `-i` and
//! `-o`: one dtype per element type (docs/types.md): `<f8` double, `<f4` float, `<f2` f16,
//! `<i4` i32, `|i1` i8, `|u1` u8, and `<u2` for bf16, which NumPy has no type for: each
//! element is the bfloat16's 16-bit pattern (the high half of the float32 of the same value;
//! `ml_dtypes.bfloat16` and PyTorch's `torch.bfloat16` views of it).

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
    /// `<f2` elements.
    F16(Vec<half::f16>),
    /// `<u2` elements: bfloat16 patterns.
    Bf16(Vec<u16>),
    /// `<i4` elements.
    I32(Vec<i32>),
    /// `|i1` elements.
    I8(Vec<i8>),
    /// `|u1` elements.
    U8(Vec<u8>),
}

impl NpyData {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            NpyData::F64(v) => v.len(),
            NpyData::F32(v) => v.len(),
            NpyData::F16(v) => v.len(),
            NpyData::Bf16(v) => v.len(),
            NpyData::I32(v) => v.len(),
            NpyData::I8(v) => v.len(),
            NpyData::U8(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type these elements are of.
    pub fn dtype(&self) -> crate::ir::DType {
        use crate::ir::DType as T;
        match self {
            NpyData::F64(_) => T::Double,
            NpyData::F32(_) => T::Float,
            NpyData::F16(_) => T::F16,
            NpyData::Bf16(_) => T::Bf16,
            NpyData::I32(_) => T::I32,
            NpyData::I8(_) => T::I8,
            NpyData::U8(_) => T::U8,
        }
    }

    /// The elements as float64 (every element type widens exactly).
    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            NpyData::F64(v) => v.clone(),
            NpyData::F32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            NpyData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            NpyData::Bf16(v) => v.iter().map(|&x| half::bf16::from_bits(x).to_f64()).collect(),
            NpyData::I32(v) => v.iter().map(|&x| f64::from(x)).collect(),
            NpyData::I8(v) => v.iter().map(|&x| f64::from(x)).collect(),
            NpyData::U8(v) => v.iter().map(|&x| f64::from(x)).collect(),
        }
    }

    /// The elements as float32 (float64 elements are rounded to nearest).
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            NpyData::F32(v) => v.clone(),
            other => other.to_f64().into_iter().map(|x| x as f32).collect(),
        }
    }

    /// `values` (each representable in `dtype`: [`crate::ir::DType::round`]) as elements of
    /// `dtype`.
    pub fn of(values: &[f64], dtype: crate::ir::DType) -> NpyData {
        use crate::ir::DType as T;
        match dtype {
            T::Double => NpyData::F64(values.to_vec()),
            T::Float => NpyData::F32(values.iter().map(|&x| x as f32).collect()),
            T::F16 => NpyData::F16(values.iter().map(|&x| half::f16::from_f64(x)).collect()),
            T::Bf16 => NpyData::Bf16(values.iter().map(|&x| half::bf16::from_f64(x).to_bits()).collect()),
            T::I32 => NpyData::I32(values.iter().map(|&x| dtype.round(x) as i32).collect()),
            T::I8 => NpyData::I8(values.iter().map(|&x| dtype.round(x) as i8).collect()),
            T::U8 => NpyData::U8(values.iter().map(|&x| dtype.round(x) as u8).collect()),
        }
    }
}

/// The `.npy` dtype string of an element type (`<u2` for bf16's patterns).
pub fn descr(dtype: crate::ir::DType) -> &'static str {
    use crate::ir::DType as T;
    match dtype {
        T::Double => "<f8",
        T::Float => "<f4",
        T::F16 => "<f2",
        T::Bf16 => "<u2",
        T::I32 => "<i4",
        T::I8 => "|i1",
        T::U8 => "|u1",
    }
}

/// The NumPy name of an element type's `.npy` dtype (`float64`, `uint16 (bf16 patterns)`).
pub fn numpy_name(dtype: crate::ir::DType) -> &'static str {
    use crate::ir::DType as T;
    match dtype {
        T::Double => "float64",
        T::Float => "float32",
        T::F16 => "float16",
        T::Bf16 => "uint16 (bf16 patterns)",
        T::I32 => "int32",
        T::I8 => "int8",
        T::U8 => "uint8",
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
const EXPECTED: &str = "dtype <f8 (float64), <f4 (float32), <f2 (float16), <u2 (bf16 patterns), <i4 (int32), \
                        |i1 (int8) or |u1 (uint8), little-endian";

fn npy_error(path: &Path, message: impl Into<String>) -> RuntimeError {
    RuntimeError::Npy { path: path.to_path_buf(), message: message.into() }
}

/// Reads a C-order array of one of the dtypes of [`descr`] from `path`. Any other dtype (an
/// int64, a big-endian float, a structured dtype), Fortran order, a missing file or truncated data is an
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
        "<f2" => NpyData::F16(npy.into_vec::<half::f16>().map_err(corrupt)?),
        "<u2" => NpyData::Bf16(npy.into_vec::<u16>().map_err(corrupt)?),
        "<i4" => NpyData::I32(npy.into_vec::<i32>().map_err(corrupt)?),
        "|i1" => NpyData::I8(npy.into_vec::<i8>().map_err(corrupt)?),
        "|u1" => NpyData::U8(npy.into_vec::<u8>().map_err(corrupt)?),
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

/// Writes `data` (values of `dtype`) as a C-order array of `shape` in `dtype`'s `.npy` dtype
/// ([`descr`]).
pub fn write_npy_as(
    path: impl AsRef<Path>,
    shape: &[u64],
    data: &[f64],
    dtype: crate::ir::DType,
) -> Result<(), RuntimeError> {
    let path = path.as_ref();
    let d = descr(dtype);
    match NpyData::of(data, dtype) {
        NpyData::F64(v) => write_npy(path, shape, &v, d),
        NpyData::F32(v) => write_npy(path, shape, &v, d),
        NpyData::F16(v) => write_npy(path, shape, &v, d),
        NpyData::Bf16(v) => write_npy(path, shape, &v, d),
        NpyData::I32(v) => write_npy(path, shape, &v, d),
        NpyData::I8(v) => write_npy(path, shape, &v, d),
        NpyData::U8(v) => write_npy(path, shape, &v, d),
    }
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
