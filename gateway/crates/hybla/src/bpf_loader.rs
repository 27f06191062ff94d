//! Loads the embedded BPF objects, pins their maps under /sys/fs/bpf/perigee and registers the
//! struct_ops without a link: the kernel then holds the registration (and a map reference)
//! after this process exits. Unregistering deletes the struct_ops map's element.
//!
//! Two objects: `hybla` (pins in PIN_DIR) and `hybla_ld` (pins in LD_PIN_DIR), which reuses the
//! pinned parameter maps so both read the same operator parameters. hybla_ld's info map records
//! the build version and the IDs of the maps it reads: a registration is replaced only by a
//! strictly newer build, or when the pinned maps are no longer the ones it reads (an older
//! Perigee unloaded and reloaded hybla), so builds of two versions on one host never take turns.
use std::ffi::c_void;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::libbpf::{self, cstr};
use crate::HyblaError;

pub const PIN_DIR: &str = "/sys/fs/bpf/perigee";
pub const OPS_PIN: &str = "/sys/fs/bpf/perigee/hybla_ops";
pub const PARAMS_PIN: &str = "/sys/fs/bpf/perigee/hybla_params";
pub const NETNS_PARAMS_PIN: &str = "/sys/fs/bpf/perigee/hybla_ns_params";
/// Entries of the per-namespace map: HYBLA_NETNS_MAX in bpf/hybla_params.h.
pub const NETNS_MAX: u32 = 256;
/// The loss-differentiating congestion control's name and pins. A directory of its own, so an
/// older Perigee's `unload` (which removes PIN_DIR) leaves it whole.
pub const LD_NAME: &str = "hybla_ld";
pub const LD_PIN_DIR: &str = "/sys/fs/bpf/perigee-hybla-ld";
pub const LD_OPS_PIN: &str = "/sys/fs/bpf/perigee-hybla-ld/ops";
pub const LD_INFO_PIN: &str = "/sys/fs/bpf/perigee-hybla-ld/info";
/// This build's BPF version (HYBLA_BPF_VERSION in bpf/hybla_params.h): 1 host-wide parameters,
/// 2 per-namespace parameters, 3 hybla_ld, 4 hybla_ld re-learns a stale minimum RTT, 5 hybla_ld's
/// rounds on a grid the flows of a path share, 6 hybla_ld's rho at least `fixed::LD_RHO_MIN`.
pub const BPF_VERSION: u32 = 6;
/// Serialises loads and unloads of Perigee builds that know it (older ones do not).
const LOAD_LOCK: &str = "/run/lock/perigee-hybla-load.lock";

static BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hybla.bpf.o"));
static LD_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hybla_ld.bpf.o"));

/// Mirror of `struct hybla_ld_info` in bpf/hybla_params.h.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LdInfo {
    pub version: u32,
    pub params_map_id: u32,
    pub netns_map_id: u32,
    pub reserved: u32,
}

/// Mirror of `struct hybla_params` in bpf/hybla_params.h.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParamsValue {
    pub rtt0_us: u32,
    pub base_rtt_us: u32,
    pub generation: u32,
    /// Operator cwnd ceiling in segments; 0 = only the built-in 65536.
    pub cwnd_max: u32,
}

fn bpf_err(step: &'static str, e: io::Error) -> HyblaError {
    HyblaError::Bpf { step, source: e }
}

/// Closes the libbpf object however loading ends; the pins and the registration survive it.
struct Object(*mut libbpf::BpfObject);

impl Drop for Object {
    fn drop(&mut self) {
        unsafe { libbpf::bpf_object__close(self.0) }
    }
}

impl Object {
    fn map(&self, name: &str) -> Result<*mut libbpf::BpfMap, HyblaError> {
        let n = cstr(name);
        let m = unsafe { libbpf::bpf_object__find_map_by_name(self.0, n.as_ptr()) };
        if m.is_null() {
            return Err(HyblaError::Bpf {
                step: "find map",
                source: io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("map {name} missing from the BPF object"),
                ),
            });
        }
        Ok(m)
    }
}

fn pin(map: *mut libbpf::BpfMap, path: &str) -> Result<(), HyblaError> {
    let p = cstr(path);
    libbpf::check(unsafe { libbpf::bpf_map__pin(map, p.as_ptr()) })
        .map(|_| ())
        .map_err(|e| bpf_err("pin map", e))
}

