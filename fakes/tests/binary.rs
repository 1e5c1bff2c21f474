//! The `fake-openstack` binary as a real process: flags, seed files, the written
//! clouds.yaml and secret, serving, and a clean exit on SIGINT and SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rstest::rstest;
use serde_json::{Value, json};

const EXE: &str = env!("CARGO_BIN_EXE_fake-openstack");

/// Starts the binary on an ephemeral port; returns it and the auth URL read back from the
/// clouds.yaml it writes, once its control API answers.
fn start(dir: &Path, extra: &[&str]) -> (Child, String) {
    start_in(dir, extra, &std::env::temp_dir())
}

/// [`start`] with `$TMPDIR` set to `tmpdir` (where a temporary backend goes).
fn start_in(dir: &Path, extra: &[&str], tmpdir: &Path) -> (Child, String) {
    let clouds = dir.join("clouds.yaml");
    let mut child = Command::new(EXE)
        .args(["--port", "0", "--write-clouds-yaml"])
        .arg(&clouds)
        .args(extra)
        .env("TMPDIR", tmpdir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::from("no clouds.yaml yet");
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("fake-openstack exited early with {status}");
        }
        if let Ok(text) = std::fs::read_to_string(&clouds)
            && let Ok(doc) = serde_yaml::from_str::<serde_yaml::Value>(&text)
            && let Some(url) = doc["clouds"]["fake"]["auth"]["auth_url"].as_str()
        {
            let base = url.trim_end_matches("/identity/v3");
            match health_status(&format!("{base}/_fake/health")) {
                Ok(200) => return (child, url.to_owned()),
                Ok(code) => last = format!("health answered {code}"),
                Err(e) => last = e,
            }
        }
        assert!(
            Instant::now() < deadline,
            "fake-openstack never became ready; last: {last}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status code of a GET, from this synchronous test.
fn health_status(url: &str) -> Result<u16, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        reqwest::get(url)
            .await
            .map(|r| r.status().as_u16())
            .map_err(|e| e.to_string())
    })
}

fn stop(mut child: Child, signal: Signal) -> String {
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), signal).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "fake-openstack ignored {signal}");
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(
        status.success(),
        "exit {status} after {signal}; stderr:\n{stderr}"
    );
    stderr
}

/// A scoped token: its id and body.
async fn token(auth_url: &str) -> (String, Value) {
    let r = reqwest::Client::new()
        .post(format!("{auth_url}/auth/tokens"))
        .json(&json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "demo", "domain": {"name": "Default"}, "password": "fake-password"}}},
            "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let id = r.headers()["x-subject-token"].to_str().unwrap().to_owned();
    (id, r.json().await.unwrap())
}

async fn auth(auth_url: &str) -> Value {
    token(auth_url).await.1
}

/// Creates a share through Manila; its id.
async fn create_share(auth_url: &str) -> String {
    let (token, _) = token(auth_url).await;
    let manila = auth_url.replace("/identity/v3", "/share/v2");
    let r = reqwest::Client::new()
        .post(format!("{manila}/shares"))
        .header("X-Auth-Token", token)
        .json(&json!({"share": {"name": "left", "size": 1, "share_proto": "NFS"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    body["share"]["id"].as_str().unwrap().to_owned()
}

/// The entries of a directory, by name.
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[rstest]
#[case::sigint(Signal::SIGINT)]
#[case::sigterm(Signal::SIGTERM)]
fn serves_and_exits_cleanly_on_signal(#[case] signal: Signal) {
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let secret = dir.path().join("secret.json");
    let backend = dir.path().join("backend");
    let (child, auth_url) = start(
        dir.path(),
        &[
            "--share-type",
            "gold",
            "--write-secret",
            secret.to_str().unwrap(),
            "--backend-root",
            backend.to_str().unwrap(),
        ],
    );
    let token = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(auth(&auth_url));
    assert_eq!(token["token"]["catalog"].as_array().unwrap().len(), 3);
    let secret: Value = serde_json::from_str(&std::fs::read_to_string(&secret).unwrap()).unwrap();
    assert_eq!(secret["os-authURL"], auth_url.as_str());
    assert!(backend.join("shares").is_dir());
    let logs = stop(child, signal);
    assert!(logs.contains("fake OpenStack cloud serving"), "{logs}");
    assert!(logs.contains("stopping"), "{logs}");
    assert!(
        !logs.contains("fake-password"),
        "the password must never be logged:\n{logs}"
    );
}

#[test]
fn no_manila_flag_makes_a_manila_less_cloud() {
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let (child, auth_url) = start(dir.path(), &["--no-manila"]);
    let token = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(auth(&auth_url));
    let types: Vec<&str> = token["token"]["catalog"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["identity"]);
    stop(child, Signal::SIGINT);
}

#[test]
fn seed_file_is_loaded() {
    let seed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/fake-cloud/manila-less.yaml");
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let (child, auth_url) = start(dir.path(), &["--seed", seed.to_str().unwrap()]);
    let token = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(auth(&auth_url));
    assert_eq!(token["token"]["catalog"].as_array().unwrap().len(), 1);
    stop(child, Signal::SIGTERM);
}

#[test]
fn bad_seed_fails_with_the_culprit_named() {
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let seed = dir.path().join("seed.yaml");
    std::fs::write(&seed, "manila:\n  share_typez: []\n").unwrap();
    let out = Command::new(EXE)
        .args(["--port", "0", "--seed"])
        .arg(&seed)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("share_typez") && stderr.contains("seed.yaml"),
        "{stderr}"
    );
}

#[rstest]
#[case::sigint(Signal::SIGINT)]
#[case::sigterm(Signal::SIGTERM)]
fn a_signal_removes_the_temporary_backend_with_its_shares(#[case] signal: Signal) {
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let tmpdir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let (child, auth_url) = start_in(dir.path(), &[], tmpdir.path());
    let share = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(create_share(&auth_url));
    let backends = entries(tmpdir.path());
    assert!(
        matches!(&backends[..], [one] if one.starts_with("fake-manila-")),
        "{backends:?}"
    );
    let share_dir = tmpdir.path().join(&backends[0]).join("shares").join(share);
    std::fs::write(share_dir.join("data"), b"written by a workload").unwrap();

    stop(child, signal);
    assert_eq!(entries(tmpdir.path()), Vec::<String>::new());
}

#[test]
fn written_files_get_their_parent_directories() {
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let nested = dir.path().join("a/b");
    let secret = nested.join("secret.yaml");
    let (child, _) = start(&nested, &["--write-secret", secret.to_str().unwrap()]);
    stop(child, Signal::SIGTERM);
    assert!(nested.join("clouds.yaml").is_file());
    assert!(secret.is_file());
}

#[test]
fn an_unwritable_path_is_named() {
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let target = blocker.join("clouds.yaml");
    let out = Command::new(EXE)
        .args(["--port", "0", "--write-clouds-yaml"])
        .arg(&target)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(target.to_str().unwrap()), "{stderr}");
}

#[test]
fn written_credentials_are_owner_only_even_over_existing_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("binary-")
        .tempdir()
        .unwrap();
    let secret = dir.path().join("secret.yaml");
    let clouds = dir.path().join("clouds.yaml");
    // Files left by an earlier run (or made by someone else), world-readable.
    for path in [&secret, &clouds] {
        std::fs::write(path, "old").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (child, _) = start(dir.path(), &["--write-secret", secret.to_str().unwrap()]);
    stop(child, Signal::SIGTERM);
    for path in [&secret, &clouds] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:o}", path.display());
        assert_ne!(std::fs::read_to_string(path).unwrap(), "old");
    }
}
