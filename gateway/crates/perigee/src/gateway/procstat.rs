//! A process's resource use from /proc: open file descriptors and their limit, resident memory.
use serde::Serialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProcStat {
    pub open_fds: u64,
    /// The soft RLIMIT_NOFILE (what open(2) is refused beyond).
    pub max_fds: u64,
    pub resident_bytes: u64,
}

/// None when the process is gone (or /proc cannot be read).
pub fn of(pid: i32) -> Option<ProcStat> {
    let open_fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    Some(ProcStat {
        open_fds,
        max_fds: max_open_files(&limits).unwrap_or(0),
        resident_bytes: vm_rss_bytes(&status).unwrap_or(0),
    })
}

/// `VmRSS:    1234 kB` of /proc/PID/status.
fn vm_rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The soft limit of `Max open files` in /proc/PID/limits.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        assert_eq!(
            vm_rss_bytes("Name:\tx\nVmRSS:\t    2048 kB\n"),
            Some(2 << 20)
        );
        assert_eq!(vm_rss_bytes("Name:\tkthread\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            20000                20000                files     \n";
        assert_eq!(max_open_files(limits), Some(20_000));
    }

    #[test]
    fn this_process() {
        let s = of(std::process::id() as i32).unwrap();
        assert!(s.open_fds >= 3 && s.max_fds >= s.open_fds && s.resident_bytes > 0);
    }
}