fn open_object(bytes: &'static [u8]) -> Result<Object, HyblaError> {
    let obj = unsafe {
        libbpf::bpf_object__open_mem(
            bytes.as_ptr().cast::<c_void>(),
            bytes.len(),
            std::ptr::null(),
        )
    };
    if obj.is_null() {
        return Err(bpf_err("open BPF object", io::Error::last_os_error()));
    }
    Ok(Object(obj))
}

/// Register a struct_ops map without a link: the kernel keeps it after this process exits.
fn register(ops: *mut libbpf::BpfMap) -> Result<(), HyblaError> {
    let link = unsafe { libbpf::bpf_map__attach_struct_ops(ops) };
    if link.is_null() {
        return Err(bpf_err("register struct_ops", io::Error::last_os_error()));
    }
    // Keep the registration when the link object goes away with this process.
    unsafe {
        libbpf::bpf_link__disconnect(link);
        libbpf::bpf_link__destroy(link);
    }
    Ok(())
}

/// Unregister the struct_ops pinned at `pin`, if any. ENOENT/EINVAL: pinned but no longer
/// registered, nothing to do.
fn unregister(pin: &str) -> Result<(), HyblaError> {
    if !Path::new(pin).exists() {
        return Ok(());
    }
    let fd = libbpf::obj_get(pin).map_err(|e| bpf_err("open pinned struct_ops", e))?;
    match libbpf::map_delete(fd.as_raw_fd(), &0u32) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EINVAL)) => Ok(()),
        Err(e) => Err(bpf_err("unregister struct_ops", e)),
    }
}

/// An exclusive lock on LOAD_LOCK for one load or unload (None where /run/lock is missing:
/// the load then runs unserialised, as older builds always did).
pub fn load_lock() -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOAD_LOCK)
        .ok()?;
    // SAFETY: flock on an fd we own; released when the File is dropped.
    (unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0).then_some(f)
}

/// Load, pin, set initial params, register hybla. On failure nothing of ours is left behind.
pub fn load(initial: ParamsValue) -> Result<(), HyblaError> {
    let obj = open_object(BPF_OBJECT)?;
    libbpf::check(unsafe { libbpf::bpf_object__load(obj.0) })
        .map_err(|e| bpf_err("load BPF object (verifier log above, if any)", e))?;
    let params = obj.map("hybla_params")?;
    let netns_params = obj.map("hybla_ns_params")?;
    let ops = obj.map("hybla")?;

    let result = (|| {
        pin(params, PARAMS_PIN)?;
        pin(netns_params, NETNS_PARAMS_PIN)?;
        let fd = unsafe { libbpf::bpf_map__fd(params) };
        libbpf::map_update(fd, &0u32, &initial).map_err(|e| bpf_err("write params", e))?;
        pin(ops, OPS_PIN)?;
        register(ops)
    })();
    if result.is_err() {
        remove_pins();
    }
    result
}

/// Unregister ours (hybla_ld and hybla, found through their pins) and remove the pins.
/// Idempotent.
pub fn unload() -> Result<(), HyblaError> {
    unregister(LD_OPS_PIN)?;
    remove_ld_pins();
    unregister(OPS_PIN)?;
    remove_pins();
    Ok(())
}

pub fn remove_ld_pins() {
    for p in [LD_OPS_PIN, LD_INFO_PIN] {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_dir(LD_PIN_DIR);
}

/// What is registered as hybla_ld, seen from this build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LdRegistration {
    /// Not registered (a pin left without a registration is debris).
    Missing,
    /// Registered by a build of this version over the pinned parameter maps.
    Current,
    /// Registered by a newer build: left alone.
    Newer(u32),
    /// Ours but to be replaced: why.
    Stale(String),
    /// Registered, but not through our pin: not ours, left alone.
    Foreign,
}

fn pinned_map_id(path: &str) -> Option<u32> {
    let fd = libbpf::obj_get(path).ok()?;
    libbpf::map_id(fd.as_raw_fd()).ok()
}

pub fn read_ld_info() -> Result<LdInfo, HyblaError> {
    let fd = libbpf::obj_get(LD_INFO_PIN).map_err(|e| bpf_err("open pinned hybla_ld info", e))?;
    libbpf::map_lookup(fd.as_raw_fd(), &0u32).map_err(|e| bpf_err("read hybla_ld info", e))
}

