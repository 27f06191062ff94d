//! The daemon's `--config` file follows the config in force: after each successful apply through
//! the control protocol (`PUT /v1/config`: the API, `perigee config apply`) the applied config is
//! written there, in the canonical form GET /v1/config answers, so the next start boots what the
//! gateway last ran. A refused or rolled-back apply leaves the file as it is. A config that cannot
//! be written still runs (the apply stands); the answer, /v1/health and the metrics say it is not
//! kept.
use super::atomic_file;
use super::config::GatewayConfig;
use super::log;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The mode of a config file the daemon creates (the packages ship it root:perigee 0640: it may
/// hold secrets, and the API's group reads it).
pub const NEW_FILE_MODE: u32 = 0o640;

/// What became of keeping an applied config (`persisted` and `persist_error` of PUT /v1/config).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    pub persisted: bool,
    pub error: Option<String>,
}

/// The `--config` file and whether it holds the config in force.
#[derive(Debug, Default)]
pub struct ConfigFile {
    path: Option<PathBuf>,
    /// Why the config in force is not the one in the file (its last write failed); None when it is.
    unsaved: Mutex<Option<String>>,
    /// Writes that failed since the daemon started.
    failures: AtomicU64,
}

impl ConfigFile {
    /// `path`: the daemon's `--config` (None: started without one; nothing is kept).
    pub fn new(path: Option<&str>) -> ConfigFile {
        ConfigFile {
            path: path.map(PathBuf::from),
            ..ConfigFile::default()
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Runs `apply`, and only when it succeeds writes `cfg` to the file. The caller holds the
    /// apply lock across this call, so the file follows the applies in the order they happened.
    pub fn apply_then_keep<E>(
        &self,
        cfg: &GatewayConfig,
        apply: impl FnOnce() -> Result<(), E>,
    ) -> Result<Kept, E> {
        apply()?;
        Ok(self.keep(cfg))
    }

    /// Writes `cfg` to the file (atomically: the old content or the new one, never a mix).
    fn keep(&self, cfg: &GatewayConfig) -> Kept {
        let Some(path) = &self.path else {
            return Kept {
                persisted: false,
                error: Some(
                    "the daemon runs without --config: this config lasts until it stops".into(),
                ),
            };
        };
        let revision = cfg.revision.as_str();
        match atomic_file::replace(path, render(cfg).as_bytes(), NEW_FILE_MODE) {
            Ok(()) => {
                *self.unsaved.lock().unwrap() = None;
                log::info(
                    "config kept for the next start",
                    json!({"path": path, "revision": revision}),
                );
                Kept {
                    persisted: true,
                    error: None,
                }
            }
            Err(e) => {
                let why = format!("cannot write {}: {e}", path.display());
                self.failures.fetch_add(1, Ordering::Relaxed);
                *self.unsaved.lock().unwrap() = Some(why.clone());
                log::error(
                    "config applied but not kept: a restart boots the file's older config",
                    json!({"path": path, "revision": revision, "error": why}),
                );
                Kept {
                    persisted: false,
                    error: Some(why),
                }
            }
        }
    }

    /// For /v1/health: the config in force is not in the file, because writing it failed.
    pub fn problem(&self, revision: &str) -> Option<String> {
        let why = self.unsaved.lock().unwrap().clone()?;
        Some(format!(
            "config revision '{revision}' is in force but not kept ({why}): a restart boots the older config in that file"
        ))
    }

    /// Whether the file holds the config in force (false without a file to keep it in).
    pub fn holds_config_in_force(&self) -> bool {
        self.path.is_some() && self.unsaved.lock().unwrap().is_none()
    }

    /// Writes that failed since the daemon started.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

/// The file's content: the canonical JSON (every default written out, as GET /v1/config answers),
/// indented for a person reading /etc.
pub fn render(cfg: &GatewayConfig) -> String {
    let mut text = serde_json::to_string_pretty(cfg).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests;
