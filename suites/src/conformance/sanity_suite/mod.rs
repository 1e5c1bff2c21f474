//! The `sanity` suite of a run on the embedded default: the CSI sanity cases against the
//! run's driver started for it as plain processes on this host, talking to the run's fake
//! cloud: the Manila driver forwarding node calls to the NFS node plugin ([`manila`]), or
//! the Cinder driver attaching through a fake Nova of the suite's own ([`cinder`]).
//! Each sanity case is a test of the report; when the spec file claims `block`, the cases
//! run a second time with raw block volumes (named `… (raw block)`). On another cluster the
//! suite is skipped: `conformance sanity --endpoint …` runs it against any CSI endpoint.

mod cinder;
mod manila;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use csi_proto::Endpoint;
use csi_proto::v1::ProbeRequest;
use csi_proto::v1::identity_client::IdentityClient;
use driver_spec::Capability;
use kube_support::wait;
use tokio::process::{Child, Command};

use super::progress::Progress;
use super::report::{Outcome, TestReport};
use crate::registry::{DriverConfig, RunEnvironment, SANITY_SUITE, Target};
use crate::sanity::case::Case;
use crate::sanity::{AccessType, SanityConfig};

/// How long a plugin may take to answer Probe.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The volume access types the suite runs with for a driver whose spec file says `spec`:
/// mounted file systems, and raw block volumes when it claims `block`.
pub fn access_types(spec: &driver_spec::DriverSpec) -> Vec<AccessType> {
    if spec.has(Capability::Block) {
        vec![AccessType::Mount, AccessType::Block]
    } else {
        vec![AccessType::Mount]
    }
}

/// How many tests the suite reports for `spec` besides its cases, per access type: the
/// Cinder driver's check that its own cloud holds nothing afterwards.
pub fn extra_tests(spec: &driver_spec::DriverSpec) -> usize {
    usize::from(spec.driver_info.name == crate::e2e::cinder::CINDER_DRIVER_NAME)
}

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
            "the CSI sanity cases",
            "sanity runs against a CSI endpoint: on an existing cluster use `conformance sanity --endpoint …`",
        )];
    };
    let access = target
        .driver(DriverConfig::Default)
        .map(|driver| access_types(&driver.spec))
        .unwrap_or_else(|_| vec![AccessType::Mount]);
    let mut reports = Vec::new();
    for access in access {
        let dir = scratch.join(match access {
            AccessType::Mount => "mount",
            AccessType::Block => "block",
        });
        reports.extend(run_with(environment, &cases, access, &dir, progress).await);
    }
    reports
}

/// The driver's plugins serving CSI for the sanity cases, and how the cases must call them.
struct Started {
    /// The endpoint the cases call.
    socket: PathBuf,
    /// Where each plugin's log is, for failure messages.
    logs: String,
    /// Fills in what the driver needs (secrets, volume sizes).
    configure: Box<dyn Fn(&mut SanityConfig) + Send>,
    /// Cases this machine cannot run with this access type, with the reason.
    not_runnable: Vec<(&'static str, &'static str)>,
    _plugins: Vec<Plugin>,
    /// A fake cloud of the suite's own, which must hold nothing afterwards.
    cloud: Option<fakes::FakeCloud>,
}

async fn run_with(
    environment: &RunEnvironment,
    cases: &[Case],
    access: AccessType,
    scratch: &Path,
    progress: &dyn Progress,
) -> Vec<TestReport> {
    let suffix = match access {
        AccessType::Mount => "",
        AccessType::Block => " (raw block)",
    };
    let name = |case: &str| format!("{case}{suffix}");
    progress.test_started(&format!("[{SANITY_SUITE}] the CSI sanity cases{suffix}"));
    let started = std::time::Instant::now();
    let result = async {
        std::fs::create_dir_all(scratch)
            .map_err(|e| format!("creating {}: {e}", scratch.display()))?;
        let plugins = match environment {
            RunEnvironment::Manila(env) => manila::start(env, scratch).await?,
            RunEnvironment::Cinder(env) => cinder::start(env, scratch, access).await?,
        };
        let (runnable, set_aside): (Vec<Case>, Vec<Case>) = cases.iter().cloned().partition(|c| {
            !plugins
                .not_runnable
                .iter()
                .any(|(case, _)| *case == c.name())
        });
        let mut reports: Vec<TestReport> = set_aside
            .iter()
            .map(|case| {
                let reason = plugins
                    .not_runnable
                    .iter()
                    .find(|(name, _)| *name == case.name())
                    .map_or("", |(_, reason)| *reason);
                skipped(
                    &name(&case.name()),
                    &format!("not run on this machine: {reason}"),
                )
            })
            .collect();
        for report in &reports {
            progress.test_finished(report);
        }
        let mut config = SanityConfig::new(Endpoint::Unix(plugins.socket.clone()));
        config.mount_dir = scratch.join("mnt");
        config.staging_dir = scratch.join("staging");
        config.test_volume_access_type = access;
        (plugins.configure)(&mut config);
        let report = crate::sanity::run_cases(config, &runnable, |case| {
            progress.test_finished(&TestReport {
                suite: SANITY_SUITE.into(),
                name: name(&case.name),
                outcome: case.outcome.clone(),
                duration: case.duration,
                evidence: None,
            });
        })
        .await
        .map_err(|e| e.to_string())?;
        let logs = plugins.logs.clone();
        let mut plugins = plugins;
        let cloud = plugins.cloud.take();
        // The plugin stops (its mounts go) before the cloud detaches its loop devices.
        drop(plugins);
        reports.extend(report.cases.into_iter().map(|case| TestReport {
            suite: SANITY_SUITE.into(),
            name: name(&case.name),
            outcome: match case.outcome {
                Outcome::Failed(message) => Outcome::Failed(format!("{message}\n({logs})")),
                other => other,
            },
            duration: case.duration,
            evidence: None,
        }));
        if let Some(cloud) = cloud {
            let left = cloud.block_leftovers();
            let report = TestReport {
                suite: SANITY_SUITE.into(),
                name: name("the CSI sanity cases leave nothing in the cloud"),
                outcome: if left.is_empty() {
                    Outcome::Passed
                } else {
                    Outcome::Failed(format!("left in the cloud: {left:?}\n({logs})"))
                },
                duration: std::time::Duration::ZERO,
                evidence: None,
            };
            progress.test_finished(&report);
            reports.push(report);
        }
        Ok::<_, String>(reports)
    }
    .await;
    match result {
        Ok(reports) => reports,
        Err(message) => {
            let report = TestReport {
                suite: SANITY_SUITE.into(),
                name: name("the CSI sanity cases"),
                outcome: Outcome::Failed(message),
                duration: started.elapsed(),
                evidence: None,
            };
            progress.test_finished(&report);
            vec![report]
        }
    }
}

fn skipped(name: &str, reason: &str) -> TestReport {
    TestReport {
        suite: SANITY_SUITE.into(),
        name: name.into(),
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
