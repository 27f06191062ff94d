//! Removing per-namespace entries whose network namespace no longer exists (a gateway killed
//! with SIGKILL, then its namespace deleted, never removes its own entry; enough of them fill
//! the map and new gateways fall back to the host-wide parameters).
//!
//! Race-free order: the map's keys are read FIRST, then the cookies of every live namespace,
//! and only keys of the first read that match no live cookie are deleted. An entry written for
//! a namespace created after the key read is not in that read, so it cannot be lost; a
//! namespace alive at the key read that is still alive during the scan is seen by it.
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::{bpf_loader, sys, HyblaError, OPS_PIN};

/// What a prune did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Cookies of the removed entries (their namespaces no longer exist).
    pub removed: Vec<u64>,
    /// Cookies of the entries kept: their namespaces are live.
    pub kept: Vec<u64>,
    /// Live network namespaces found on the host (0 when there was no entry to check).
    pub live_namespaces: usize,
}

/// Remove the entries of namespaces that no longer exist (Perigee's BPF Hybla only; nothing
/// to do otherwise). When any live namespace cannot be identified (not root, a PID namespace
/// that hides the host's processes) no entry is removed: its cookie could be any of them.
pub fn prune_stale_netns() -> Result<PruneReport, HyblaError> {
    prune_stale_netns_observed(|| {})
}

/// [`prune_stale_netns`] that runs `after_key_read` between reading the keys and scanning
/// the namespaces: lets a test write an entry inside that window.
#[doc(hidden)]
pub fn prune_stale_netns_observed(
    after_key_read: impl FnOnce(),
) -> Result<PruneReport, HyblaError> {
    if !Path::new(OPS_PIN).exists() {
        return Ok(PruneReport::default()); // not ours, or not loaded: no entries
    }
    // 1. The keys, before anything else (see the module comment).
    let keys: Vec<u64> = bpf_loader::read_netns_params()?
        .into_iter()
        .map(|(cookie, _)| cookie)
        .collect();
    after_key_read();
    if keys.is_empty() {
        return Ok(PruneReport::default());
    }
    // 2. The live namespaces' cookies.
    let live = live_netns_cookies()?;
    // 3. Delete only keys of step 1 that are not live.
    let mut report = PruneReport {
        live_namespaces: live.len(),
        ..PruneReport::default()
    };
    for cookie in keys {
        if live.contains(&cookie) {
            report.kept.push(cookie);
        } else if bpf_loader::remove_netns_params(cookie)? {
            report.removed.push(cookie);
        }
    }
    Ok(report)
}

/// The cookie of every network namespace alive now: the caller's, every task's
/// (/proc/PID/task/TID/ns/net: threads can be in another namespace than their process), every
/// nsfs bind mount of every mount namespace (`ip netns add`'s under /run/netns, container
/// runtimes' elsewhere), and every namespace file a process holds open. Err when a task or a
/// bind mount is in a namespace that could not be identified.
pub fn live_netns_cookies() -> Result<HashSet<u64>, HyblaError> {
    let mut scan = Scan::new()?;
    if !proc_lists_whole_host() {
        scan.undecided.push(
            "/proc does not list the host's processes (this runs in its own PID namespace, \
             e.g. a container), so namespaces of processes outside it cannot be seen"
                .into(),
        );
    }
    scan.tasks_and_fds();
    scan.mounts();
    scan.resolve();
    scan.hidden_tasks();
    scan.finish()
}

/// Tells scans apart in the marker names (several may run in one process).
static SCAN_SEQ: AtomicU64 = AtomicU64::new(0);

/// Namespaces found so far, keyed by their nsfs inode (what identifies a namespace before its
/// cookie is known; never shared by two live namespaces).
struct Scan {
    /// The nsfs device: every namespace file has it.
    nsfs_dev: u64,
    /// Opened (the fd keeps the namespace alive), cookie not read yet.
    pending: HashMap<u64, OwnedFd>,
    cookies: HashMap<u64, u64>,
    /// One bound abstract unix socket per resolved namespace, named `marker` + inode: it shows
    /// in that namespace's /proc/net/unix, which tells which namespace a task is in when its
    /// namespace file is closed to us. Open until the scan ends.
    markers: Vec<OwnedFd>,
    marker: String,
    /// Namespaces a bind mount holds: each must be identified by the end.
    named: BTreeSet<u64>,
    /// Tasks whose namespace file we may not open: (pid, tid).
    hidden: Vec<(u32, u32)>,
    /// Why some live namespace could not be identified.
    undecided: Vec<String>,
}

