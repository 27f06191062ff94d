//! The supervisor: one running child of a [`Service`] at a time, the config it runs, and the
//! config applied last (so a child that died is started again with it).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ServiceError;
use perigee_types::Cidr;
use serde::Serialize;

/// What is particular to one program: its files, its own config check, how it starts, how it
/// tells that it serves, how it is asked to stop. The supervisor calls these; everything
/// between them (the order, the timeouts' use, the rollback) is the supervisor's.
pub trait Service: Sized {
    /// The service's policy section (what a running child was started with).
    type Config: Clone;
    /// The program's name in messages ("squid", "unbound").
    const NAME: &'static str;
    /// The error code of a failed file operation ("squid_io").
    const IO_CODE: &'static str;
    /// The error code of a start that failed or never served ("squid_start").
    const START_CODE: &'static str;
    /// How long a graceful shutdown may take before the child is killed, and how often the
    /// child is looked at meanwhile.
    const STOP_GRACE: Duration;
    const STOP_POLL: Duration;
    /// The wait before the first readiness probe, and between probes.
    const READY_SETTLE: Duration;
    const READY_POLL: Duration;

    /// The live config file (a candidate is written next to it, `.new` added to its name).
    fn conf(&self) -> PathBuf;
    /// Writes a config file: a candidate, or the previous one put back.
    fn write_conf(&self, path: &Path, text: &str) -> std::io::Result<()>;
    /// The program's own verdict on a candidate config file.
    fn check(&self, file: &Path) -> Result<(), ServiceError>;
    /// Creates the directories the program needs, owned as it needs them.
    fn prepare_dirs(&self, cfg: &Self::Config) -> Result<(), ServiceError>;
    /// Stops what an earlier daemon, killed, left running (it would hold the ports).
    fn stop_stale(&self);
    /// Work before every start, once the directories exist.
    fn before_start(&self, _cfg: &Self::Config) -> Result<(), ServiceError> {
        Ok(())
    }
    /// The file the child's stdout and stderr are appended to, and its name in messages.
    fn output_log(&self) -> (PathBuf, &'static str);
    /// The program in the foreground on the live config (stdio, process group and signal mask
    /// are set by the supervisor).
    fn command(&self) -> Command;
    /// Whether the started program serves.
    fn ready(&self, cfg: &Self::Config) -> bool;
    fn ready_timeout(&self) -> Duration;
    /// Why it did not serve within `ready_timeout`.
    fn not_ready(&self, cfg: &Self::Config) -> String;
    /// Added to the exit message of a child that died before it served.
    fn death_detail(&self) -> String {
        String::new()
    }
    /// The log the message about an unexpected exit points to.
    fn exit_log(&self) -> PathBuf;
    /// The child exited on its own.
    fn exited(&mut self, _child: &Child) {}
    /// Before every stop, running child or not.
    fn before_stop(_sup: &mut Supervisor<Self>) {}
    /// Asks the running program to shut down.
    fn shutdown(&self);
    /// Kills a child that did not shut down within `STOP_GRACE`.
    fn kill(&self, child: &mut Child);
    /// After a child was stopped, gracefully or not.
    fn stopped(&mut self) {}
}

/// The running child and what it was started with.
pub struct Running<C> {
    pub child: Child,
    pub config: C,
    pub served: Vec<Cidr>,
}

/// What a service's apply did, as the control protocol reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApplyAction {
    Started,
    /// The running child took the new config in place.
    Reconfigured,
    /// A new child on the new config replaced the running one.
    Restarted,
    Stopped,
    /// Running with exactly this config already: nothing touched.
    Unchanged,
}

/// What `install` did; `Replaced` carries what the service's replace step returned.
pub enum Installed<R> {
    /// Running with exactly this config already: nothing touched.
    Unchanged,
    Started,
    Replaced(R),
}

/// A restart whose new child did not start: `restored` when the previous config is back and
/// its child serves again.
pub struct RestartFailed {
    pub error: ServiceError,
    pub restored: bool,
}

pub struct Supervisor<S: Service> {
    service: S,
    running: Option<Running<S::Config>>,
    /// The last config applied enabled (kept when the child dies, so `ensure_running` can
    /// bring it back).
    desired: Option<(S::Config, Vec<Cidr>)>,
    last_exit: Option<String>,
}

