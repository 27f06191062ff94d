//! Squid as perigee-child supervises it: `squid -k parse` as the check, `squid -z` before a
//! start, `--foreground` under its own service name (`-n`), ready when the cache manager
//! answers, `squid -k shutdown` then SIGKILL to its process group.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::admin;
use crate::config::CacheConfig;
use crate::follower::LogFollower;
use crate::render::SquidPaths;
use crate::version::SquidVersion;
use perigee_child::{lookup_user, Service, ServiceError};

type SquidError = ServiceError;

fn io_err(what: &str) -> impl FnOnce(std::io::Error) -> SquidError + '_ {
    ServiceError::io("squid_io", what)
}

/// Debian's Squid keeps its IPC sockets here (compiled-in DEFAULT_STATEDIR).
pub const SQUID_IPC_DIR: &str = "/run/squid";

/// Squid as the supervisor runs it, and what the manager knows about it.
pub(crate) struct Squid {
    pub(crate) bin: PathBuf,
    pub(crate) paths: SquidPaths,
    pub(crate) ready_timeout: Duration,
    pub(crate) version: Option<SquidVersion>,
    /// What the operator should know about this Squid build (e.g. no TPROXY).
    pub(crate) version_problem: Option<String>,
    pub(crate) follower: LogFollower,
}

impl Service for Squid {
    type Config = CacheConfig;
    const NAME: &'static str = "squid";
    const IO_CODE: &'static str = "squid_io";
    const START_CODE: &'static str = "squid_start";
    /// After a reconfigure the old listener may answer briefly: give Squid a moment first.
    const READY_SETTLE: Duration = Duration::from_millis(200);
    const READY_POLL: Duration = Duration::from_millis(100);
    const STOP_GRACE: Duration = Duration::from_secs(10);
    const STOP_POLL: Duration = Duration::from_millis(100);

    fn conf(&self) -> PathBuf {
        self.paths.conf()
    }

    fn write_conf(&self, path: &Path, text: &str) -> std::io::Result<()> {
        std::fs::write(path, text)
    }

    /// Runs `squid -k parse` on a candidate file. Squid exits 0 for some errors (unknown
    /// directives, bad regexes), so its messages are checked too.
    fn check(&self, file: &Path) -> Result<(), SquidError> {
        let out = self
            .base_command()
            .arg("-k")
            .arg("parse")
            .arg("-f")
            .arg(file)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| SquidError::new("squid_parse", format!("cannot run squid: {e}")))?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let errors = parse_errors(&text);
        if out.status.success() && errors.is_empty() {
            return Ok(());
        }
        let detail = if errors.is_empty() {
            format!("squid -k parse exited with {}", out.status)
        } else {
            errors.join("; ")
        };
        Err(SquidError::new(
            "squid_parse",
            format!("squid rejected the rendered configuration: {detail}"),
        ))
    }

    /// Creates our directories; Squid's user must own what it writes.
    fn prepare_dirs(&self, cfg: &CacheConfig) -> Result<(), SquidError> {
        let p = &self.paths;
        let owner = lookup_user(&p.effective_user);
        for dir in [
            p.state_dir.clone(),
            p.run_dir.clone(),
            p.log_dir(),
            p.cache_root(),
        ] {
            std::fs::create_dir_all(&dir).map_err(io_err("creating squid directories"))?;
        }
        // Squid's SMP IPC sockets live in its compiled-in state dir (Debian: /run/squid, made
        // by tmpfiles.d or squid.service). Our `-n` name keeps them apart from a system Squid;
        // the directory itself may be missing when squid.service is disabled.
        let ipc_dir = Path::new(SQUID_IPC_DIR);
        let made_ipc_dir = !ipc_dir.exists() && std::fs::create_dir_all(ipc_dir).is_ok();
        if let Some((uid, gid)) = owner {
            if made_ipc_dir {
                let _ = std::os::unix::fs::chown(ipc_dir, Some(uid), Some(gid));
            }
            for dir in [p.run_dir.clone(), p.log_dir(), p.cache_root()] {
                std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                    .map_err(io_err("chown squid directories"))?;
            }
            for f in [p.access_log(), p.cache_log()] {
                if f.exists() {
                    let _ = std::os::unix::fs::chown(&f, Some(uid), Some(gid));
                }
            }
            let store = p.store_dir(cfg.store);
            if store.exists() {
                chown_tree(&store, uid, gid);
            }
        }
        Ok(())
    }

    /// Leftover Squid from an earlier daemon (same pid file): shut it down first. A daemon that
    /// stopped cleanly stopped its Squid, so a leftover belongs to a killed one: its process
    /// group goes at once (the rock store survives that), not after a graceful shutdown that
    /// would keep the restarted daemon from serving for seconds.
    fn stop_stale(&self) {
        if !self.paths.pid_file().exists() {
            return;
        }
        if let Some(pid) = self.stale_leader() {
            kill_group(pid);
            let deadline = Instant::now() + Duration::from_secs(5);
            // SAFETY: kill(pid, 0) only probes for existence.
            while unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = std::fs::remove_file(self.paths.pid_file());
            return;
        }
        if self.squid_k("shutdown").is_err() {
            // No such process: the pid file is a leftover of a killed Squid.
            let _ = std::fs::remove_file(self.paths.pid_file());
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.paths.pid_file().exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn before_start(&self, _cfg: &CacheConfig) -> Result<(), SquidError> {
        let conf = self.paths.conf();
        // Create missing store directories/databases; existing ones are kept.
        let z = self
            .base_command()
            .args(["-N", "-z", "-f"])
            .arg(&conf)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| SquidError::new("squid_start", format!("cannot run squid -z: {e}")))?;
        if !z.status.success() {
            return Err(SquidError::new(
                "squid_start",
                format!(
                    "squid -z failed: {}",
                    String::from_utf8_lossy(&z.stderr).trim()
                ),
            ));
        }
        Ok(())
    }

    fn output_log(&self) -> (PathBuf, &'static str) {
        (self.paths.log_dir().join("squid.out"), "squid.out")
    }

    fn command(&self) -> Command {
        let mut cmd = self.base_command();
        cmd.arg("--foreground").arg("-f").arg(self.paths.conf());
        cmd
    }

    /// The cache manager answers on the admin port.
    fn ready(&self, cfg: &CacheConfig) -> bool {
        admin::mgr_page(cfg.admin_port, "info").is_ok()
    }

    fn ready_timeout(&self) -> Duration {
        self.ready_timeout
    }

    fn not_ready(&self, cfg: &CacheConfig) -> String {
        format!(
            "squid did not answer on 127.0.0.1:{} within {:?}; see {}",
            cfg.admin_port,
            self.ready_timeout,
            self.paths.cache_log().display()
        )
    }

    fn exit_log(&self) -> PathBuf {
        self.paths.cache_log()
    }

    /// A master that died without its kids (SIGKILL, a crash) leaves the coordinator and the
    /// disker holding the service's IPC sockets and the store: the next Squid of this service
    /// would never become ready. They share its process group.
    fn exited(&mut self, child: &Child) {
        kill_group(child.id());
    }

    fn shutdown(&self) {
        let _ = self.squid_k("shutdown");
    }

    /// The master leads its own process group: take the kids down with it.
    fn kill(&self, child: &mut Child) {
        kill_group(child.id());
    }

    fn stopped(&mut self) {
        self.follower.pump();
    }
}