/// The registration's state: `registered` says whether hybla_ld is in the kernel's list.
pub fn ld_registration(registered: bool) -> LdRegistration {
    if !registered {
        return LdRegistration::Missing;
    }
    if !Path::new(LD_OPS_PIN).exists() {
        return LdRegistration::Foreign;
    }
    let info = match read_ld_info() {
        Ok(i) => i,
        Err(e) => return LdRegistration::Stale(format!("its version is unreadable: {e}")),
    };
    if info.version > BPF_VERSION {
        return LdRegistration::Newer(info.version);
    }
    if info.version < BPF_VERSION {
        return LdRegistration::Stale(format!(
            "registered by an older build (version {})",
            info.version
        ));
    }
    let maps = (pinned_map_id(PARAMS_PIN), pinned_map_id(NETNS_PARAMS_PIN));
    if maps != (Some(info.params_map_id), Some(info.netns_map_id)) {
        return LdRegistration::Stale(
            "the pinned parameter maps were replaced (hybla was unloaded and loaded again), so it \
             no longer reads the operator's parameters"
                .into(),
        );
    }
    LdRegistration::Current
}

/// Register hybla_ld over the pinned parameter maps (pinning new ones, with `initial` as the
/// host-wide entry, when there are none: the kernel's tcp_hybla is the registered hybla).
/// Replaces a stale registration of ours; leaves a current or newer one, or one that is not
/// ours, alone. On failure nothing it pinned is left behind.
pub fn load_ld(initial: ParamsValue, registered: bool) -> Result<(), HyblaError> {
    match ld_registration(registered) {
        LdRegistration::Current | LdRegistration::Newer(_) => return Ok(()),
        LdRegistration::Foreign => {
            return Err(HyblaError::Unsupported(format!(
                "a BPF `{LD_NAME}` not loaded by perigee is registered (no pin at {LD_OPS_PIN}); \
                 perigee leaves it alone"
            )))
        }
        LdRegistration::Stale(_) => unregister(LD_OPS_PIN)?,
        LdRegistration::Missing => {}
    }
    remove_ld_pins();
    let obj = open_object(LD_OBJECT)?;
    let params = obj.map("hybla_params")?;
    let netns_params = obj.map("hybla_ns_params")?;
    let info_map = obj.map("hybla_ld_info")?;
    let ops = obj.map(LD_NAME)?;
    let reuse = Path::new(PARAMS_PIN).exists() && Path::new(NETNS_PARAMS_PIN).exists();
    if reuse {
        for (map, path) in [(params, PARAMS_PIN), (netns_params, NETNS_PARAMS_PIN)] {
            let fd = libbpf::obj_get(path).map_err(|e| bpf_err("open pinned params map", e))?;
            // reuse_fd dups the fd: ours closes when `fd` drops.
            libbpf::check(unsafe { libbpf::bpf_map__reuse_fd(map, fd.as_raw_fd()) })
                .map_err(|e| bpf_err("reuse pinned params map", e))?;
        }
    }
    libbpf::check(unsafe { libbpf::bpf_object__load(obj.0) })
        .map_err(|e| bpf_err("load hybla_ld BPF object (verifier log above, if any)", e))?;
    let result = (|| {
        let params_fd = unsafe { libbpf::bpf_map__fd(params) };
        let netns_fd = unsafe { libbpf::bpf_map__fd(netns_params) };
        if !reuse {
            pin(params, PARAMS_PIN)?;
            pin(netns_params, NETNS_PARAMS_PIN)?;
            libbpf::map_update(params_fd, &0u32, &initial)
                .map_err(|e| bpf_err("write params", e))?;
        }
        let id = |fd| libbpf::map_id(fd).map_err(|e| bpf_err("read map id", e));
        let info = LdInfo {
            version: BPF_VERSION,
            params_map_id: id(params_fd)?,
            netns_map_id: id(netns_fd)?,
            reserved: 0,
        };
        let info_fd = unsafe { libbpf::bpf_map__fd(info_map) };
        libbpf::map_update(info_fd, &0u32, &info).map_err(|e| bpf_err("write hybla_ld info", e))?;
        pin(info_map, LD_INFO_PIN)?;
        pin(ops, LD_OPS_PIN)?;
        register(ops)
    })();
    if result.is_err() {
        remove_ld_pins();
        if !reuse {
            for p in [PARAMS_PIN, NETNS_PARAMS_PIN] {
                let _ = std::fs::remove_file(p);
            }
            let _ = std::fs::remove_dir(PIN_DIR);
        }
    }
    result
}