impl Scan {
    fn new() -> Result<Scan, HyblaError> {
        let io_err = |what: &str, e| HyblaError::Io {
            what: what.into(),
            source: e,
        };
        let own = File::open("/proc/thread-self/ns/net")
            .and_then(|f| f.metadata().map(|m| (f, m)))
            .map_err(|e| io_err("open this thread's network namespace", e))?;
        sys::netns_cookie().map_err(|e| {
            io_err(
                "read this network namespace's cookie (SO_NETNS_COOKIE, Linux 5.14+)",
                e,
            )
        })?;
        let seq = SCAN_SEQ.fetch_add(1, Ordering::Relaxed);
        Ok(Scan {
            nsfs_dev: own.1.dev(),
            pending: HashMap::from([(own.1.ino(), own.0.into())]),
            cookies: HashMap::new(),
            markers: Vec::new(),
            marker: format!("perigee-prune-{}.{seq}-", std::process::id()),
            named: BTreeSet::new(),
            hidden: Vec::new(),
            undecided: Vec::new(),
        })
    }

    fn known(&self, ino: u64) -> bool {
        self.cookies.contains_key(&ino) || self.pending.contains_key(&ino)
    }

    /// Keep an opened namespace file when it is a network namespace not seen yet (`expect`:
    /// the inode it must have, for a bind mount that could have been mounted over).
    fn add(&mut self, file: File, expect: Option<u64>) {
        let Ok(meta) = file.metadata() else { return };
        let ino = meta.ino();
        if meta.dev() != self.nsfs_dev || expect.is_some_and(|i| i != ino) || self.known(ino) {
            return;
        }
        self.pending.insert(ino, file.into());
    }

    /// Every task's namespace, and the namespace files processes hold open.
    fn tasks_and_fds(&mut self) {
        for pid in numeric_entries(Path::new("/proc")) {
            let proc_dir = PathBuf::from(format!("/proc/{pid}"));
            for tid in numeric_entries(&proc_dir.join("task")) {
                let path = proc_dir.join(format!("task/{tid}/ns/net"));
                match File::open(&path) {
                    Ok(f) => self.add(f, None),
                    Err(e) if vanished(&e) => {} // exited
                    Err(e) if denied(&e) => self.hidden.push((pid, tid)),
                    Err(e) => self.undecided.push(format!("{}: {e}", path.display())),
                }
            }
            // Open namespace files. Those of processes whose fds we may not read are not
            // seen: see docs/hybla.md (pruning) for why that is acceptable.
            let fd_dir = proc_dir.join("fd");
            for fd in numeric_entries(&fd_dir) {
                let path = fd_dir.join(fd.to_string());
                let is_netns = std::fs::read_link(&path)
                    .is_ok_and(|t| t.to_str().is_some_and(|t| t.starts_with("net:[")));
                if let (true, Ok(f)) = (is_netns, File::open(&path)) {
                    self.add(f, None);
                }
            }
        }
    }

    /// nsfs bind mounts of network namespaces, in every mount namespace a process is in
    /// (read through one of its processes: /proc/PID/mountinfo, /proc/PID/root/<mount point>).
    /// A process whose mount namespace we may not identify has its mountinfo read too.
    fn mounts(&mut self) {
        let mut seen_mnt: HashSet<u64> = HashSet::new();
        for pid in numeric_entries(Path::new("/proc")) {
            let mnt = match std::fs::metadata(format!("/proc/{pid}/ns/mnt")) {
                Ok(m) if seen_mnt.contains(&m.ino()) => continue,
                Ok(m) => Some(m.ino()),
                Err(e) if denied(&e) => None,
                Err(_) => continue, // exited
            };
            let Ok(info) = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")) else {
                continue; // exited: the next process in that mount namespace is read instead
            };
            seen_mnt.extend(mnt);
            for (ino, mount_point) in netns_mounts(&info) {
                if self.known(ino) {
                    continue;
                }
                self.named.insert(ino);
                // Unreachable (denied, mounted over): `finish` reports it unless another
                // reference (a task, a mount elsewhere) identifies the namespace.
                if let Ok(f) = File::open(format!("/proc/{pid}/root{mount_point}")) {
                    self.add(f, Some(ino));
                }
            }
        }
    }

    /// Read each pending namespace's cookie: a short-lived thread joins them one after the
    /// other (setns changes only the calling thread's namespace), reads SO_NETNS_COOKIE from
    /// a new socket in each and leaves a marker socket there.
    fn resolve(&mut self) {
        let pending: Vec<(u64, OwnedFd)> = self.pending.drain().collect();
        let marker = self.marker.clone();
        let joined = std::thread::spawn(move || {
            pending
                .into_iter()
                .map(|(ino, fd)| (ino, cookie_and_marker(&fd, &format!("{marker}{ino}"))))
                .collect::<Vec<_>>()
        })
        .join();
        let Ok(results) = joined else {
            self.undecided
                .push("the namespace reader thread panicked".into());
            return;
        };
        for (ino, r) in results {
            match r {
                Ok((cookie, marker)) => {
                    self.cookies.insert(ino, cookie);
                    self.markers.push(marker);
                }
                Err(e) => self.undecided.push(format!("net:[{ino}]: {e}")),
            }
        }
    }

    /// Tasks whose namespace file is closed to us (e.g. a sandbox supervisor guarded by an
    /// LSM): their /proc/PID/task/TID/net/unix lists the sockets of their namespace, so the
    /// marker found there names it. No marker: a namespace found nowhere else.
    fn hidden_tasks(&mut self) {
        for (pid, tid) in std::mem::take(&mut self.hidden) {
            let path = format!("/proc/{pid}/task/{tid}/net/unix");
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if vanished(&e) => continue,
                Err(e) => {
                    self.undecided.push(format!("{path}: {e}"));
                    continue;
                }
            };
            let found = text.lines().find_map(|l| {
                let name = l.split_whitespace().last()?.strip_prefix('@')?;
                name.strip_prefix(self.marker.as_str())?.parse::<u64>().ok()
            });
            if !found.is_some_and(|ino| self.cookies.contains_key(&ino)) {
                self.undecided.push(format!(
                    "task {tid} of process {pid}: its network namespace may not be opened \
                     and is none of those found"
                ));
            }
        }
    }

    fn finish(mut self) -> Result<HashSet<u64>, HyblaError> {
        for ino in &self.named {
            if !self.cookies.contains_key(ino) {
                self.undecided.push(format!(
                    "net:[{ino}]: bind-mounted, but its mount is not reachable"
                ));
            }
        }
        drop(std::mem::take(&mut self.markers));
        if self.undecided.is_empty() {
            return Ok(self.cookies.into_values().collect());
        }
        self.undecided.sort();
        self.undecided.dedup();
        Err(HyblaError::PruneUndecided(self.undecided.join("; ")))
    }
}