impl<S: Service> Supervisor<S> {
    pub fn new(service: S) -> Self {
        Supervisor {
            service,
            running: None,
            desired: None,
            last_exit: None,
        }
    }

    pub fn service(&self) -> &S {
        &self.service
    }

    pub fn service_mut(&mut self) -> &mut S {
        &mut self.service
    }

    /// The running child as last seen (`reap` or `is_running` look again).
    pub fn running(&self) -> Option<&Running<S::Config>> {
        self.running.as_ref()
    }

    /// The config and served subnets last applied enabled.
    pub fn desired(&self) -> Option<&(S::Config, Vec<Cidr>)> {
        self.desired.as_ref()
    }

    /// Why the last child exited on its own (cleared by the next start).
    pub fn last_exit(&self) -> Option<&str> {
        self.last_exit.as_deref()
    }

    /// Whether the child is alive.
    pub fn is_running(&mut self) -> bool {
        self.reap();
        self.running.is_some()
    }

    /// Notices a child that exited on its own.
    pub fn reap(&mut self) {
        if let Some(run) = self.running.as_mut() {
            if let Ok(Some(status)) = run.child.try_wait() {
                self.service.exited(&run.child);
                self.last_exit = Some(format!(
                    "{} exited unexpectedly ({status}); see {}",
                    S::NAME,
                    self.service.exit_log().display()
                ));
                self.running = None;
            }
        }
    }

    /// `text` (what the service rendered of `cfg`) goes through the program's own check and
    /// only then replaces the live config: a first start, or `replace` with the running child
    /// (the live config is still the old one then; `candidate` is the checked file). On any
    /// failure the running child and the live config stay as they were, and the candidate
    /// the check refused is removed.
    pub fn install<R>(
        &mut self,
        cfg: &S::Config,
        served: Vec<Cidr>,
        text: &str,
        replace: impl FnOnce(&mut Self, Running<S::Config>, &Path) -> Result<R, ServiceError>,
    ) -> Result<Installed<R>, ServiceError> {
        self.reap();
        if self.running.is_some()
            && std::fs::read_to_string(self.service.conf()).ok().as_deref() == Some(text)
        {
            if let Some(run) = self.running.as_mut() {
                run.config = cfg.clone();
                run.served = served.clone();
            }
            self.desired = Some((cfg.clone(), served));
            return Ok(Installed::Unchanged);
        }
        self.service.prepare_dirs(cfg)?;
        let conf = self.service.conf();
        let candidate = candidate_of(&conf);
        self.service
            .write_conf(&candidate, text)
            .map_err(ServiceError::io(
                S::IO_CODE,
                &format!("writing candidate {}", file_name(&conf)),
            ))?;
        if let Err(e) = self.service.check(&candidate) {
            let _ = std::fs::remove_file(&candidate);
            return Err(e);
        }
        let installed = match self.running.take() {
            None => {
                self.swap_in(&candidate)?;
                self.spawn(cfg, served.clone())?;
                Installed::Started
            }
            Some(old) => Installed::Replaced(replace(self, old, &candidate)?),
        };
        self.desired = Some((cfg.clone(), served));
        Ok(installed)
    }

    /// Stops the child and forgets the applied config (the service is off).
    pub fn disable(&mut self) {
        self.stop();
        self.desired = None;
    }

    /// Starts the child again with the last applied config if it died. Ok(true) when it did.
    pub fn ensure_running(&mut self) -> Result<bool, ServiceError> {
        self.reap();
        if self.running.is_some() {
            return Ok(false);
        }
        let Some((cfg, served)) = self.desired.clone() else {
            return Ok(false);
        };
        self.spawn(&cfg, served)?;
        Ok(true)
    }

