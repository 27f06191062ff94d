//! The `sysctl` step: the config's sysctls (allow-listed by validation), written under
//! /proc/sys. The value each had before the daemon first wrote it is kept, so a key a later
//! config drops, and a clean stop, put it back.
use super::{ApplyError, ApplyStep};
use std::collections::BTreeMap;

pub struct SysctlStep<'a> {
    new: &'a BTreeMap<String, String>,
    /// The sysctls of the config in force.
    prev: Option<&'a BTreeMap<String, String>>,
    /// Key -> its value before the daemon first wrote it.
    originals: BTreeMap<String, String>,
    /// (key, value before this apply) of each key written, in order.
    written: Vec<(String, String)>,
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
            let before = read_sysctl(k).map_err(|m| ApplyError::at("sysctl", m))?;
            if let Err(m) = write_sysctl(k, v) {
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
                    let _ = write_sysctl(k, &orig);
                }
            }
        }
        Ok(())
    }

    fn rollback(&mut self) {
        for (k, v) in self.written.iter().rev() {
            let _ = write_sysctl(k, v);
        }
    }
}

/// Every key back to the value it had before the daemon first wrote it (a clean stop).
pub fn restore_originals(originals: &BTreeMap<String, String>) {
    for (k, v) in originals {
        let _ = write_sysctl(k, v);
    }
}

fn sysctl_path(key: &str) -> String {
    format!("/proc/sys/{}", key.replace('.', "/"))
}

pub fn read_sysctl(key: &str) -> Result<String, String> {
    std::fs::read_to_string(sysctl_path(key))
        .map(|s| s.trim().to_string())
        .map_err(|e| format!("{key}: {e}"))
}

fn write_sysctl(key: &str, value: &str) -> Result<(), String> {
    std::fs::write(sysctl_path(key), value).map_err(|e| format!("{key}={value}: {e}"))
}
