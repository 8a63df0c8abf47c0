//! Element types (docs/types.md): their C and `.npy` spellings, the types they compute in,
//! the promotion table, rounding to a type and each type's unit roundoff.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a real tensor (docs/types.md).
///
/// Values are held as `f64` everywhere outside the generated C (each one exactly representable
/// in its type: the data is rounded to the type when it is made or read); a kernel computes in
/// the [`compute`](DType::compute) type of its operands' promotion ([`DType::promote`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    /// 64-bit IEEE float (the default).
    #[default]
    Double,
    /// 32-bit IEEE float.
    Float,
    /// bfloat16 (8 bits of exponent, 8 of significand): stored as its 16-bit pattern, computed in float.
    #[serde(rename = "bf16")]
    Bf16,
    /// IEEE binary16 (half): stored as its 16-bit pattern, computed in float.
    #[serde(rename = "f16")]
    F16,
    /// Signed 32-bit integer.
    #[serde(rename = "i32")]
    I32,
    /// Signed 8-bit integer, computed in `i32`.
    #[serde(rename = "i8")]
    I8,
    /// Unsigned 8-bit integer, computed in `i32`.
    #[serde(rename = "u8")]
    U8,
}

impl DType {
    /// Every element type, in the order the language reference lists them.
    pub const ALL: [DType; 7] =
        [DType::Double, DType::Float, DType::Bf16, DType::F16, DType::I32, DType::I8, DType::U8];

    /// The spelling in teml programs (`tensor(bf16, [N])`).
    pub fn name(self) -> &'static str {
        match self {
            DType::Double => "double",
            DType::Float => "float",
            DType::Bf16 => "bf16",
            DType::F16 => "f16",
            DType::I32 => "i32",
            DType::I8 => "i8",
            DType::U8 => "u8",
        }
    }

    /// The type a program spells `word`.
    pub fn from_name(word: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == word)
    }

    /// The C spelling of an element as stored (`teml_bf16` and `teml_fp16` are the 16-bit
    /// patterns, `uint16_t`; the prelude defines them).
    pub fn c_name(self) -> &'static str {
        match self {
            DType::Double => "double",
            DType::Float => "float",
            DType::Bf16 => "teml_bf16",
            DType::F16 => "teml_fp16",
            DType::I32 => "int32_t",
            DType::I8 => "int8_t",
            DType::U8 => "uint8_t",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::Double => 8,
            DType::Float | DType::I32 => 4,
            DType::Bf16 | DType::F16 => 2,
            DType::I8 | DType::U8 => 1,
        }
    }

    /// The type its values are computed in: float for the 16-bit floats, `i32` for the
    /// 8-bit integers, itself otherwise.
    pub fn compute(self) -> DType {
        match self {
            DType::Bf16 | DType::F16 => DType::Float,
            DType::I8 | DType::U8 => DType::I32,
            d => d,
        }
    }

    /// An integer type.
    pub fn is_integer(self) -> bool {
        matches!(self, DType::I32 | DType::I8 | DType::U8)
    }

    /// A type stored in a width its values are not computed in (the 16-bit floats, the
    /// 8-bit integers): loads convert, stores round or narrow.
    pub fn is_narrow(self) -> bool {
        self.compute() != self
    }

    /// The promotion table of a binary operation (docs/types.md): double wins; any float
    /// beside a float or an integer is float; two integers are `i32`. The result is always
    /// a [`compute`](DType::compute) type: `bf16 * bf16` is float, `u8 * i8` is `i32`.
    pub fn promote(self, other: DType) -> DType {
        let (a, b) = (self.compute(), other.compute());
        match (a, b) {
            (DType::Double, _) | (_, DType::Double) => DType::Double,
            (DType::Float, _) | (_, DType::Float) => DType::Float,
            _ => DType::I32,
        }
    }

    /// The range of an integer type (`None` for a float).
    pub fn int_range(self) -> Option<(f64, f64)> {
        match self {
            DType::I32 => Some((i32::MIN as f64, i32::MAX as f64)),
            DType::I8 => Some((-128.0, 127.0)),
            DType::U8 => Some((0.0, 255.0)),
            _ => None,
        }
    }

    /// `x` as an element of this type stores it: rounded to nearest even for a float type,
    /// wrapped modulo 2^bits for an integer one (as C's conversion does on every target gcc
    /// knows), NaN of an integer is 0.
    pub fn round(self, x: f64) -> f64 {
        match self {
            DType::Double => x,
            DType::Float => x as f32 as f64,
            DType::Bf16 => half::bf16::from_f64(x).to_f64(),
            DType::F16 => half::f16::from_f64(x).to_f64(),
            DType::I32 => wrap_bits(x, 32) as i32 as f64,
            DType::I8 => wrap_bits(x, 8) as i8 as f64,
            DType::U8 => wrap_bits(x, 8) as u8 as f64,
        }
    }

    /// The unit roundoff of the type's arithmetic (half its machine epsilon): 0 for an
    /// integer type, whose results are exact.
    pub fn unit_roundoff(self) -> f64 {
        match self {
            DType::Double => f64::EPSILON / 2.0,
            DType::Float => f32::EPSILON as f64 / 2.0,
            DType::Bf16 => half::bf16::EPSILON.to_f64() / 2.0,
            DType::F16 => half::f16::EPSILON.to_f64() / 2.0,
            DType::I32 | DType::I8 | DType::U8 => 0.0,
        }
    }
}

/// `x` truncated toward zero, as the low `bits` bits of a two's-complement integer (sign
/// extended from an `i64`; the caller narrows it).
fn wrap_bits(x: f64, bits: u32) -> i64 {
    if !x.is_finite() {
        return 0;
    }
    let t = x.trunc();
    let m = 2f64.powi(bits as i32);
    let r = t.rem_euclid(m);
    r as i64
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
