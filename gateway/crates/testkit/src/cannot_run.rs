//! Perigee's one convention for a test that cannot run here (not root, or a tool `scripts/setup`
//! installs is missing): it says `SKIPPED: <why>` and passes, unless `PERIGEE_REQUIRE_ROOT_TESTS`
//! is set (`.ci/run` sets it), where it fails naming what is missing. The Python suites (the
//! `needs_root` marker, `satlab.testing`) and the Makefiles follow the same rule (DEVELOPERS.md).

/// The variable that turns "cannot run here" from a skip into a failure.
pub const REQUIRE: &str = "PERIGEE_REQUIRE_ROOT_TESTS";

/// Says why the test cannot run and returns false (the test then returns); panics instead when
/// `PERIGEE_REQUIRE_ROOT_TESTS` is set.
pub fn cannot_run(why: &str) -> bool {
    if std::env::var_os(REQUIRE).is_some_and(|v| !v.is_empty()) {
        panic!("cannot run: {why} ({REQUIRE} is set: a test that cannot run fails)");
    }
    eprintln!("SKIPPED: {why}");
    false
}

/// Whether a test that needs root (`what`: for what) can run: false after saying SKIPPED when
/// not root, a panic when root tests are required.
pub fn root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let is_root = unsafe { libc::geteuid() } == 0;
    is_root || cannot_run(&format!("needs root ({what})"))
}
