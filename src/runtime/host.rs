//! The machine kernels run on, read once from `/proc` where there is one: the one description
//! behind `teml run --json`'s `machine`, `teml bench`'s report and the compile cache's key (a
//! cache shared between machines never hands out code built for another CPU).

/// What timings depend on.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// Cores this process may use.
    pub cores: usize,
    /// The CPU model (`model name`), else the architecture.
    pub cpu: String,
    /// The CPU's feature flags (`flags`), empty where unknown.
    pub cpu_flags: String,
    /// Physical memory, GiB, where known.
    pub mem_gib: Option<f64>,
}

impl Host {
    /// This machine.
    pub fn this() -> Host {
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
        Host {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu: field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string()),
            cpu_flags: field("flags").unwrap_or_default(),
            mem_gib,
        }
    }

    /// In a line, for reports: `2 cores, AMD EPYC ..., 23 GiB`.
    pub fn describe(&self) -> String {
        format!(
            "{} cores, {}{}",
            self.cores,
            self.cpu,
            self.mem_gib.map_or(String::new(), |g| format!(", {g:.0} GiB"))
        )
    }

    /// What compiled code depends on (the compile cache's key): architecture, model, flags.
    pub fn cpu_key(&self) -> String {
        format!("{}\n{}\n{}", std::env::consts::ARCH, self.cpu, self.cpu_flags)
    }
}

/// The memory the system can still give, in bytes (Linux: `MemAvailable`; `None` elsewhere).
pub fn available_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_is_described() {
        let h = Host::this();
        assert!(h.cores >= 1 && !h.cpu.is_empty());
        assert!(h.describe().starts_with(&format!("{} cores, ", h.cores)));
        assert!(h.cpu_key().starts_with(std::env::consts::ARCH));
    }
}
