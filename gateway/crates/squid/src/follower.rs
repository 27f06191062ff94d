//! The access-log follower: a thread that moves what Squid logs into the request ring, the
//! counters and the record feed, as the manager's view of the requests it served.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::access_log::{parse_access_line, AccessRecord, RequestCounters, RequestRing};
use crate::tailer::AccessLogTailer;

struct Shared {
    tailer: Mutex<AccessLogTailer>,
    ring: Mutex<RequestRing>,
    counters: Mutex<RequestCounters>,
    feed: RecordFeed,
}

/// Requests as they are logged, for one consumer that joins them to Squid's connections
/// (the daemon's live cache flows). Bounded: the oldest are dropped when nobody takes them.
#[derive(Clone, Default)]
pub struct RecordFeed(Arc<Mutex<VecDeque<AccessRecord>>>);

/// How many logged requests the feed holds for its consumer.
const FEED_CAPACITY: usize = 20_000;

impl RecordFeed {
    fn push(&self, r: &AccessRecord) {
        let mut q = lock(&self.0);
        if q.len() == FEED_CAPACITY {
            q.pop_front();
        }
        q.push_back(r.clone());
    }

    /// Everything logged since the last call, oldest first.
    pub fn take(&self) -> Vec<AccessRecord> {
        lock(&self.0).drain(..).collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Moves new access-log lines into the ring and counters.
    fn pump(&self) {
        let lines = match lock(&self.tailer).poll() {
            Ok(l) => l,
            Err(_) => return,
        };
        if lines.is_empty() {
            return;
        }
        let mut ring = lock(&self.ring);
        let mut counters = lock(&self.counters);
        for line in lines {
            match parse_access_line(&line) {
                Ok(rec) => {
                    counters.add(&rec);
                    self.feed.push(&rec);
                    ring.push(rec);
                }
                Err(_) => counters.unparsed_lines += 1,
            }
        }
    }
}

/// Follows access.log on a thread of its own (every `every`) until dropped; `pump` catches up
/// at once.
pub(crate) struct LogFollower {
    shared: Arc<Shared>,
    stop_flag: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LogFollower {
    pub(crate) fn start(access_log: PathBuf, ring_capacity: usize, every: Duration) -> Self {
        let shared = Arc::new(Shared {
            tailer: Mutex::new(AccessLogTailer::new(access_log, false)),
            ring: Mutex::new(RequestRing::new(ring_capacity)),
            counters: Mutex::new(RequestCounters::default()),
            feed: RecordFeed::default(),
        });
        let stop_flag = Arc::new(AtomicBool::new(false));
        let thread = {
            let (shared, stop) = (shared.clone(), stop_flag.clone());
            std::thread::Builder::new()
                .name("squid-log".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        shared.pump();
                        std::thread::sleep(every);
                    }
                })
                .ok()
        };
        LogFollower {
            shared,
            stop_flag,
            thread,
        }
    }

    /// Moves new access-log lines into the ring and counters now.
    pub(crate) fn pump(&self) {
        self.shared.pump();
    }

    pub(crate) fn ring(&self) -> MutexGuard<'_, RequestRing> {
        lock(&self.shared.ring)
    }

    pub(crate) fn counters(&self) -> MutexGuard<'_, RequestCounters> {
        lock(&self.shared.counters)
    }

    pub(crate) fn feed(&self) -> RecordFeed {
        self.shared.feed.clone()
    }
}

impl Drop for LogFollower {
    fn drop(&mut self) {
        self.stop_flag.store(true, Ordering::Relaxed);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}
