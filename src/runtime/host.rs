//! What the system can still give: the memory available now (the machine itself is
//! [`super::machine::Machine`]).

/// The memory the system can still give, in bytes (Linux: `MemAvailable`; `None` elsewhere).
pub fn available_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::super::machine::Machine;

    #[test]
    fn this_machine_is_described() {
        let h = Machine::host();
        assert!(h.cores >= 1 && !h.cpu.model.is_empty());
        assert!(h.host_line().starts_with(&format!("{} cores, ", h.cores)));
        assert!(h.cpu_key().starts_with(std::env::consts::ARCH));
    }
}
