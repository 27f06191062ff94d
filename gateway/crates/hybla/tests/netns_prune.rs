//! Root-only: `prune_stale_netns` against the running kernel. Entries are written as a gateway
//! writes its own (set_netns_params from a thread inside the namespace) for namespaces held
//! alive in every way the scan must see (a bind mount under /run/netns, only a thread, only an
//! open namespace file, the test's own namespace) and for namespaces that are gone (deleted
//! with `ip netns del`, or whose last thread exited): the prune removes exactly the latter.
//! Shares the lock file of the other kernel tests: the registration is global kernel state.
use std::collections::HashSet;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::mpsc;
use std::thread;

mod common;
use common::in_netns;
use perigee_hybla::{HyblaParams, Implementation, NetnsParams};
use perigee_testkit::NetnsGuard;

const GONE: &str = "pt-hyp-gone";
const LIVE: &str = "pt-hyp-live";
const PARAMS: HyblaParams = HyblaParams {
    rtt0_ms: 25,
    base_rtt_ms: 300,
};
const CEILING: u32 = 11;

fn write_own() -> u64 {
    perigee_hybla::set_netns_params(PARAMS, CEILING).expect("set_netns_params")
}

fn write_in(ns: &str) -> u64 {
    in_netns(ns, write_own).join().unwrap()
}

/// In a new namespace that dies with this thread: the entry a SIGKILLed gateway leaves.
fn write_in_throwaway() -> u64 {
    thread::spawn(|| {
        unshare_net();
        write_own()
    })
    .join()
    .unwrap()
}

fn unshare_net() {
    // SAFETY: moves only the calling thread into a fresh network namespace.
    assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
}

/// A namespace whose only task is a thread (not a process leader): alive until `release`.
fn write_in_thread() -> (u64, mpsc::Sender<()>, thread::JoinHandle<()>) {
    let (cookie_tx, cookie_rx) = mpsc::channel();
    let (release, wait) = mpsc::channel::<()>();
    let h = thread::spawn(move || {
        unshare_net();
        cookie_tx.send(write_own()).unwrap();
        let _ = wait.recv();
    });
    (cookie_rx.recv().unwrap(), release, h)
}

/// A namespace no task is in, kept alive only by the open namespace file returned.
fn write_in_held_by_fd() -> (u64, File) {
    thread::spawn(|| {
        unshare_net();
        let fd = File::open("/proc/thread-self/ns/net").expect("open own netns");
        (write_own(), fd)
    })
    .join()
    .unwrap()
}

/// The cookie of the initial network namespace: kthreadd's (PID 2; kernel threads are there).
fn init_netns_cookie() -> u64 {
    thread::spawn(|| {
        let f = File::open("/proc/2/ns/net").expect("open /proc/2/ns/net");
        // SAFETY: valid namespace fd; CLONE_NEWNET only switches this thread.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
        perigee_hybla::netns_cookie().unwrap()
    })
    .join()
    .unwrap()
}

fn entries() -> Vec<NetnsParams> {
    perigee_hybla::status().netns
}

fn has_entry(cookie: u64) -> bool {
    entries().iter().any(|e| e.cookie == cookie)
}

#[test]
fn prune_removes_entries_of_gone_namespaces_only() {
    let Some(_lock) = common::root_and_lock() else {
        return;
    };
    let st = perigee_hybla::load().expect("load");
    if st.implementation == Implementation::Kernel {
        eprintln!("kernel has its own tcp_hybla: per-namespace entries are BPF-only");
        assert_eq!(
            perigee_hybla::prune_stale_netns().unwrap(),
            perigee_hybla::PruneReport::default()
        );
        return;
    }
    let _own_restored = OwnEntry(st.own_netns().copied());
    let nets = NetnsGuard::new(&[GONE, LIVE]);

    let gone = write_in(GONE);
    let live = write_in(LIVE);
    let own = write_own();
    let throwaway = write_in_throwaway();
    let (in_thread, release, thread_handle) = write_in_thread();
    let (held, held_fd) = write_in_held_by_fd();
    let all = [gone, live, own, throwaway, in_thread, held];
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len());
    assert!(all.iter().all(|&c| has_entry(c)), "{:?}", entries());

    // The gateway of GONE was killed and its namespace deleted: its entry stays...
    Command::new("ip")
        .args(["netns", "del", GONE])
        .status()
        .unwrap();
    assert!(has_entry(gone));
    let alive = perigee_hybla::live_netns_cookies().expect("scan");
    for c in [live, own, in_thread, held] {
        assert!(alive.contains(&c), "{c} is live: {alive:?}");
    }
    assert!(!alive.contains(&gone) && !alive.contains(&throwaway));
    assert!(
        alive.contains(&init_netns_cookie()),
        "the initial namespace is live"
    );

    // ...until a prune, which removes those of gone namespaces and nothing else.
    let report = perigee_hybla::prune_stale_netns().expect("prune");
    for c in [gone, throwaway] {
        assert!(report.removed.contains(&c), "{c} removed: {report:?}");
        assert!(!has_entry(c), "{c} still listed");
    }
    for c in [live, own, in_thread, held] {
        assert!(report.kept.contains(&c), "{c} kept: {report:?}");
        assert!(has_entry(c), "{c} lost");
    }
    assert!(report.live_namespaces >= 4, "{report:?}");
    let again = perigee_hybla::prune_stale_netns().expect("prune again");
    assert!(again.removed.is_empty(), "{again:?}");

    // An entry written after the keys were read is never removed by that prune, even when
    // its namespace is already gone by the scan; the next prune removes it.
    let mut late = None;
    let report =
        perigee_hybla::prune_stale_netns_observed(|| late = Some(write_in_throwaway())).unwrap();
    let late = late.unwrap();
    assert!(
        !report.removed.contains(&late) && has_entry(late),
        "{report:?}"
    );
    let report = perigee_hybla::prune_stale_netns().unwrap();
    assert!(report.removed.contains(&late), "{report:?}");

    // Once the thread exits and the file is closed, theirs go too.
    release.send(()).unwrap();
    thread_handle.join().unwrap();
    drop(held_fd);
    drop(nets);
    let report = perigee_hybla::prune_stale_netns().unwrap();
    for c in [in_thread, held, live] {
        assert!(report.removed.contains(&c), "{c} removed: {report:?}");
    }
    assert!(report.kept.contains(&own), "{report:?}");
}

/// The test's own namespace's entry as it was before the test, put back when dropped (also
/// when the test fails).
struct OwnEntry(Option<NetnsParams>);

impl Drop for OwnEntry {
    fn drop(&mut self) {
        let _ = match self.0 {
            Some(e) => perigee_hybla::set_netns_params(e.params(), e.cwnd_max).map(|_| ()),
            None => perigee_hybla::unset_netns_params(None).map(|_| ()),
        };
    }
}
