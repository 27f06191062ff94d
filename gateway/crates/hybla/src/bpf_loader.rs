//! Loads the embedded BPF Hybla, pins its maps under /sys/fs/bpf/perigee and registers the
//! struct_ops without a link: the kernel then holds the registration (and a map reference)
//! after this process exits. Unregistering deletes the struct_ops map's element.
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

static BPF_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/hybla.bpf.o"));

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

/// Load, pin, set initial params, register. On failure nothing of ours is left behind.
pub fn load(initial: ParamsValue) -> Result<(), HyblaError> {
    let obj = unsafe {
        libbpf::bpf_object__open_mem(
            BPF_OBJECT.as_ptr().cast::<c_void>(),
            BPF_OBJECT.len(),
            std::ptr::null(),
        )
    };
    if obj.is_null() {
        return Err(bpf_err("open BPF object", io::Error::last_os_error()));
    }
    let obj = Object(obj);
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
    })();
    if result.is_err() {
        remove_pins();
    }
    result
}

/// Unregister ours (found through its pin) and remove the pins. Idempotent.
pub fn unload() -> Result<(), HyblaError> {
    if Path::new(OPS_PIN).exists() {
        let fd = libbpf::obj_get(OPS_PIN).map_err(|e| bpf_err("open pinned struct_ops", e))?;
        match libbpf::map_delete(fd.as_raw_fd(), &0u32) {
            // ENOENT/EINVAL: pinned but no longer registered; just clean up.
            Ok(()) => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::EINVAL)) => {}
            Err(e) => return Err(bpf_err("unregister struct_ops", e)),
        }
    }
    remove_pins();
    Ok(())
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
