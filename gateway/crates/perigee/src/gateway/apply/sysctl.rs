//! The `sysctl` step: the config's sysctls (allow-listed by validation), written under
//! /proc/sys. The value each had before the daemon first wrote it is kept, so a key a later
//! config drops, and a clean stop, put it back.
use super::{ApplyError, ApplyStep};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const PROC_SYS: &str = "/proc/sys";

pub struct SysctlStep<'a> {
    new: &'a BTreeMap<String, String>,
    /// The sysctls of the config in force.
    prev: Option<&'a BTreeMap<String, String>>,
    /// Key -> its value before the daemon first wrote it.
    originals: BTreeMap<String, String>,
    /// (key, value before this apply) of each key written, in order.
    written: Vec<(String, String)>,
    /// Where the keys are files (/proc/sys; a scratch directory in tests).
    root: PathBuf,
}

impl<'a> SysctlStep<'a> {
    pub fn new(
        new: &'a BTreeMap<String, String>,
        prev: Option<&'a BTreeMap<String, String>>,
        originals: BTreeMap<String, String>,
    ) -> Self {
        SysctlStep {
            new,
            prev,
            originals,
            written: Vec::new(),
            root: PathBuf::from(PROC_SYS),
        }
    }

    /// The originals to keep for the next apply and for teardown.
    pub fn into_originals(self) -> BTreeMap<String, String> {
        self.originals
    }
}

impl ApplyStep for SysctlStep<'_> {
    fn name(&self) -> &'static str {
        "sysctl"
    }

    fn apply(&mut self) -> Result<(), ApplyError> {
        for (k, v) in self.new {
            // Either failure puts back the keys written before it.
            let before = match read_under(&self.root, k) {
                Ok(b) => b,
                Err(m) => {
                    self.rollback();
                    return Err(ApplyError::at("sysctl", m));
                }
            };
            if let Err(m) = write_under(&self.root, k, v) {
                self.rollback();
                return Err(ApplyError::at("sysctl", m));
            }
            self.originals
                .entry(k.clone())
                .or_insert_with(|| before.clone());
            self.written.push((k.clone(), before));
        }
        // Keys the previous config set and this one no longer does go back to their originals.
        if let Some(p) = self.prev {
            for k in p.keys().filter(|k| !self.new.contains_key(*k)) {
                if let Some(orig) = self.originals.remove(k) {
                    let _ = write_under(&self.root, k, &orig);
                }
            }
        }
        Ok(())
    }

    fn rollback(&mut self) {
        for (k, v) in self.written.iter().rev() {
            let _ = write_under(&self.root, k, v);
        }
    }
}

/// Every key back to the value it had before the daemon first wrote it (a clean stop).
pub fn restore_originals(originals: &BTreeMap<String, String>) {
    for (k, v) in originals {
        let _ = write_under(Path::new(PROC_SYS), k, v);
    }
}

/// A sysctl's value now, e.g. `read_sysctl("net.ipv4.tcp_slow_start_after_idle")`.
pub fn read_sysctl(key: &str) -> Result<String, String> {
    read_under(Path::new(PROC_SYS), key)
}

fn path_under(root: &Path, key: &str) -> PathBuf {
    root.join(key.replace('.', "/"))
}

fn read_under(root: &Path, key: &str) -> Result<String, String> {
    std::fs::read_to_string(path_under(root, key))
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{key}: {e}"))
}

fn write_under(root: &Path, key: &str, value: &str) -> Result<(), String> {
    std::fs::write(path_under(root, key), value).map_err(|e| format!("{key}={value}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch /proc/sys with `keys` (dotted) holding their values.
    fn scratch(name: &str, keys: &[(&str, &str)]) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("perigee-sysctl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (k, v) in keys {
            let p = path_under(&root, k);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        }
        root
    }

    fn step<'a>(new: &'a BTreeMap<String, String>, root: &Path) -> SysctlStep<'a> {
        let mut s = SysctlStep::new(new, None, BTreeMap::new());
        s.root = root.to_path_buf();
        s
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_key_that_cannot_be_read_puts_back_the_ones_written_before_it() {
        let root = scratch("unreadable", &[("net.a", "1")]);
        // BTreeMap order: net.a is written, then net.b (absent) cannot be read.
        let new = map(&[("net.a", "0"), ("net.b", "0")]);
        let e = step(&new, &root).apply().unwrap_err();
        assert_eq!(e.step, "sysctl");
        assert!(e.message.starts_with("net.b: "), "{}", e.message);
        assert_eq!(read_under(&root, "net.a").unwrap(), "1");
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_rollback_puts_back_what_the_apply_found_and_originals_are_kept() {
        let root = scratch("rollback", &[("net.a", "1"), ("net.b", "5")]);
        let new = map(&[("net.a", "0"), ("net.b", "6")]);
        let mut s = step(&new, &root);
        s.apply().unwrap();
        assert_eq!(read_under(&root, "net.b").unwrap(), "6");
        s.rollback();
        assert_eq!(read_under(&root, "net.a").unwrap(), "1");
        assert_eq!(read_under(&root, "net.b").unwrap(), "5");
        assert_eq!(s.into_originals(), map(&[("net.a", "1"), ("net.b", "5")]));
        std::fs::remove_dir_all(root).unwrap();
    }
}
