//! The `sanity` suite of a run on the embedded default: the CSI sanity cases against the
//! Manila driver started for it as plain processes on this host (the driver forwarding node
//! calls to the NFS node plugin, which runs in a private mount namespace), talking to the
//! run's fake cloud. Each sanity case is a test of the report. On another cluster the suite
//! is skipped: `conformance sanity --endpoint …` runs it against any CSI endpoint.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use csi_proto::Endpoint;
use csi_proto::v1::ProbeRequest;
use csi_proto::v1::identity_client::IdentityClient;
use kube_support::wait;
use tokio::process::{Child, Command};

use super::progress::Progress;
use super::report::{Outcome, TestReport};
use crate::e2e::binaries::Binaries;
use crate::registry::{SANITY_SUITE, Target};
use crate::sanity::case::Case;
use crate::sanity::{CsiSecrets, SanityConfig};

/// How long a plugin may take to answer Probe.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs the sanity `cases` (see the module docs) with scratch files in `scratch` (sockets,
/// logs, mount and staging directories).
pub async fn run(
    target: &Target,
    cases: Vec<Case>,
    scratch: &Path,
    progress: &dyn Progress,
) -> Vec<TestReport> {
    let Some(environment) = target.environment() else {
        return vec![skipped(
            "sanity runs against a CSI endpoint: on an existing cluster use `conformance sanity --endpoint …`",
        )];
    };
    progress.test_started("[sanity] the CSI sanity cases");
    let started = std::time::Instant::now();
    let result = async {
        let binaries = Binaries::locate_or_build(None)
            .await
            .map_err(|e| e.to_string())?;
        std::fs::create_dir_all(scratch)
            .map_err(|e| format!("creating {}: {e}", scratch.display()))?;
        let kernel = matches!(
            &environment.options().cloud_source,
            crate::e2e::CloudSource::External(crate::e2e::ExternalCloud {
                nfs: crate::e2e::NfsAccess::Kernel,
                ..
            })
        );
        let nfs = start_nfs_plugin(binaries.dir(), scratch, kernel).await?;
        let manila = start_manila_plugin(binaries.dir(), scratch, &nfs.socket).await?;
        let mut config = SanityConfig::new(Endpoint::Unix(manila.socket.clone()));
        config.mount_dir = scratch.join("mnt");
        config.staging_dir = scratch.join("staging");
        let secret = environment.driver_secret();
        config.secrets = CsiSecrets::everywhere(&secret.into_iter().collect());
        let report = crate::sanity::run_cases(config, &cases, |case| {
            progress.test_finished(&TestReport {
                suite: SANITY_SUITE.into(),
                name: case.name.clone(),
                outcome: case.outcome.clone(),
                duration: case.duration,
                evidence: None,
            });
        })
        .await
        .map_err(|e| e.to_string());
        let logs = format!(
            "manila-csi-plugin log: {}; nfs-csi-plugin log: {}",
            manila.log.display(),
            nfs.log.display()
        );
        drop(manila);
        drop(nfs);
        report.map(|r| (r, logs))
    }
    .await;
    match result {
        Ok((report, logs)) => report
            .cases
            .into_iter()
            .map(|case| TestReport {
                suite: SANITY_SUITE.into(),
                name: case.name,
                outcome: match case.outcome {
                    Outcome::Failed(message) => Outcome::Failed(format!("{message}\n({logs})")),
                    other => other,
                },
                duration: case.duration,
                evidence: None,
            })
            .collect(),
        Err(message) => {
            let report = TestReport {
                suite: SANITY_SUITE.into(),
                name: "the CSI sanity cases".into(),
                outcome: Outcome::Failed(message),
                duration: started.elapsed(),
                evidence: None,
            };
            progress.test_finished(&report);
            vec![report]
        }
    }
}

fn skipped(reason: &str) -> TestReport {
    TestReport {
        suite: SANITY_SUITE.into(),
        name: "the CSI sanity cases".into(),
        outcome: Outcome::Skipped(reason.into()),
        duration: Duration::ZERO,
        evidence: None,
    }
}

/// A plugin process serving CSI on a unix socket; killed when dropped.
struct Plugin {
    _child: Child,
    socket: PathBuf,
    log: PathBuf,
}

async fn start_nfs_plugin(bin: &Path, dir: &Path, kernel: bool) -> Result<Plugin, String> {
    let socket = dir.join("nfs.sock");
    let mut command = Command::new("unshare");
    command
        .args(["--mount", "--propagation", "private", "--"])
        .arg(bin.join("nfs-csi-plugin"))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg("--nodeid=sanity-node")
        .arg(if kernel {
            "--mounter=kernel"
        } else {
            "--mounter=local"
        });
    spawn("nfs-csi-plugin", command, dir, socket).await
}

async fn start_manila_plugin(bin: &Path, dir: &Path, partner: &Path) -> Result<Plugin, String> {
    let socket = dir.join("manila.sock");
    let mut command = Command::new(bin.join("manila-csi-plugin"));
    command
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .arg("--share-protocol-selector=NFS")
        .arg(format!("--fwdendpoint=unix://{}", partner.display()))
        .arg("--nodeid=sanity-node");
    spawn("manila-csi-plugin", command, dir, socket).await
}

/// Starts `command` with its output in `<dir>/<name>.log` and waits until Probe on
/// `socket` answers.
async fn spawn(
    name: &str,
    mut command: Command,
    dir: &Path,
    socket: PathBuf,
) -> Result<Plugin, String> {
    let log = dir.join(format!("{name}.log"));
    let file =
        std::fs::File::create(&log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let err = file
        .try_clone()
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    command
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| format!("starting {name}: {e}"))?;
    let endpoint = Endpoint::Unix(socket.clone());
    let channel = csi_proto::connect_lazy(&endpoint)
        .map_err(|e| format!("{name}'s socket {}: {e}", socket.display()))?;
    let probed = wait::wait_until(format!("{name} answering Probe"), START_TIMEOUT, || {
        let channel = channel.clone();
        let exited = child.try_wait().ok().flatten();
        let log = log.clone();
        async move {
            if let Some(status) = exited {
                return Err(format!(
                    "exited ({status}); log {}:\n{}",
                    log.display(),
                    std::fs::read_to_string(&log).unwrap_or_default()
                ));
            }
            match IdentityClient::new(channel).probe(ProbeRequest {}).await {
                Ok(_) => Ok(Some(())),
                Err(status) => Err(format!("Probe: {}", status.message())),
            }
        }
    })
    .await;
    probed.map_err(|e| format!("{name}: {e}"))?;
    Ok(Plugin {
        _child: child,
        socket,
        log,
    })
}
