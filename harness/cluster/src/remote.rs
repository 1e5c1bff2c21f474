//! Clusters the harness did not start, reached through a kubeconfig ([`Cluster::from_kubeconfig`]):
//! exec and logs go through the apiserver (the `pods/exec` and `pods/log` subresources) as
//! `kubectl` does, instead of into an embedded node's run directory.
//!
//! A kubeconfig that is an embedded cluster's own admin kubeconfig
//! (`<run dir>/control-plane/admin.kubeconfig`) attaches to that cluster instead, so exec and
//! logs keep working on embedded clusters, whose simulated nodes serve no kubelet API.

use std::path::{Path, PathBuf};

use futures::AsyncReadExt as _;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, AttachParams, ListParams, LogParams};
use kube_support::error::IoContext;

use super::embedded::{ClusterDescription, NodeDescription, description::DESCRIPTION_FILE};
use super::error::{Error, Result};
use super::{Backend, Cluster};
use pod_runtime::{ExecOutput, ExitStatus};

/// The label holding a node's zone.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

impl Cluster {
    /// The cluster `kubeconfig` points at: the embedded cluster it belongs to, when it is one's
    /// admin kubeconfig, else any cluster reached through the apiserver (see the module docs).
    pub async fn from_kubeconfig(kubeconfig: &Path) -> Result<Cluster> {
        if let Some(run_dir) = embedded_run_dir(kubeconfig) {
            return Cluster::connect(&run_dir).await;
        }
        let client = control_plane::client_from_kubeconfig(kubeconfig).await?;
        let nodes: Api<Node> = Api::all(client.clone());
        let list = nodes
            .list(&ListParams::default())
            .await
            .map_err(Error::kube(format!(
                "listing the nodes of the cluster of {}",
                kubeconfig.display()
            )))?;
        let description = ClusterDescription {
            kubeconfig: kubeconfig.to_path_buf(),
            api_url: String::new(),
            nodes: list
                .items
                .iter()
                .map(|node| NodeDescription {
                    name: node.metadata.name.clone().unwrap_or_default(),
                    zone: node
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(ZONE_LABEL).cloned())
                        .unwrap_or_default(),
                    run_dir: PathBuf::new(),
                    log: PathBuf::new(),
                })
                .collect(),
            pid: 0,
            containers: None,
        };
        Cluster::with_backend(client, Backend::Remote, description).await
    }

    /// Whether this is an embedded cluster (exec, logs and node agents through its run
    /// directory) rather than one reached only through its apiserver.
    pub fn is_embedded(&self) -> bool {
        matches!(self.inner.backend, Backend::Embedded { .. })
    }

    pub(super) async fn remote_exec(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        argv: &[&str],
    ) -> Result<ExecOutput> {
        let pods: Api<Pod> = Api::namespaced(self.inner.streaming.clone(), namespace);
        let what = || format!("exec {argv:?} in {namespace}/{pod} container {container}");
        let params = AttachParams::default()
            .container(container)
            .stdin(false)
            .stdout(true)
            .stderr(true);
        let mut attached = pods
            .exec(pod, argv.iter().copied(), &params)
            .await
            .map_err(Error::kube(what()))?;
        let mut stdout = Vec::new();
        let mut stderr = Vec::new();
        let out = attached.stdout();
        let err = attached.stderr();
        let read_out = async {
            if let Some(mut out) = out {
                tokio::io::AsyncReadExt::read_to_end(&mut out, &mut stdout).await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let read_err = async {
            if let Some(mut err) = err {
                tokio::io::AsyncReadExt::read_to_end(&mut err, &mut stderr).await?;
            }
            Ok::<_, std::io::Error>(())
        };
        let status = attached.take_status();
        let (read_out, read_err) = tokio::join!(read_out, read_err);
        read_out.map_err(Error::io("reading the output of", what()))?;
        read_err.map_err(Error::io("reading the errors of", what()))?;
        let status = match status {
            Some(status) => status.await,
            None => None,
        };
        attached
            .join()
            .await
            .map_err(|e| Error::io("ending", what())(std::io::Error::other(e)))?;
        Ok(ExecOutput {
            status: exit_status(status.as_ref()),
            stdout,
            stderr,
        })
    }

    pub(super) async fn remote_logs(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<String> {
        let pods: Api<Pod> = Api::namespaced(self.client(), namespace);
        let params = LogParams {
            container: Some(container.to_string()),
            previous,
            ..LogParams::default()
        };
        let mut stream = pods
            .log_stream(pod, &params)
            .await
            .map_err(Error::kube(format!(
                "reading the log of {namespace}/{pod} container {container}"
            )))?;
        let mut text = String::new();
        stream.read_to_string(&mut text).await.map_err(Error::io(
            "reading the log of",
            format!("{namespace}/{pod} container {container}"),
        ))?;
        Ok(text)
    }
}

/// The run directory of the embedded cluster whose admin kubeconfig `kubeconfig` is.
fn embedded_run_dir(kubeconfig: &Path) -> Option<PathBuf> {
    let control_plane = kubeconfig.parent()?;
    if control_plane.file_name()? != "control-plane" {
        return None;
    }
    let run_dir = control_plane.parent()?;
    run_dir
        .join(DESCRIPTION_FILE)
        .is_file()
        .then(|| run_dir.to_path_buf())
}

/// The exit status in the `Status` the apiserver sends at the end of an exec: `Success`, or
/// `Failure` with reason `NonZeroExitCode` and the code in `details.causes[ExitCode]`.
fn exit_status(
    status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>,
) -> ExitStatus {
    let Some(status) = status else {
        return ExitStatus::Unknown;
    };
    if status.status.as_deref() == Some("Success") {
        return ExitStatus::Exited(0);
    }
    status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|causes| {
            causes
                .iter()
                .find(|c| c.reason.as_deref() == Some("ExitCode"))
                .and_then(|c| c.message.as_deref()?.parse().ok())
        })
        .map_or(ExitStatus::Unknown, ExitStatus::Exited)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

    use super::*;

    #[test]
    fn exit_codes_come_from_the_exec_status() {
        let success = Status {
            status: Some("Success".into()),
            ..Default::default()
        };
        assert_eq!(exit_status(Some(&success)), ExitStatus::Exited(0));
        let failed = Status {
            status: Some("Failure".into()),
            reason: Some("NonZeroExitCode".into()),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".into()),
                    message: Some("3".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(exit_status(Some(&failed)), ExitStatus::Exited(3));
        assert_eq!(exit_status(None), ExitStatus::Unknown);
    }

    #[test]
    fn an_embedded_admin_kubeconfig_is_recognised_by_its_run_dir() {
        let dir = tempfile::Builder::new()
            .prefix("remote-")
            .tempdir()
            .unwrap();
        let kubeconfig = dir.path().join("control-plane/admin.kubeconfig");
        std::fs::create_dir_all(kubeconfig.parent().unwrap()).unwrap();
        std::fs::write(&kubeconfig, "").unwrap();
        assert_eq!(embedded_run_dir(&kubeconfig), None);
        std::fs::write(dir.path().join(DESCRIPTION_FILE), "{}").unwrap();
        assert_eq!(
            embedded_run_dir(&kubeconfig),
            Some(dir.path().to_path_buf())
        );
        assert_eq!(embedded_run_dir(&dir.path().join("kubeconfig")), None);
    }
}
