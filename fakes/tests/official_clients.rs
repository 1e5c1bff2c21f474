//! Interoperability with the official clients: python-openstackclient + python-manilaclient
//! (installed by `ci/install-openstack-clients.sh` into a cached virtualenv) drive the fake
//! through a full share lifecycle. If a client fails on the fake, the fake is wrong.
//! One test only, so that a cold run installs the clients once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use fakes::{CloudConfig, FakeCloud};
use serde_json::Value;
use tokio::process::Command;

/// Runs the project's installer (idempotent) and returns the `openstack` executable.
async fn openstack_cli() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/install-openstack-clients.sh");
    let out = Command::new("bash").arg(&script).output().await.unwrap();
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let path = PathBuf::from(
        stdout
            .lines()
            .last()
            .expect("the installer prints the client path")
            .trim(),
    );
    assert!(path.is_file(), "{} is not a file", path.display());
    path
}

struct Cli {
    exe: PathBuf,
    clouds: PathBuf,
}

impl Cli {
    /// Runs `openstack <args>`; the output (stdout) on success, the failure otherwise.
    async fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args);
        for (key, _) in std::env::vars() {
            if key.starts_with("OS_") {
                cmd.env_remove(key);
            }
        }
        cmd.env("OS_CLIENT_CONFIG_FILE", &self.clouds)
            .env("OS_CLOUD", "fake");
        let out = cmd.output().await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "openstack {} exited with {}: {stdout}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        self.run(args).await.unwrap_or_else(|e| panic!("{e}"))
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-f", "json"]);
        let out = self.ok(&all).await;
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("openstack {}: not JSON ({e}): {out}", args.join(" ")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_cli_drives_a_full_share_lifecycle() {
    let exe = openstack_cli().await;
    // Zero delays: each call answers the transitional state and the clients' first --wait
    // poll sees the final one (their poll interval is 5 s; any delay would cost that much).
    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let dir = tempfile::Builder::new()
        .prefix("official-clients-")
        .tempdir()
        .unwrap();
    let clouds = dir.path().join("clouds.yaml");
    std::fs::write(&clouds, cloud.clouds_yaml("fake")).unwrap();
    let cli = Cli { exe, clouds };

    // Create and wait for available.
    let share = cli
        .json(&["share", "create", "NFS", "1", "--name", "interop", "--wait"])
        .await;
    assert_eq!(share["status"], "available", "{share}");
    let id = share["id"].as_str().unwrap().to_owned();

    // Export locations name the backing directory.
    let locations = cli
        .json(&["share", "export", "location", "list", &id])
        .await;
    let locations = locations.as_array().unwrap();
    // The admin-only location is hidden from the seed's member account.
    assert_eq!(locations.len(), 1, "{locations:?}");
    let dir_path = cloud.share_dir(&id).display().to_string();
    assert_eq!(locations[0]["Path"], format!("127.0.0.1:{dir_path}"));
    assert_eq!(locations[0]["Preferred"], true);
    assert!(cloud.share_dir(&id).is_dir());

    // Access rules: create (waits for active), list, delete.
    let rule = cli
        .json(&[
            "share",
            "access",
            "create",
            &id,
            "ip",
            "10.0.0.0/24",
            "--access-level",
            "rw",
            "--wait",
        ])
        .await;
    let rule_id = rule["id"].as_str().unwrap().to_owned();
    let rules = cli.json(&["share", "access", "list", &id]).await;
    assert_eq!(rules[0]["Access To"], "10.0.0.0/24", "{rules}");
    assert_eq!(rules[0]["State"], "active", "{rules}");
    cli.ok(&["share", "access", "delete", &id, &rule_id, "--wait"])
        .await;
    assert_eq!(
        cli.json(&["share", "access", "list", &id]).await,
        Value::Array(vec![])
    );

    // Extend.
    cli.ok(&["share", "resize", &id, "2", "--wait"]).await;
    let shown = cli.json(&["share", "show", &id]).await;
    assert_eq!(
        (shown["size"].as_u64(), shown["status"].as_str()),
        (Some(2), Some("available")),
        "{shown}"
    );

    // Snapshot create and delete.
    let snap = cli
        .json(&[
            "share",
            "snapshot",
            "create",
            &id,
            "--name",
            "interop-snap",
            "--wait",
        ])
        .await;
    assert_eq!(snap["status"], "available", "{snap}");
    let snap_id = snap["id"].as_str().unwrap().to_owned();
    assert_eq!(cloud.leftovers().snapshots.len(), 1);
    cli.ok(&["share", "snapshot", "delete", &snap_id, "--wait"])
        .await;

    // Delete the share; nothing is left.
    cli.ok(&["share", "delete", &id, "--wait"]).await;
    let left = cloud.leftovers();
    assert!(left.is_empty(), "{left:?}");
    assert!(!cloud.share_dir(&id).exists());

    // The fake's errors reach the user through the clients.
    let err = cli
        .run(&["share", "create", "NFS", "1", "--share-type", "gold"])
        .await
        .unwrap_err();
    assert!(err.contains("gold"), "{err}");
    let err = cli
        .run(&["share", "show", "no-such-share"])
        .await
        .unwrap_err();
    assert!(err.contains("no-such-share"), "{err}");
    assert!(cloud.leftovers().is_empty());

    // The clients negotiated the fake's maximum microversion (the newest release's 2.95;
    // python-manilaclient 6.3 speaks up to 2.98).
    let manila_calls: Vec<_> = cloud
        .journal()
        .into_iter()
        .filter(|e| e.path.starts_with("/share/v2/"))
        .collect();
    assert!(!manila_calls.is_empty());
    assert!(
        manila_calls
            .iter()
            .all(|e| e.microversion.as_deref() == Some("2.95")),
        "{manila_calls:?}"
    );

    // Over TLS: the clients trust the cloud through clouds.yaml's `cacert`, and refuse it
    // without.
    let tls_cloud = FakeCloud::builder(CloudConfig::default())
        .tls(true)
        .start()
        .await
        .unwrap();
    assert!(tls_cloud.auth_url().starts_with("https://"));
    let clouds_tls = dir.path().join("clouds-tls.yaml");
    std::fs::write(&clouds_tls, tls_cloud.clouds_yaml("fake")).unwrap();
    let tls_cli = Cli {
        exe: cli.exe.clone(),
        clouds: clouds_tls,
    };
    let types = tls_cli.json(&["share", "type", "list"]).await;
    assert_eq!(types[0]["Name"], "default", "{types}");
    let share = tls_cli
        .json(&[
            "share", "create", "NFS", "1", "--name", "over-tls", "--wait",
        ])
        .await;
    let id = share["id"].as_str().unwrap().to_owned();
    tls_cli.ok(&["share", "delete", &id, "--wait"]).await;
    assert!(tls_cloud.leftovers().is_empty());
    let no_ca = dir.path().join("clouds-no-ca.yaml");
    let text: String = tls_cloud
        .clouds_yaml("fake")
        .lines()
        .filter(|l| !l.trim_start().starts_with("cacert:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&no_ca, text).unwrap();
    let untrusting = Cli {
        exe: cli.exe.clone(),
        clouds: no_ca,
    };
    let err = untrusting
        .run(&["share", "type", "list"])
        .await
        .unwrap_err();
    assert!(
        err.to_ascii_lowercase().contains("certificate") || err.contains("SSL"),
        "{err}"
    );
}