impl Squid {
    fn base_command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("-n").arg(&self.paths.service_name);
        c
    }

    pub(crate) fn squid_k(&self, action: &str) -> Result<(), String> {
        let out = self
            .base_command()
            .arg("-k")
            .arg(action)
            .arg("-f")
            .arg(self.paths.conf())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run squid -k {action}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "squid -k {action} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// The pid file's process when it is a Squid of this service leading its own process group
    /// (as `spawn` starts it), else None.
    fn stale_leader(&self) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(self.paths.pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_ours = args.first().is_some_and(|a| a.ends_with(b"squid"))
            && args
                .windows(2)
                .any(|w| w[0] == b"-n" && w[1] == self.paths.service_name.as_bytes());
        // SAFETY: getpgid has no memory effects.
        let leads = unsafe { libc::getpgid(pid as libc::pid_t) } == pid as libc::pid_t;
        (is_ours && leads).then_some(pid)
    }
}

/// SIGKILL to the process group led by `leader` (a Squid master started by `spawn`).
pub(crate) fn kill_group(leader: u32) {
    // SAFETY: plain kill(2) on a process group we created for our own child.
    unsafe {
        libc::kill(-(leader as libc::pid_t), libc::SIGKILL);
    }
}

/// The error lines in `squid -k parse` output (Squid echoes every directive as "Processing:").
pub fn parse_errors(output: &str) -> Vec<String> {
    const MARKERS: &[&str] = &[
        "FATAL",
        "ERROR",
        "unrecognized",
        "Invalid",
        "Bungled",
        "Cannot",
        "cannot",
    ];
    output
        .lines()
        .filter(|l| !l.contains("| Processing: "))
        .filter(|l| MARKERS.iter().any(|m| l.contains(m)))
        .map(|l| l.split_once("| ").map_or(l, |(_, m)| m).trim().to_string())
        .take(6)
        .collect()
}

fn chown_tree(p: &Path, uid: u32, gid: u32) {
    let _ = std::os::unix::fs::chown(p, Some(uid), Some(gid));
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                chown_tree(&path, uid, gid);
            } else {
                let _ = std::os::unix::fs::chown(&path, Some(uid), Some(gid));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_errors_skip_echoed_directives() {
        let out = "2026/11/22 03:04:54| Processing: refresh_pattern -i ([a-z 0 20% 40\n\
                   2026/11/22 03:04:54| refreshAddToList: Invalid regular expression '([a-z': Unmatched [\n\
                   2026/11/22 03:04:57| s.conf(18): unrecognized: 'bogus_directive'\n\
                   2026/11/22 03:04:57| Processing: http_port 3129 tproxy name=perigee_tproxy\n";
        let e = parse_errors(out);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].starts_with("refreshAddToList: Invalid regular expression"));
    }
}
