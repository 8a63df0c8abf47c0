//! The one description of the machine: what the rules size their blocks for (vector width,
//! vector registers, cores, caches) and what timings and compiled code depend on (the CPU's
//! model and flags, the memory). Read once from the host (`/proc/cpuinfo`,
//! `/sys/devices/system/cpu/cpu0/cache`, `/proc/meminfo`), with the fields `TEML_MACHINE` pins
//! (any fields of [`Machine::describe`]'s line, e.g. `512-bit vectors, 32 vector registers, 2
//! cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB`: to plan for another machine than the host, or to
//! get the same plan on every host) and the vector width `TEML_VECTOR_BITS` sets. Everything
//! above asks [`Machine::this`]: the rules, code generation's vectors (`analysis::vector::Target`),
//! the reports, the compile cache's key and the tuning database's.

use crate::ir::DType;
use std::sync::OnceLock;

/// The machine.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Machine {
    /// The widest vectors, bits (0: no explicit vectors).
    pub vector_bits: u32,
    /// Vector registers.
    pub registers: usize,
    /// Cores this process may use: on the host ([`Machine::host`]), every command's default
    /// thread count.
    pub cores: usize,
    /// Data cache sizes, bytes: L1, L2, L3 (0 where unknown).
    pub caches: [u64; 3],
    /// The CPU as read from the host (never pinned).
    #[serde(default)]
    pub cpu: Cpu,
}

/// The host's CPU and memory, as read: what timings and compiled code depend on.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cpu {
    /// The CPU model (`model name`), else the architecture.
    pub model: String,
    /// The CPU's feature flags (`flags`), empty where unknown.
    pub flags: String,
    /// Physical memory, GiB, where known.
    pub mem_gib: Option<f64>,
}

impl Machine {
    /// This machine, with the fields `TEML_MACHINE` sets (an error where it is malformed). Read
    /// once a process.
    pub fn this() -> Result<Machine, String> {
        static THIS: OnceLock<Result<Machine, String>> = OnceLock::new();
        THIS.get_or_init(|| {
            let mut m = Machine::host().clone();
            pinned()?.into_iter().for_each(|f| f.set(&mut m));
            Ok(m)
        })
        .clone()
    }

    /// [`Machine::this`], or the host as read where `TEML_MACHINE` is malformed (the command
    /// line refuses a malformed one at start-up: [`check_pinned`]).
    pub fn current() -> Machine {
        Machine::this().unwrap_or_else(|_| Machine::host().clone())
    }

    /// The host as read from the system (vector width: `TEML_VECTOR_BITS` or the CPU's), once.
    pub fn host() -> &'static Machine {
        static HOST: OnceLock<Machine> = OnceLock::new();
        HOST.get_or_init(read_host)
    }

    /// The CPU's feature flag `flag` (e.g. `avx512f`), as `/proc/cpuinfo` lists it.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.cpu.flags.split_whitespace().any(|f| f == flag)
    }

    /// Lanes of a full vector of `dtype` (1: no explicit vectors).
    pub fn lanes(&self, dtype: DType) -> usize {
        let bytes = (self.vector_bits / 8) as usize;
        (bytes / dtype.size()).max(1)
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

    /// In a line: `512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3
    /// 32768 KiB` (the form `TEML_MACHINE` reads).
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

    /// The host in a line, for reports: `2 cores, AMD EPYC ..., 23 GiB`.
    pub fn host_line(&self) -> String {
        format!(
            "{} cores, {}{}",
            self.cores,
            self.cpu.model,
            self.cpu.mem_gib.map_or(String::new(), |g| format!(", {g:.0} GiB"))
        )
    }

    /// What compiled code depends on (the compile cache's key): architecture, model, flags.
    pub fn cpu_key(&self) -> String {
        format!("{}\n{}\n{}", std::env::consts::ARCH, self.cpu.model, self.cpu.flags)
    }
}

/// Reads the host: `/proc/cpuinfo`, the caches under `/sys`, `/proc/meminfo`.
fn read_host() -> Machine {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let mem_gib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0 / 1024.0)
    });
    let cpu = Cpu {
        model: field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string()),
        flags: field("flags").unwrap_or_default(),
        mem_gib,
    };
    let avx512 = cpu.flags.split_whitespace().any(|f| f == "avx512f");
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
    let vector_bits = std::env::var(VECTOR_BITS_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or_else(detect_bits);
    Machine {
        vector_bits,
        registers: if avx512 { 32 } else { 16 },
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        caches,
        cpu,
    }
}

/// The widest vectors the CPU has (AVX-512F: 512, AVX: 256, SSE2 or NEON: 128).
#[allow(unreachable_code)]
fn detect_bits() -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 512;
        }
        if std::arch::is_x86_feature_detected!("avx") {
            return 256;
        }
        return 128;
    }
    #[cfg(target_arch = "aarch64")]
    {
        return 128;
    }
    0
}

/// The variable that sets the vector width of the generated C (0, 128, 256 or 512; 0: no
/// explicit vectors), where `TEML_MACHINE` names none.
pub const VECTOR_BITS_VAR: &str = "TEML_VECTOR_BITS";

/// The variable that pins the machine the rules plan for.
pub const MACHINE_VAR: &str = "TEML_MACHINE";

