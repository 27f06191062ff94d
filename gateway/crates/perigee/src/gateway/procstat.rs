//! Resource use from /proc: a process's open file descriptors, their limit and resident memory;
//! the box's CPU time, load, memory and disks (GET /v1/health `host`, and the metrics).
use super::interfaces;
use super::reports::{DiskUsage, HostStats};
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

/// The box's CPU, memory, disks (those of `paths`) and interfaces now.
pub fn host(paths: &[&str]) -> HostStats {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let (busy, idle) = cpu_seconds(&stat).unwrap_or((0.0, 0.0));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let loads: Vec<f64> = load
        .split_whitespace()
        .take(3)
        .filter_map(|x| x.parse().ok())
        .collect();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    HostStats {
        cpus: stat.lines().filter(|l| is_cpu_n(l)).count() as u64,
        cpu_busy_seconds: busy,
        cpu_idle_seconds: idle,
        load_1m: loads.first().copied().unwrap_or(0.0),
        load_5m: loads.get(1).copied().unwrap_or(0.0),
        load_15m: loads.get(2).copied().unwrap_or(0.0),
        memory_total_bytes: meminfo_bytes(&meminfo, "MemTotal:").unwrap_or(0),
        memory_available_bytes: meminfo_bytes(&meminfo, "MemAvailable:").unwrap_or(0),
        disks: paths.iter().filter_map(|p| disk(p)).collect(),
        interfaces: interfaces::all_counters(),
    }
}

fn is_cpu_n(line: &str) -> bool {
    line.strip_prefix("cpu")
        .and_then(|r| r.chars().next())
        .is_some_and(|c| c.is_ascii_digit())
}

/// USER_HZ: what /proc/stat counts in (100 on every Linux architecture's ABI).
const USER_HZ: f64 = 100.0;

/// (busy, idle) seconds of the aggregate `cpu` line of /proc/stat: idle is idle + iowait, busy
/// the rest but guest time (already inside user and nice).
fn cpu_seconds(stat: &str) -> Option<(f64, f64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    let idle = at(3) + at(4);
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    Some((busy as f64 / USER_HZ, idle as f64 / USER_HZ))
}

/// `MemTotal:  16384 kB` of /proc/meminfo, in bytes.
fn meminfo_bytes(meminfo: &str, key: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with(key))?;
    let kb: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kb * 1024)
}

/// The filesystem under `path`: None when it does not exist.
fn disk(path: &str) -> Option<DiskUsage> {
    let c = std::ffi::CString::new(path).ok()?;
    // SAFETY: statvfs fills the zeroed struct for a NUL-terminated path; nothing else is read.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let frsize = st.f_frsize as u64;
    Some(DiskUsage {
        path: path.to_string(),
        total_bytes: st.f_blocks as u64 * frsize,
        available_bytes: st.f_bavail as u64 * frsize,
    })
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

    #[test]
    fn parses_cpu_and_memory() {
        let stat = "cpu  100 20 30 400 50 6 7 8 0 0\ncpu0 50 10 15 200 25 3 3 4 0 0\ncpu1 50 10 15 200 25 3 4 4 0 0\nintr 1\n";
        let (busy, idle) = cpu_seconds(stat).unwrap();
        assert_eq!((busy, idle), (1.71, 4.5));
        assert_eq!(stat.lines().filter(|l| is_cpu_n(l)).count(), 2);
        let meminfo = "MemTotal:       16384 kB\nMemFree:  1 kB\nMemAvailable:    8192 kB\n";
        assert_eq!(meminfo_bytes(meminfo, "MemTotal:"), Some(16384 * 1024));
        assert_eq!(meminfo_bytes(meminfo, "MemAvailable:"), Some(8192 * 1024));
    }

    #[test]
    fn this_host() {
        let h = host(&["/", "/no/such/path"]);
        assert!(h.cpus >= 1 && h.cpu_busy_seconds + h.cpu_idle_seconds > 0.0);
        assert!(h.memory_total_bytes >= h.memory_available_bytes && h.memory_available_bytes > 0);
        assert_eq!(h.disks.len(), 1);
        assert!(h.disks[0].total_bytes >= h.disks[0].available_bytes && h.disks[0].total_bytes > 0);
    }
}