/// Join `fd`'s network namespace (this thread only), read its cookie and bind the abstract
/// unix socket `marker` there.
fn cookie_and_marker(fd: &OwnedFd, marker: &str) -> io::Result<(u64, OwnedFd)> {
    // SAFETY: valid namespace fd; CLONE_NEWNET only switches the calling thread.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let cookie = sys::netns_cookie()?;
    Ok((cookie, sys::abstract_unix_socket(marker)?))
}

/// Not permitted to look (ptrace access to the task denied).
fn denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

/// The open failed because what it names is gone (a task exited, a mount was removed).
fn vanished(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ESRCH))
}

fn numeric_entries(dir: &Path) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Kernel threads belong to the initial PID namespace only: seeing kthreadd (PID 2, flag
/// PF_KTHREAD) means this /proc lists every process of the host.
fn proc_lists_whole_host() -> bool {
    const PF_KTHREAD: u64 = 0x0020_0000;
    let Ok(stat) = std::fs::read_to_string("/proc/2/stat") else {
        return false;
    };
    // Fields after the command name (which may contain spaces): state ppid pgrp session
    // tty_nr tpgid flags ...
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(6)?.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_KTHREAD != 0)
}

/// (nsfs inode, mount point) of every network namespace bind mount in a mountinfo text.
pub(crate) fn netns_mounts(mountinfo: &str) -> Vec<(u64, String)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            if right.split_whitespace().next()? != "nsfs" {
                return None;
            }
            let mut f = left.split_whitespace();
            let root = f.nth(3)?;
            let mount_point = f.next()?;
            let ino = root
                .strip_prefix("net:[")?
                .strip_suffix(']')?
                .parse()
                .ok()?;
            Some((ino, unescape_octal(mount_point)))
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash in paths as \ooo.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) if b[i] == b'\\' => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_netns_bind_mounts_only() {
        let info = "\
25 30 0:23 / /sys rw,nosuid shared:7 - sysfs sysfs rw
612 29 0:4 net:[4026532281] /run/netns/lab\\040a rw shared:345 - nsfs nsfs rw
613 29 0:4 mnt:[4026532290] /run/mnt/x rw shared:346 - nsfs nsfs rw
614 29 0:4 net:[4026532400] /var/run/docker/netns/abc rw - nsfs nsfs rw
";
        assert_eq!(
            netns_mounts(info),
            vec![
                (4026532281, "/run/netns/lab a".to_string()),
                (4026532400, "/var/run/docker/netns/abc".to_string()),
            ]
        );
    }

    #[test]
    fn unescapes_mountinfo_paths() {
        assert_eq!(unescape_octal("/a\\040b\\134c"), "/a b\\c");
        assert_eq!(unescape_octal("/plain\\9"), "/plain\\9");
    }
}