/// A field of `TEML_MACHINE`.
#[derive(Clone, Debug, PartialEq)]
enum Field {
    Bits(u32),
    Registers(usize),
    Cores(usize),
    /// Level - 1 and bytes.
    Cache(usize, u64),
    /// The CPU's feature flags, as `/proc/cpuinfo` words them (`flags avx2 fma avx512_bf16`):
    /// which dot-product and tile instructions the rules plan for.
    Flags(String),
}

impl Field {
    fn set(self, m: &mut Machine) {
        match self {
            Field::Bits(b) => m.vector_bits = b,
            Field::Registers(n) => m.registers = n,
            Field::Cores(n) => m.cores = n,
            Field::Cache(k, bytes) => m.caches[k] = bytes,
            Field::Flags(f) => m.cpu.flags = f,
        }
    }
}

/// The fields `TEML_MACHINE` sets (none where it is unset; an error naming the field that is
/// malformed).
fn pinned() -> Result<Vec<Field>, String> {
    std::env::var(MACHINE_VAR).map_or(Ok(Vec::new()), |text| fields(&text))
}

/// Checks `TEML_MACHINE` where it is set: an error naming the field that is malformed.
pub fn check_pinned() -> Result<(), String> {
    pinned().map(|_| ())
}

/// The fields `text` names (comma-separated, in any order, as [`Machine::describe`] writes them).
fn fields(text: &str) -> Result<Vec<Field>, String> {
    let bad = |field: &str, want: &str| {
        format!(
            "{MACHINE_VAR}: expected {want}, found `{field}` (the form: `512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB, flags avx2 fma avx512_bf16`, any of its fields)"
        )
    };
    let mut out = Vec::new();
    for field in text.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let words: Vec<&str> = field.split_whitespace().collect();
        // A number of `w`, at least `least`.
        let number = |w: &str, least: u64, want: &str| {
            w.parse::<u64>().ok().filter(|&n| n >= least).ok_or_else(|| bad(field, want))
        };
        out.push(match words.as_slice() {
            [w, "vectors"] if w.ends_with("-bit") => {
                let want = "a vector width of 0, 128, 256 or 512 bits";
                let bits = number(&w[..w.len() - 4], 0, want)?;
                if ![0, 128, 256, 512].contains(&bits) {
                    return Err(bad(field, want));
                }
                Field::Bits(bits as u32)
            }
            [n, "vector", "registers"] | [n, "registers"] => {
                Field::Registers(number(n, 1, "a count of vector registers from 1")? as usize)
            }
            [n, "cores"] | [n, "core"] => Field::Cores(number(n, 1, "a count of cores from 1")? as usize),
            ["flags", rest @ ..] => Field::Flags(rest.join(" ")),
            [level @ ("L1" | "L2" | "L3"), n, unit @ ("KiB" | "MiB")] => {
                let n = number(n, 0, "a cache size in KiB or MiB")?;
                Field::Cache((level.as_bytes()[1] - b'1') as usize, n << if *unit == "KiB" { 10 } else { 20 })
            }
            _ => {
                return Err(bad(
                    field,
                    "`N-bit vectors`, `N vector registers`, `N cores`, `L1|L2|L3 N KiB|MiB` or `flags WORD ...`",
                ));
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_cut_into_vectors() {
        let m = Machine { vector_bits: 512, registers: 32, cores: 2, caches: [0; 3], ..Machine::default() };
        assert_eq!(m.pieces(7, DType::Double), 3);
        assert_eq!(m.pieces(16, DType::Double), 2);
        assert_eq!(m.pieces(12, DType::Double), 2);
        assert_eq!(m.pieces(28, DType::Double), 4);
        let avx2 = Machine { vector_bits: 256, ..m };
        assert_eq!(avx2.pieces(7, DType::Double), 3);
        assert_eq!(avx2.pieces(8, DType::Double), 2);
    }

    /// `m` with the fields of `text` set, as `Machine::this` sets them.
    fn pin(m: &mut Machine, text: &str) -> Result<(), String> {
        fields(text)?.into_iter().for_each(|f| f.set(m));
        Ok(())
    }

    #[test]
    fn teml_machine_pins_the_fields_it_names() {
        let host = Machine {
            vector_bits: 256,
            registers: 16,
            cores: 8,
            caches: [32 << 10, 512 << 10, 8 << 20],
            ..Machine::default()
        };
        let mut m = host.clone();
        pin(&mut m, "512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB")
            .unwrap();
        assert_eq!(
            m.describe(),
            "512-bit vectors, 32 vector registers, 2 cores, L1 48 KiB, L2 1024 KiB, L3 32768 KiB"
        );
        let mut m = host.clone();
        pin(&mut m, " L2 2 MiB ,4 cores").unwrap();
        assert_eq!(m, Machine { cores: 4, caches: [32 << 10, 2 << 20, 8 << 20], ..host.clone() });
        for bad in ["384-bit vectors", "0 cores", "L4 1 KiB", "fast", "x-bit vectors", "L1 32 KB"] {
            let e = pin(&mut host.clone(), bad).unwrap_err();
            assert!(e.starts_with("TEML_MACHINE: expected ") && e.contains(&format!("`{bad}`")), "{e}");
        }
    }
}
