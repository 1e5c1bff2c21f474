//! Stale run directories (no control plane needed): a directory whose harness died is
//! recognised, its recorded processes killed and the directory removed; a live one is kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::process::ExitStatusExt;

use control_plane::{Error, RunDir, run_dir};

#[test]
fn stale_run_directory_is_cleaned_and_its_processes_killed() {
    let base = tempfile::Builder::new().prefix("cprd-").tempdir().unwrap();

    // A "dead harness": a run directory with a recorded process still running, released
    // without cleaning (as when the harness process dies).
    let stale = RunDir::create_in(base.path(), "control-plane-").unwrap();
    let stale_path = stale.path().to_path_buf();
    let mut orphan = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    stale.record_process("sleep", orphan.id()).unwrap();
    drop(stale);

    // A live one, held by this process.
    let live = RunDir::create_in(base.path(), "control-plane-").unwrap();

    let cleaned = run_dir::clean_stale(base.path()).unwrap();
    assert_eq!(cleaned.len(), 1, "{cleaned:?}");
    assert_eq!(cleaned[0].path, stale_path);
    assert_eq!(
        cleaned[0].killed,
        vec![("sleep".to_string(), orphan.id() as i32)]
    );
    assert!(!stale_path.exists());
    assert_eq!(
        orphan.wait().unwrap().signal(),
        Some(9),
        "the recorded process was SIGKILLed"
    );
    assert!(live.path().exists(), "a live run directory is left alone");

    // Opening the live directory by path is refused while it is held.
    match RunDir::open(live.path()) {
        Err(Error::RunDirInUse { holder, .. }) => {
            assert_eq!(holder, std::process::id().to_string())
        }
        other => panic!("expected RunDirInUse, got {other:?}"),
    }
    live.remove().unwrap();
}

#[test]
fn a_recycled_pid_is_not_killed() {
    let base = tempfile::Builder::new().prefix("cprd-").tempdir().unwrap();
    let stale = RunDir::create_in(base.path(), "control-plane-").unwrap();
    // Recorded with the wrong start time: as if the pid now belonged to another process.
    let mut bystander = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    std::fs::write(
        stale.path().join("processes"),
        format!("{} 1 sleep\n", bystander.id()),
    )
    .unwrap();
    drop(stale);

    let cleaned = run_dir::clean_stale(base.path()).unwrap();
    assert_eq!(cleaned.len(), 1);
    assert!(cleaned[0].killed.is_empty(), "{cleaned:?}");
    assert!(
        bystander.try_wait().unwrap().is_none(),
        "the bystander still runs"
    );
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}
