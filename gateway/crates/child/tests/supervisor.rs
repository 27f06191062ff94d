//! The supervisor against a fake service whose "program" is the argv in its config file
//! (`sleep 60`, `false`): check, swap, start, ready, reap, restart with rollback, stop.
use perigee_child::{candidate_of, Installed, Running, Service, ServiceError, Supervisor};
use perigee_testkit::{wait_for, HUNG};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What the config asks of the fake: whether its program will be reported ready.
#[derive(Clone, Debug, PartialEq)]
struct FakeConfig {
    ready: bool,
}

struct Fake {
    dir: PathBuf,
    /// The running child's pid as the test last told it, for `shutdown` (a real service asks
    /// over a channel of its own); without one, the child is killed after the grace period.
    pid: Option<u32>,
    /// Whether `shutdown` is ignored (a hung program).
    hung: bool,
    /// How long the supervisor waits for the program to serve: short where the test wants the "did not
    /// serve" answer of a program that never will, HUNG where it waits for one to exit.
    ready_timeout: Duration,
    events: Arc<Mutex<Vec<&'static str>>>,
}

impl Fake {
    fn event(&self, e: &'static str) {
        self.events.lock().unwrap().push(e);
    }
}

impl Service for Fake {
    type Config = FakeConfig;

    fn conf(&self) -> PathBuf {
        self.dir.join("fake.conf")
    }
    fn write_conf(&self, path: &Path, text: &str) -> std::io::Result<()> {
        std::fs::write(path, text)
    }
    fn check(&self, file: &Path) -> Result<(), ServiceError> {
        let text = std::fs::read_to_string(file).unwrap();
        if text.contains("bad") {
            return Err(ServiceError::new("fake_check", "refused"));
        }
        Ok(())
    }
    fn prepare_dirs(&self, _cfg: &FakeConfig) -> Result<(), ServiceError> {
        std::fs::create_dir_all(&self.dir).map_err(ServiceError::io(Self::IO_CODE, "mkdir"))
    }
    fn stop_stale(&self) {
        self.event("stop_stale");
    }
    fn output_log(&self) -> (PathBuf, &'static str) {
        (self.dir.join("fake.out"), "fake.out")
    }
    fn command(&self) -> Command {
        let text = std::fs::read_to_string(self.conf()).unwrap();
        let argv: Vec<&str> = text.split_whitespace().collect();
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }
    fn ready(&self, cfg: &FakeConfig) -> bool {
        cfg.ready
    }
    fn ready_timeout(&self) -> Duration {
        self.ready_timeout
    }
    fn not_ready(&self, _cfg: &FakeConfig) -> String {
        "fake did not serve".into()
    }
    fn death_detail(&self) -> String {
        ": see its log".into()
    }
    fn exit_log(&self) -> PathBuf {
        self.dir.join("fake.out")
    }
    fn exited(&mut self, _child: &Child) {
        self.pid = None;
        self.event("exited");
    }
    fn shutdown(&self) {
        self.event("shutdown");
        if let (false, Some(pid)) = (self.hung, self.pid) {
            // SAFETY: kill(2) on the test's own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
        }
    }
    fn kill(&self, child: &mut Child) {
        self.event("kill");
        let _ = child.kill();
    }
    fn stopped(&mut self) {
        // Never signal a pid that may have been reused since.
        self.pid = None;
        self.event("stopped");
    }

    // Short, for the test.
    const NAME: &'static str = "fake";
    const IO_CODE: &'static str = "fake_io";
    const START_CODE: &'static str = "fake_start";
    const READY_SETTLE: Duration = ms(1);
    const READY_POLL: Duration = ms(10);
    const STOP_GRACE: Duration = ms(300);
    const STOP_POLL: Duration = ms(10);
}

