//! Replacing a file so that a crash or a power cut leaves either the old content or the new one,
//! never a mix: the new content goes to a temporary file in the same directory, is synced, renamed
//! over the target, and the directory is synced so the rename itself is on disk. The target keeps
//! its mode and owner (a config the packages made root:perigee 0640 stays so).
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Tells apart the temporary files of two replacements running at once in this process.
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

/// Writes `data` to `path` atomically. An existing target keeps its mode, owner and group (a
/// symbolic link is followed: the file it points to is replaced); a new one gets `new_mode`, the
/// directory's group and this process's user. On an error the target is as it was and no
/// temporary file is left behind.
pub fn replace(path: &Path, data: &[u8], new_mode: u32) -> std::io::Result<()> {
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (mode, owner) = match std::fs::metadata(&target) {
        Ok(m) => (m.mode() & 0o7777, Some((m.uid(), m.gid()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // The directory's group (root's when it cannot be read), this process's user.
            let gid = std::fs::metadata(&dir).map(|d| d.gid()).unwrap_or(0);
            (new_mode, Some((euid(), gid)))
        }
        Err(e) => return Err(e),
    };
    let tmp = tmp_path(&target, &dir);
    let written = write_synced(&tmp, data, mode, owner).and_then(|()| {
        std::fs::rename(&tmp, &target)?;
        Ok(())
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    // The rename is in the directory: without this a power cut may still bring back the old file.
    File::open(&dir)?.sync_all()
}

/// `.<name>.<pid>.<n>.tmp` beside the target: hidden, and never another writer's.
fn tmp_path(target: &Path, dir: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = NEXT_TMP.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// Creates `tmp` (never an existing file or link), gives it `mode` and `owner`, writes and syncs.
fn write_synced(
    tmp: &Path,
    data: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> std::io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o777)
        .open(tmp)?;
    if let Some((uid, gid)) = owner {
        let m = f.metadata()?;
        // Only when it differs: an unprivileged writer replacing its own file needs no chown.
        if (m.uid(), m.gid()) != (uid, gid) {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
        }
    }
    // After the chown (which clears set-id bits) and whatever the umask took away at creation.
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.write_all(data)?;
    f.sync_all()
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A new empty directory of this test process's own (config_file's tests use it too).
    pub(crate) fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "perigee-atomic-{tag}-{}-{}",
            std::process::id(),
            NEXT_TMP.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A group other than this process's own that it may give a file: any for root, else one of
    /// its supplementary groups (None when it has none: the group checks then prove less).
    fn other_gid() -> Option<u32> {
        // SAFETY: getegid and geteuid have no preconditions.
        let (egid, root) = unsafe { (libc::getegid(), libc::geteuid() == 0) };
        if root {
            return Some(if egid == 4242 { 4243 } else { 4242 });
        }
        let mut gs = vec![0 as libc::gid_t; 64];
        // SAFETY: the buffer holds 64 entries and getgroups writes at most that many.
        let n = unsafe { libc::getgroups(gs.len() as i32, gs.as_mut_ptr()) };
        gs.truncate(n.max(0) as usize);
        gs.into_iter().find(|g| *g != egid)
    }

    #[test]
    fn an_existing_file_is_replaced_keeping_its_mode_and_group() {
        let d = tempdir("keep");
        let p = d.join("gateway.json");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        // The replacement must come back with the group the file had, not the writer's.
        if let Some(g) = other_gid() {
            std::os::unix::fs::chown(&p, None, Some(g)).unwrap();
        }
        let before = std::fs::metadata(&p).unwrap();
        replace(&p, b"new", 0o600).unwrap();
        let after = std::fs::metadata(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(after.mode() & 0o7777, 0o640, "mode kept, not new_mode");
        assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
        assert_ne!(
            after.ino(),
            before.ino(),
            "a new file renamed over the old one"
        );
        assert_eq!(entries(&d), ["gateway.json"], "no temporary file left");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_new_file_gets_the_given_mode_and_the_directorys_group() {
        let d = tempdir("new");
        if let Some(g) = other_gid() {
            std::os::unix::fs::chown(&d, None, Some(g)).unwrap();
        }
        let p = d.join("gateway.json");
        replace(&p, b"{}", 0o640).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.mode() & 0o7777, 0o640);
        assert_eq!(m.gid(), std::fs::metadata(&d).unwrap().gid());
        assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        // The mode is set, not left to the umask (which takes group and other write away).
        let q = d.join("open.json");
        replace(&q, b"{}", 0o666).unwrap();
        assert_eq!(std::fs::metadata(&q).unwrap().mode() & 0o7777, 0o666);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlinked_target_replaces_the_file_it_points_to() {
        let d = tempdir("link");
        let real = d.join("real.json");
        let link = d.join("gateway.json");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        replace(&link, b"new", 0o640).unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_that_writes_nothing() {
        let d = tempdir("missing");
        let p = d.join("no-such-dir").join("gateway.json");
        assert!(replace(&p, b"new", 0o640).is_err());
        assert_eq!(entries(&d), Vec::<String>::new());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_failed_replacement_leaves_the_old_file_intact() {
        let d = tempdir("fail");
        let p = d.join("gateway.json");
        std::fs::write(&p, "old").unwrap();
        // Root writes through a mode-0555 directory (only a read-only mount stops it), so for
        // root the rename is made to fail instead: a file cannot be renamed over a directory.
        // SAFETY: geteuid has no preconditions.
        let r = if unsafe { libc::geteuid() } == 0 {
            let taken = d.join("taken");
            std::fs::create_dir(&taken).unwrap();
            std::fs::write(taken.join("inside"), "x").unwrap();
            let r = replace(&taken, b"new", 0o640);
            assert!(taken.join("inside").exists());
            r
        } else {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o555)).unwrap();
            let r = replace(&p, b"new", 0o640);
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
            r
        };
        assert!(r.is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old");
        let left: Vec<String> = entries(&d)
            .into_iter()
            .filter(|e| e.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
