//! Named network namespaces that live as long as a test needs them.
use std::process::Command;

use crate::run;

/// Holds the namespaces `ip netns add`ed by `new`; deletes them when dropped, also when the
/// test panics (the veths in them go too).
pub struct NetnsGuard {
    names: Vec<String>,
}

impl NetnsGuard {
    /// Deletes what an earlier run that died may have left under these names, then adds them
    /// (panicking if `ip netns add` fails).
    pub fn new(names: &[&str]) -> NetnsGuard {
        let guard = NetnsGuard {
            names: names.iter().map(|n| n.to_string()).collect(),
        };
        guard.delete();
        for ns in names {
            run(&["ip", "netns", "add", ns]);
        }
        guard
    }

    /// `new`, then each namespace's loopback brought up.
    pub fn with_loopback_up(names: &[&str]) -> NetnsGuard {
        let guard = NetnsGuard::new(names);
        for ns in names {
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        guard
    }

    /// Best effort: a name that does not exist is not an error.
    fn delete(&self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        self.delete();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn exists(ns: &str) -> bool {
        Path::new("/run/netns").join(ns).exists()
    }

    #[test]
    fn replaces_leftovers_and_deletes_on_drop() {
        const NAMES: [&str; 2] = ["pt-tk-a", "pt-tk-b"];
        // A leftover of a run that died: `new` must not trip over it.
        let _ = Command::new("ip").args(["netns", "del", NAMES[0]]).output();
        run(&["ip", "netns", "add", NAMES[0]]);
        let guard = NetnsGuard::new(&NAMES);
        assert!(NAMES.iter().all(|ns| exists(ns)));
        drop(guard);
        assert!(NAMES.iter().all(|ns| !exists(ns)));
    }

    #[test]
    fn loopback_up() {
        const NAMES: [&str; 2] = ["pt-tk-lo-a", "pt-tk-lo-b"];
        let guard = NetnsGuard::with_loopback_up(&NAMES);
        for ns in NAMES {
            let link = run(&["ip", "-n", ns, "-o", "link", "show", "lo"]);
            assert!(link.contains(",UP"), "{ns}: {link}");
        }
        drop(guard);
        assert!(NAMES.iter().all(|ns| !exists(ns)));
    }
}
