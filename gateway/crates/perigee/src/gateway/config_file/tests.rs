use super::*;
use crate::gateway::atomic_file::tests::tempdir;
use crate::gateway::config;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn example(revision: &str) -> GatewayConfig {
    let mut cfg = config::from_value(config::example_json()).unwrap();
    cfg.revision = revision.into();
    cfg
}

/// The file as the packages ship it: some config, 0640.
fn shipped(dir: &Path) -> PathBuf {
    let p = dir.join("gateway.json");
    std::fs::write(&p, render(&example("factory-default"))).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    p
}

fn applied() -> Result<(), &'static str> {
    Ok(())
}

#[test]
fn a_successful_apply_writes_the_config_the_next_start_boots() {
    let d = tempdir("ok");
    let p = shipped(&d);
    let file = ConfigFile::new(p.to_str());
    let cfg = example("v7");
    let kept = file.apply_then_keep(&cfg, applied).unwrap();
    assert_eq!(
        kept,
        Kept {
            persisted: true,
            error: None
        }
    );
    // What a restart reads back is the applied config, exactly as GET /v1/config shows it.
    let booted = config::parse(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(
        serde_json::to_value(&booted).unwrap(),
        serde_json::to_value(&cfg).unwrap()
    );
    assert_eq!(std::fs::read_to_string(&p).unwrap(), render(&cfg));
    assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, 0o640);
    assert!(file.holds_config_in_force() && file.problem("v7").is_none());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_refused_or_rolled_back_apply_leaves_the_file_untouched() {
    let d = tempdir("refused");
    let p = shipped(&d);
    let before = std::fs::read(&p).unwrap();
    let inode = std::fs::metadata(&p).unwrap().ino();
    let file = ConfigFile::new(p.to_str());
    let r = file.apply_then_keep(&example("bad"), || Err("routes failed, rolled back"));
    assert_eq!(r, Err("routes failed, rolled back"));
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert_eq!(
        std::fs::metadata(&p).unwrap().ino(),
        inode,
        "not even rewritten"
    );
    assert_eq!(file.failures(), 0);
    assert!(file.holds_config_in_force());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_file_that_cannot_be_written_is_reported_and_the_apply_stands() {
    let d = tempdir("unwritable");
    // The directory is gone (as good as a read-only /etc for the writer): nothing can be kept.
    let p = d.join("etc-perigee").join("gateway.json");
    let file = ConfigFile::new(p.to_str());
    let kept = file.apply_then_keep(&example("v8"), applied).unwrap();
    assert!(!kept.persisted);
    let why = kept.error.unwrap();
    assert!(why.contains(&p.display().to_string()), "{why}");
    assert!(!file.holds_config_in_force());
    assert_eq!(file.failures(), 1);
    let problem = file.problem("v8").unwrap();
    assert!(
        problem.contains("'v8'") && problem.contains(&why),
        "{problem}"
    );
    assert!(!p.exists());
    // Once the file can be written again, the next apply keeps its config and clears the problem.
    std::fs::create_dir(p.parent().unwrap()).unwrap();
    let kept = file.apply_then_keep(&example("v9"), applied).unwrap();
    assert!(kept.persisted, "{kept:?}");
    assert!(file.holds_config_in_force() && file.problem("v9").is_none());
    assert_eq!(
        std::fs::metadata(&p).unwrap().mode() & 0o7777,
        NEW_FILE_MODE
    );
    assert_eq!(file.failures(), 1);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn without_a_config_file_nothing_is_kept_and_the_answer_says_so() {
    let file = ConfigFile::new(None);
    let kept = file.apply_then_keep(&example("v1"), applied).unwrap();
    assert!(!kept.persisted);
    assert!(kept.error.unwrap().contains("--config"));
    assert!(!file.holds_config_in_force());
    // A daemon run without a file on purpose is not degraded by it.
    assert!(file.problem("v1").is_none());
    assert_eq!(file.failures(), 0);
}