pub fn remove_pins() {
    for p in [OPS_PIN, PARAMS_PIN, NETNS_PARAMS_PIN] {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_dir(PIN_DIR); // only succeeds when empty: others' pins stay
}

pub fn read_params() -> Result<ParamsValue, HyblaError> {
    let fd = libbpf::obj_get(PARAMS_PIN).map_err(|e| bpf_err("open pinned params map", e))?;
    libbpf::map_lookup(fd.as_raw_fd(), &0u32).map_err(|e| bpf_err("read params", e))
}

/// Rewrite the params through `change` and bump the generation so open connections re-read
/// them (rho, cwnd ceiling) on their next ACK; nothing is reloaded.
pub fn update_params(change: impl FnOnce(&mut ParamsValue)) -> Result<ParamsValue, HyblaError> {
    let fd = libbpf::obj_get(PARAMS_PIN).map_err(|e| bpf_err("open pinned params map", e))?;
    let old: ParamsValue =
        libbpf::map_lookup(fd.as_raw_fd(), &0u32).map_err(|e| bpf_err("read params", e))?;
    let mut new = old;
    change(&mut new);
    new.generation = old.generation.wrapping_add(1);
    libbpf::map_update(fd.as_raw_fd(), &0u32, &new).map_err(|e| bpf_err("write params", e))?;
    Ok(new)
}

/// The per-namespace map, or Outdated when the registered Hybla predates it.
fn netns_map() -> Result<std::os::fd::OwnedFd, HyblaError> {
    libbpf::obj_get(NETNS_PARAMS_PIN).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => HyblaError::Outdated,
        _ => bpf_err("open pinned per-namespace params map", e),
    })
}

/// Every per-namespace entry, by cookie.
pub fn read_netns_params() -> Result<Vec<(u64, ParamsValue)>, HyblaError> {
    let fd = netns_map()?;
    let mut out = Vec::new();
    let mut key: Option<u64> = None;
    // Bounded by the map's capacity, so a concurrent writer cannot keep us looping.
    for _ in 0..=NETNS_MAX {
        let next = match libbpf::map_next_key(fd.as_raw_fd(), key.as_ref()) {
            Ok(Some(k)) => k,
            Ok(None) => break,
            Err(e) => return Err(bpf_err("list per-namespace params", e)),
        };
        match libbpf::map_lookup::<u64, ParamsValue>(fd.as_raw_fd(), &next) {
            Ok(v) => out.push((next, v)),
            // Removed between the two calls.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(bpf_err("read per-namespace params", e)),
        }
        key = Some(next);
    }
    out.sort_by_key(|(k, _)| *k);
    Ok(out)
}

/// Write the entry of namespace `cookie` (created, or replaced with its generation bumped).
pub fn write_netns_params(cookie: u64, mut value: ParamsValue) -> Result<(), HyblaError> {
    let fd = netns_map()?;
    value.generation = match libbpf::map_lookup::<u64, ParamsValue>(fd.as_raw_fd(), &cookie) {
        Ok(old) => old.generation.wrapping_add(1),
        Err(_) => 1,
    };
    libbpf::map_update(fd.as_raw_fd(), &cookie, &value).map_err(|e| match e.raw_os_error() {
        // A hash map refuses a new key with E2BIG when all its entries are taken.
        Some(libc::E2BIG) => HyblaError::NetnsFull(NETNS_MAX),
        _ => bpf_err("write per-namespace params", e),
    })
}

/// Remove the entry of namespace `cookie`; Ok(false) when it had none.
pub fn remove_netns_params(cookie: u64) -> Result<bool, HyblaError> {
    let fd = netns_map()?;
    match libbpf::map_delete(fd.as_raw_fd(), &cookie) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(bpf_err("remove per-namespace params", e)),
    }
}

/// Ours is registered (pinned) but was loaded by a Perigee without per-namespace parameters.
pub fn outdated() -> bool {
    Path::new(OPS_PIN).exists() && !Path::new(NETNS_PARAMS_PIN).exists()
}
