//! A cluster named by a kubeconfig, with the driver already installed (by its operator, a
//! chart or by hand). The same tests run; what the runner cannot provide there (a second
//! driver instance in another configuration, the cloud without `--clouds-yaml`) is skipped
//! with the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cluster::Cluster;
use driver_spec::{Capability, DriverSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::api::{Api, ListParams};

use super::super::setup::SetupError;
use super::classes;
use crate::registry::{Cloud, DriverConfig, DriverUnderTest, Target, TargetNode};

/// How an existing cluster is reached.
#[derive(Debug, Clone)]
pub struct ExistingOptions {
    /// Its kubeconfig.
    pub kubeconfig: PathBuf,
    /// The namespace of the driver's pods (for diagnostics and evidence), if known.
    pub driver_namespace: Option<String>,
    /// A clouds.yaml and the cloud in it, to look at shares.
    pub clouds_yaml: Option<(PathBuf, String)>,
}

/// Connects to the cluster of `options.kubeconfig` and checks the driver of `spec` is
/// installed there.
pub async fn connect(spec: &DriverSpec, options: &ExistingOptions) -> Result<Target, SetupError> {
    let kubeconfig = &options.kubeconfig;
    if !kubeconfig.is_file() {
        return Err(SetupError::Cluster(format!(
            "--kubeconfig {}: no such file",
            kubeconfig.display()
        )));
    }
    let cluster = Cluster::from_kubeconfig(kubeconfig).await.map_err(|e| {
        SetupError::Cluster(format!(
            "cannot reach the cluster of {}: {e}",
            kubeconfig.display()
        ))
    })?;
    let client = cluster.client();
    let driver_name = spec.driver_info.name.clone();
    let csidriver = Api::<CSIDriver>::all(client.clone())
        .get_opt(&driver_name)
        .await
        .map_err(|e| SetupError::Cluster(format!("reading CSIDriver {driver_name}: {e}")))?;
    let registered = registered_nodes(&client, &driver_name).await?;
    if csidriver.is_none() && registered.is_empty() {
        return Err(SetupError::Driver(format!(
            "the cluster of {} has no CSIDriver {driver_name} and no node lists it in its CSINode: install the driver first",
            kubeconfig.display()
        )));
    }
    if registered.is_empty() {
        return Err(SetupError::Driver(format!(
            "CSIDriver {driver_name} exists but no node lists the driver in its CSINode: its node plugin is not running"
        )));
    }
    // Kubernetes' default when a driver has no CSIDriver object.
    let attach_required = csidriver
        .as_ref()
        .and_then(|d| d.spec.attach_required)
        .unwrap_or(true);

    let cloud = match &options.clouds_yaml {
        Some((path, name)) => Some(
            Cloud::from_clouds_yaml(path, name)
                .await
                .map_err(|e| SetupError::Cloud(e.to_string()))?,
        ),
        None => None,
    };
    let storage_class = classes::storage_class(&client, spec).await?;
    let snapshot_class = classes::snapshot_class(&client, spec).await?;
    let default = DriverUnderTest {
        config: DriverConfig::Default,
        name: driver_name.clone(),
        namespace: options.driver_namespace.clone(),
        spec: spec.clone(),
        storage_class,
        snapshot_class,
        attach_required,
        cluster: cluster.clone(),
    };
    let mut drivers = BTreeMap::new();
    let mut unavailable = BTreeMap::new();
    if attach_required {
        drivers.insert(
            DriverConfig::AttachRequired,
            DriverUnderTest {
                config: DriverConfig::AttachRequired,
                ..default.clone()
            },
        );
    } else {
        unavailable.insert(
            DriverConfig::AttachRequired,
            format!(
                "needs a driver whose CSIDriver requires attach; {driver_name}'s does not, and only the embedded default deploys a second instance"
            ),
        );
    }
    if spec.has(Capability::Topology) {
        drivers.insert(
            DriverConfig::Topology,
            DriverUnderTest {
                config: DriverConfig::Topology,
                ..default.clone()
            },
        );
    } else {
        unavailable.insert(
            DriverConfig::Topology,
            format!(
                "needs a driver with topology; {driver_name} does not claim capability topology in its spec file"
            ),
        );
    }
    drivers.insert(DriverConfig::Default, default);

    let nodes = schedulable_nodes(&client, &registered).await?;
    let mounts_root = cluster
        .is_embedded()
        .then(|| cluster.run_dir().to_path_buf());
    Ok(Target {
        description: describe(&cluster, kubeconfig),
        cluster,
        nodes,
        drivers,
        unavailable,
        cloud,
        mounts_root,
        environment: None,
        events: None,
    })
}

fn describe(cluster: &Cluster, kubeconfig: &Path) -> String {
    if cluster.is_embedded() {
        format!(
            "embedded cluster in {} (through --kubeconfig {})",
            cluster.run_dir().display(),
            kubeconfig.display()
        )
    } else {
        format!("the cluster of {}", kubeconfig.display())
    }
}

/// The nodes whose CSINode lists `driver`.
async fn registered_nodes(client: &kube::Client, driver: &str) -> Result<Vec<String>, SetupError> {
    let csinodes = Api::<CSINode>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| SetupError::Cluster(format!("listing CSINodes: {e}")))?;
    Ok(csinodes
        .items
        .iter()
        .filter(|c| c.spec.drivers.iter().any(|d| d.name == driver))
        .filter_map(|c| c.metadata.name.clone())
        .collect())
}

/// The nodes pods can go to and the driver runs on: not cordoned, no NoSchedule taint.
async fn schedulable_nodes(
    client: &kube::Client,
    registered: &[String],
) -> Result<Vec<TargetNode>, SetupError> {
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| SetupError::Cluster(format!("listing nodes: {e}")))?;
    Ok(nodes
        .items
        .iter()
        .filter(|node| {
            let spec = node.spec.as_ref();
            let cordoned = spec.and_then(|s| s.unschedulable).unwrap_or(false);
            let tainted = spec
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|taints| taints.iter().any(|t| t.effect == "NoSchedule"));
            !cordoned && !tainted
        })
        .filter_map(|node| {
            let name = node.metadata.name.clone()?;
            registered.contains(&name).then(|| TargetNode {
                zone: node
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("topology.kubernetes.io/zone").cloned()),
                name,
            })
        })
        .collect())
}
