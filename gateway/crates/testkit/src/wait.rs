//! Waiting for something a test expects to happen.
use std::time::{Duration, Instant};

/// How long a test waits for something that takes well under a second on an idle machine before
/// it calls it hung. Generous on purpose: on a loaded machine things are slow, not wrong; how fast
/// they are is measured by the benchmarks (`make bench`, `make soak`), beside their baselines.
pub const HUNG: Duration = Duration::from_secs(60);

/// Polls `f` every 50 ms until it returns `Some`, for at most `within`; panics naming `what` when
/// it never does. The value and how long it took.
pub fn wait_for<T>(
    what: &str,
    within: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> (T, Duration) {
    let started = Instant::now();
    loop {
        if let Some(v) = f() {
            return (v, started.elapsed());
        }
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
