//! The machine the rules size their blocks for: vector width, vector registers, cores and
//! caches, read from the host (`/proc/cpuinfo`, `/sys/devices/system/cpu/cpu0/cache`).

use crate::analysis::vector::Target;
use crate::ir::DType;

/// What the rules need to know of the machine.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// The widest vectors, bits (0: no explicit vectors).
    pub vector_bits: u32,
    /// Vector registers.
    pub registers: usize,
    /// Cores this process may use.
    pub cores: usize,
    /// Data cache sizes, bytes: L1, L2, L3 (0 where unknown).
    pub caches: [u64; 3],
}

impl Machine {
    /// This machine.
    pub fn this() -> Machine {
        let bits = Target::native().vector_bits;
        let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let avx512 = flags.lines().any(|l| l.starts_with("flags") && l.contains(" avx512f"));
        let mut caches = [32 << 10, 512 << 10, 8 << 20];
        for k in 0..8 {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{k}");
            let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
            let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else {
                continue;
            };
            if kind.trim() == "Instruction" {
                continue;
            }
            let size = size.trim();
            let bytes = match size.strip_suffix('K') {
                Some(k) => k.parse::<u64>().ok().map(|k| k << 10),
                None => match size.strip_suffix('M') {
                    Some(m) => m.parse::<u64>().ok().map(|m| m << 20),
                    None => size.parse().ok(),
                },
            };
            if let (Ok(level), Some(bytes)) = (level.trim().parse::<usize>(), bytes)
                && (1..=3).contains(&level)
            {
                caches[level - 1] = bytes;
            }
        }
        Machine {
            vector_bits: bits,
            registers: if avx512 { 32 } else { 16 },
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            caches,
        }
    }

    /// Lanes of a full vector of `dtype`.
    pub fn lanes(&self, dtype: DType) -> usize {
        Target { vector_bits: self.vector_bits }.lanes(dtype)
    }

    /// The vectors `n` lanes are cut into (whole vectors, then halves, quarters, ..., then
    /// scalars, as explicit vector code cuts them).
    pub fn pieces(&self, n: usize, dtype: DType) -> usize {
        let lanes = self.lanes(dtype).max(1);
        let mut rest = n % lanes;
        let mut count = n / lanes;
        let mut w = lanes / 2;
        while rest > 0 && w >= 1 {
            if rest >= w {
                rest -= w;
                count += 1;
            }
            w /= 2;
        }
        count
    }

    /// In a line: `512-bit vectors, 32 registers, 2 cores, L1 32 KiB, L2 1024 KiB`.
    pub fn describe(&self) -> String {
        format!(
            "{}-bit vectors, {} vector registers, {} cores, L1 {} KiB, L2 {} KiB, L3 {} KiB",
            self.vector_bits,
            self.registers,
            self.cores,
            self.caches[0] >> 10,
            self.caches[1] >> 10,
            self.caches[2] >> 10
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_cut_into_vectors() {
        let m = Machine { vector_bits: 512, registers: 32, cores: 2, caches: [0; 3] };
        assert_eq!(m.pieces(7, DType::Double), 3);
        assert_eq!(m.pieces(16, DType::Double), 2);
        assert_eq!(m.pieces(12, DType::Double), 2);
        assert_eq!(m.pieces(28, DType::Double), 4);
        let avx2 = Machine { vector_bits: 256, ..m };
        assert_eq!(avx2.pieces(7, DType::Double), 3);
        assert_eq!(avx2.pieces(8, DType::Double), 2);
    }
}