    /// Replaces the running child `old` by one on the checked `candidate`: stop, swap in,
    /// start. When the new one does not start, the previous config is put back and started
    /// again rather than leave the service down.
    pub fn restart(
        &mut self,
        old: Running<S::Config>,
        cfg: &S::Config,
        served: Vec<Cidr>,
        candidate: &Path,
    ) -> Result<(), RestartFailed> {
        let (old_cfg, old_served) = (old.config.clone(), old.served.clone());
        let old_text = std::fs::read_to_string(self.service.conf()).ok();
        self.running = Some(old);
        self.stop();
        self.swap_in(candidate).map_err(|error| RestartFailed {
            error,
            restored: false,
        })?;
        if let Err(error) = self.spawn(cfg, served) {
            let mut restored = false;
            if let Some(t) = old_text {
                let _ = self.service.write_conf(&self.service.conf(), &t);
                restored = self.spawn(&old_cfg, old_served).is_ok();
            }
            return Err(RestartFailed { error, restored });
        }
        Ok(())
    }

    /// The checked candidate becomes the live config.
    pub fn swap_in(&self, candidate: &Path) -> Result<(), ServiceError> {
        std::fs::rename(candidate, self.service.conf()).map_err(ServiceError::io(
            S::IO_CODE,
            &format!("installing {}", file_name(&self.service.conf())),
        ))
    }

    /// Makes `run` the running child again (a service that changed it in place).
    pub fn put_back(&mut self, run: Running<S::Config>) {
        self.running = Some(run);
    }

    /// Takes the running child out of supervision (to kill it without a graceful shutdown).
    pub fn take_running(&mut self) -> Option<Running<S::Config>> {
        self.running.take()
    }

    /// Shuts the child down: asked first, killed after `STOP_GRACE`. Idempotent.
    pub fn stop(&mut self) {
        S::before_stop(self);
        let Some(mut run) = self.running.take() else {
            return;
        };
        self.service.shutdown();
        let deadline = Instant::now() + S::STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = run.child.try_wait() {
                self.service.stopped();
                return;
            }
            std::thread::sleep(S::STOP_POLL);
        }
        self.service.kill(&mut run.child);
        let _ = run.child.wait();
        self.service.stopped();
    }

    /// Starts the program on the live config and waits until it serves; a child that does
    /// not is stopped again.
    pub fn spawn(&mut self, cfg: &S::Config, served: Vec<Cidr>) -> Result<(), ServiceError> {
        self.service.stop_stale();
        self.service.prepare_dirs(cfg)?;
        self.service.before_start(cfg)?;
        let (log_path, log_name) = self.service.output_log();
        let opening = format!("opening {log_name}");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)
            .map_err(ServiceError::io(S::IO_CODE, &opening))?;
        let log2 = log
            .try_clone()
            .map_err(ServiceError::io(S::IO_CODE, &opening))?;
        let mut cmd = self.service.command();
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0);
        perigee_netsys::signals::TermSignals::unblock_in_child(&mut cmd);
        let child = cmd.spawn().map_err(|e| {
            ServiceError::new(S::START_CODE, format!("cannot start {}: {e}", S::NAME))
        })?;
        self.last_exit = None;
        self.running = Some(Running {
            child,
            config: cfg.clone(),
            served,
        });
        if let Err(m) = self.wait_ready(cfg) {
            self.stop();
            return Err(ServiceError::new(S::START_CODE, m));
        }
        Ok(())
    }

    /// Waits until the child serves (or died, or `ready_timeout` passed).
    pub fn wait_ready(&mut self, cfg: &S::Config) -> Result<(), String> {
        let deadline = Instant::now() + self.service.ready_timeout();
        if !S::READY_SETTLE.is_zero() {
            std::thread::sleep(S::READY_SETTLE);
        }
        loop {
            self.reap();
            if self.running.is_none() {
                return Err(format!(
                    "{}{}",
                    self.last_exit
                        .clone()
                        .unwrap_or_else(|| format!("{} exited", S::NAME)),
                    self.service.death_detail()
                ));
            }
            if self.service.ready(cfg) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.service.not_ready(cfg));
            }
            std::thread::sleep(S::READY_POLL);
        }
    }
}

/// Where a candidate for the config file `conf` is written: `conf` with `.new` added.
pub fn candidate_of(conf: &Path) -> PathBuf {
    let mut name = conf.as_os_str().to_owned();
    name.push(".new");
    PathBuf::from(name)
}

/// The config file's name, for messages.
fn file_name(conf: &Path) -> String {
    conf.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl<S: Service> Drop for Supervisor<S> {
    fn drop(&mut self) {
        self.stop();
    }
}
