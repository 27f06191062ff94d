//! The handful of libbpf (system libbpf >= 1.0, linked by build.rs) entry points the loader
//! uses. In libbpf 1.x mode these return NULL / a negative errno and set errno on failure.
use std::ffi::{c_char, c_int, c_void, CString};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

#[repr(C)]
pub struct BpfObject {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct BpfMap {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct BpfLink {
    _opaque: [u8; 0],
}

extern "C" {
    pub fn bpf_object__open_mem(
        buf: *const c_void,
        size: usize,
        opts: *const c_void,
    ) -> *mut BpfObject;
    pub fn bpf_object__load(obj: *mut BpfObject) -> c_int;
    pub fn bpf_object__close(obj: *mut BpfObject);
    pub fn bpf_object__find_map_by_name(obj: *const BpfObject, name: *const c_char) -> *mut BpfMap;
    pub fn bpf_map__fd(map: *const BpfMap) -> c_int;
    pub fn bpf_map__reuse_fd(map: *mut BpfMap, fd: c_int) -> c_int;
    pub fn bpf_map__pin(map: *mut BpfMap, path: *const c_char) -> c_int;
    pub fn bpf_map__attach_struct_ops(map: *const BpfMap) -> *mut BpfLink;
    pub fn bpf_link__disconnect(link: *mut BpfLink);
    pub fn bpf_link__destroy(link: *mut BpfLink) -> c_int;
    fn bpf_obj_get(path: *const c_char) -> c_int;
    fn bpf_map_update_elem(
        fd: c_int,
        key: *const c_void,
        value: *const c_void,
        flags: u64,
    ) -> c_int;
    fn bpf_map_lookup_elem(fd: c_int, key: *const c_void, value: *mut c_void) -> c_int;
    fn bpf_map_delete_elem(fd: c_int, key: *const c_void) -> c_int;
    fn bpf_map_get_next_key(fd: c_int, key: *const c_void, next_key: *mut c_void) -> c_int;
    fn bpf_obj_get_info_by_fd(fd: c_int, info: *mut c_void, info_len: *mut u32) -> c_int;
}

/// Turn a libbpf int return (negative errno) into io::Result.
pub fn check(ret: c_int) -> io::Result<c_int> {
    if ret < 0 {
        Err(io::Error::from_raw_os_error(-ret))
    } else {
        Ok(ret)
    }
}

pub fn cstr(s: &str) -> CString {
    CString::new(s).expect("path without NUL")
}

/// Open a pinned BPF object (map) by path.
pub fn obj_get(path: &str) -> io::Result<OwnedFd> {
    let p = cstr(path);
    let fd = check(unsafe { bpf_obj_get(p.as_ptr()) })?;
    // SAFETY: bpf_obj_get returned a fresh fd we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Map element I/O for plain-old-data keys/values whose layout matches the BPF side.
pub fn map_update<K: Copy, V: Copy>(fd: c_int, key: &K, value: &V) -> io::Result<()> {
    let ret =
        unsafe { bpf_map_update_elem(fd, (key as *const K).cast(), (value as *const V).cast(), 0) };
    check(ret).map(|_| ())
}

pub fn map_lookup<K: Copy, V: Copy + Default>(fd: c_int, key: &K) -> io::Result<V> {
    let mut value = V::default();
    let ret =
        unsafe { bpf_map_lookup_elem(fd, (key as *const K).cast(), (&mut value as *mut V).cast()) };
    check(ret).map(|_| value)
}

pub fn map_delete<K: Copy>(fd: c_int, key: &K) -> io::Result<()> {
    check(unsafe { bpf_map_delete_elem(fd, (key as *const K).cast()) }).map(|_| ())
}

/// The key after `key` (the first one when None); Ok(None) past the last one.
pub fn map_next_key<K: Copy + Default>(fd: c_int, key: Option<&K>) -> io::Result<Option<K>> {
    let mut next = K::default();
    let cur = key.map_or(std::ptr::null(), |k| (k as *const K).cast());
    let ret = unsafe { bpf_map_get_next_key(fd, cur, (&mut next as *mut K).cast()) };
    match check(ret) {
        Ok(_) => Ok(Some(next)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The leading fields of the kernel's `struct bpf_map_info` (the kernel fills what fits).
#[repr(C)]
#[derive(Default)]
struct MapInfoHead {
    map_type: u32,
    id: u32,
}

/// The kernel's ID of the map behind `fd` (unique until reboot, like a namespace cookie).
pub fn map_id(fd: c_int) -> io::Result<u32> {
    let mut info = MapInfoHead::default();
    let mut len = std::mem::size_of::<MapInfoHead>() as u32;
    check(unsafe { bpf_obj_get_info_by_fd(fd, (&mut info as *mut MapInfoHead).cast(), &mut len) })?;
    Ok(info.id)
}
