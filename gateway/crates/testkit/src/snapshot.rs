//! Snapshot files: a rendered config compared with the copy the repository holds.
use std::path::Path;

/// Compares `text` with the snapshot `name` in `<crate_dir>/tests/snapshots` (`crate_dir`: the
/// calling crate's `CARGO_MANIFEST_DIR`); PERIGEE_UPDATE_SNAPSHOTS=1 rewrites it instead.
pub fn check_snapshot(crate_dir: &str, name: &str, text: &str) {
    let path = Path::new(crate_dir).join("tests/snapshots").join(name);
    if std::env::var_os("PERIGEE_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        text, expected,
        "render changed; if intended, rerun with PERIGEE_UPDATE_SNAPSHOTS=1 and review {name}"
    );
}