impl Drop for Fake {
    /// After the supervisor's own drop has stopped the child.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn supervisor(tag: &str) -> (Supervisor<Fake>, Arc<Mutex<Vec<&'static str>>>) {
    let dir = std::env::temp_dir().join(format!("perigee-child-sup-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let events = Arc::new(Mutex::new(Vec::new()));
    let fake = Fake {
        dir,
        pid: None,
        hung: false,
        ready_timeout: ms(200),
        events: events.clone(),
    };
    (Supervisor::new(fake), events)
}

const READY: FakeConfig = FakeConfig { ready: true };
const NEVER_READY: FakeConfig = FakeConfig { ready: false };

/// Installs `text` with the restart the services use for a running child.
fn install(
    sup: &mut Supervisor<Fake>,
    cfg: &FakeConfig,
    text: &str,
) -> Result<Installed<bool>, ServiceError> {
    let r = sup.install(
        cfg,
        Vec::new(),
        text,
        |sup, old: Running<FakeConfig>, cand| {
            sup.restart(old, cfg, Vec::new(), cand)
                .map(|_| true)
                .map_err(|f| {
                    ServiceError::new(
                        f.error.code,
                        format!("{} restored={}", f.error.message, f.restored),
                    )
                })
        },
    );
    let pid = sup.running().map(|r| r.child.id());
    sup.service_mut().pid = pid;
    r
}

fn pid(sup: &Supervisor<Fake>) -> Option<u32> {
    sup.running().map(|r| r.child.id())
}

fn conf_text(sup: &Supervisor<Fake>) -> String {
    std::fs::read_to_string(sup.service().conf()).unwrap()
}

#[test]
fn checks_swaps_starts_and_keeps_what_runs_on_a_refused_or_failed_change() {
    let (mut sup, events) = supervisor("install");
    assert!(matches!(
        install(&mut sup, &READY, "sleep 60"),
        Ok(Installed::Started)
    ));
    let first = pid(&sup).unwrap();
    assert!(sup.is_running());
    assert!(!candidate_of(&sup.service().conf()).exists());
    // The same text again: nothing touched.
    assert!(matches!(
        install(&mut sup, &READY, "sleep 60"),
        Ok(Installed::Unchanged)
    ));
    assert_eq!(pid(&sup), Some(first));
    // Refused by the program's check: the candidate goes, the live config and child stay.
    let e = install(&mut sup, &READY, "sleep 61 bad").err().unwrap();
    assert_eq!(e.code, "fake_check");
    assert!(!candidate_of(&sup.service().conf()).exists());
    assert_eq!(
        (conf_text(&sup).as_str(), pid(&sup)),
        ("sleep 60", Some(first))
    );
    // A change whose child never serves: the previous config is put back and runs again.
    let e = install(&mut sup, &NEVER_READY, "sleep 62").err().unwrap();
    assert_eq!(
        (e.code, e.message.as_str()),
        ("fake_start", "fake did not serve restored=true")
    );
    assert_eq!(conf_text(&sup), "sleep 60");
    assert!(sup.is_running());
    assert_ne!(pid(&sup), Some(first), "the old config runs in a new child");
    assert_eq!(sup.running().unwrap().config, READY);
    // A change that starts: replaced.
    sup.service_mut().pid = pid(&sup);
    assert!(matches!(
        install(&mut sup, &READY, "sleep 63"),
        Ok(Installed::Replaced(true))
    ));
    assert_eq!(conf_text(&sup), "sleep 63");
    assert_eq!(sup.desired().unwrap().0, READY);
    assert!(events.lock().unwrap().contains(&"stop_stale"));
}

#[test]
fn a_child_that_dies_is_noticed_and_started_again_with_the_applied_config() {
    let (mut sup, events) = supervisor("reap");
    install(&mut sup, &READY, "sleep 60").unwrap();
    let first = pid(&sup).unwrap();
    // SAFETY: kill(2) on the test's own child.
    unsafe { libc::kill(first as libc::pid_t, libc::SIGKILL) };
    wait_for("the killed child noticed", HUNG, || {
        (!sup.is_running()).then_some(())
    });
    let exit = sup.last_exit().unwrap();
    assert!(
        exit.starts_with("fake exited unexpectedly (signal: 9"),
        "{exit}"
    );
    assert!(exit.ends_with("fake.out"), "{exit}");
    assert!(events.lock().unwrap().contains(&"exited"));
    assert_eq!(sup.ensure_running(), Ok(true));
    assert_ne!(pid(&sup), Some(first));
    assert_eq!(sup.last_exit(), None, "a start clears it");
    assert_eq!(sup.ensure_running(), Ok(false), "running: nothing to do");
    // Disabled: stopped and not brought back.
    sup.service_mut().pid = pid(&sup);
    sup.disable();
    assert!(!sup.is_running());
    assert_eq!(sup.ensure_running(), Ok(false));
}

#[test]
fn a_program_that_exits_at_once_fails_the_start_with_why() {
    let (mut sup, _) = supervisor("dies");
    // Never reported ready: the supervisor looks until it sees the child gone (however long a busy
    // machine takes to run `false`).
    sup.service_mut().ready_timeout = HUNG;
    let e = install(&mut sup, &NEVER_READY, "false").err().unwrap();
    assert_eq!(e.code, "fake_start");
    assert!(
        e.message
            .starts_with("fake exited unexpectedly (exit status: 1)")
            && e.message.ends_with(": see its log"),
        "{}",
        e.message
    );
    assert!(!sup.is_running());
    assert_eq!(sup.desired(), None, "a failed first start applies nothing");
}

#[test]
fn stop_asks_first_and_kills_after_the_grace_period() {
    let (mut sup, events) = supervisor("stop");
    install(&mut sup, &READY, "sleep 60").unwrap();
    sup.stop();
    assert_eq!(
        events.lock().unwrap().split_last().map(|(l, _)| *l),
        Some("stopped")
    );
    assert!(
        !events.lock().unwrap().contains(&"kill"),
        "it shut down when asked"
    );
    events.lock().unwrap().clear();
    // Hung: the ask is ignored, so it is killed after STOP_GRACE.
    assert_eq!(sup.ensure_running(), Ok(true));
    sup.service_mut().hung = true;
    let started = std::time::Instant::now();
    sup.stop();
    assert!(started.elapsed() >= Fake::STOP_GRACE);
    let seen: Vec<&str> = events
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|e| *e != "stop_stale")
        .collect();
    assert_eq!(seen, ["shutdown", "kill", "stopped"]);
    sup.stop();
    assert!(!sup.is_running(), "idempotent");
}
