//! `manila-csi-driver-operator`: installs and manages the Manila CSI driver as the
//! ClusterCSIDriver `manila.csi.openstack.org` asks. Runs in a pod (in-cluster config) or
//! anywhere with a kubeconfig; with leader election two replicas are safe.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use kube_support::go_duration::parse_go_duration as parse_duration;
use manila_operator::OperatorConfig;
use manila_operator::config::{Images, NfsMounter, PDB_V1, PDB_V1BETA1};
use manila_operator::controller::{self, Context};
use manila_operator::identity::IDENTITY;
use manila_operator::release::Release;
use operator_kit::startup::{self, CommonFlags, Starting};

#[derive(Debug, Parser)]
#[command(version, about = "Installs and manages the Manila CSI driver")]
struct Args {
    /// Namespace of the driver, the credentials Secret and the CA ConfigMap.
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: String,
    /// Kubeconfig file; in-cluster configuration when absent.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The Secret with clouds.yaml.
    #[arg(long, default_value = "cloud-credentials")]
    credentials_secret: String,
    /// The cloud of clouds.yaml to use.
    #[arg(long, env = "OS_CLOUD", default_value = "openstack")]
    cloud_name: String,
    /// The ConfigMap with a custom CA bundle (key ca-bundle.pem); optional.
    #[arg(long, default_value = "cloud-provider-config")]
    ca_config_map: String,
    /// How often share types are listed for new StorageClasses.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    share_type_sync_interval: Duration,
    /// How often everything is reconciled without a watch event.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    resync_interval: Duration,
    /// Mount shares by binding this export directory (which must exist on every node at the
    /// same path) instead of with the kernel NFS client: for the fake cloud.
    #[arg(long)]
    nfs_export_root: Option<PathBuf>,
    /// Port of the driver controller pod's liveness probe.
    #[arg(long, default_value_t = 9808)]
    controller_health_port: u16,
    /// Port of the Manila node plugins' liveness probe (a livenessprobe sidecar on every
    /// node, listening on all the node's addresses); unset: no liveness probe on them.
    #[arg(long)]
    node_health_port: Option<u16>,
    /// Port of the NFS node plugins' liveness probe; unset: none.
    #[arg(long)]
    nfs_node_health_port: Option<u16>,
    /// Image of manila-csi-plugin.
    #[arg(long, env = "DRIVER_IMAGE")]
    driver_image: Option<String>,
    /// Image of the NFS node plugin.
    #[arg(long, env = "NFS_DRIVER_IMAGE")]
    nfs_driver_image: Option<String>,
    /// Image of csi-provisioner.
    #[arg(long, env = "PROVISIONER_IMAGE")]
    provisioner_image: Option<String>,
    /// Image of csi-attacher.
    #[arg(long, env = "ATTACHER_IMAGE")]
    attacher_image: Option<String>,
    /// Image of csi-resizer.
    #[arg(long, env = "RESIZER_IMAGE")]
    resizer_image: Option<String>,
    /// Image of csi-snapshotter.
    #[arg(long, env = "SNAPSHOTTER_IMAGE")]
    snapshotter_image: Option<String>,
    /// Image of csi-node-driver-registrar.
    #[arg(long, env = "NODE_DRIVER_REGISTRAR_IMAGE")]
    node_driver_registrar_image: Option<String>,
    /// Image of livenessprobe.
    #[arg(long, env = "LIVENESS_PROBE_IMAGE")]
    liveness_probe_image: Option<String>,
    /// Which release's objects to install: `current`, or `previous` (N-1, the older layout the
    /// upgrade suite starts from; it reports its own version).
    #[arg(long, env = "OPERATOR_RELEASE", default_value = "current")]
    release: Release,
    /// Leader election, metrics and verbosity, as every operator has them.
    #[command(flatten)]
    common: CommonFlags,
}

impl Args {
    fn config(&self) -> OperatorConfig {
        let mut config = OperatorConfig::new(&self.namespace);
        config.set_release(self.release);
        config.credentials_secret = self.credentials_secret.clone();
        config.cloud_name = self.cloud_name.clone();
        config.ca_config_map = self.ca_config_map.clone();
        config.share_type_sync_interval = self.share_type_sync_interval;
        config.resync_interval = self.resync_interval;
        config.controller_health_port = self.controller_health_port;
        config.node_health_port = self.node_health_port;
        config.nfs_node_health_port = self.nfs_node_health_port;
        if let Some(export_root) = &self.nfs_export_root {
            config.nfs_mounter = NfsMounter::Local {
                export_root: export_root.clone(),
            };
        }
        let defaults = Images::default();
        let pick = |given: &Option<String>, default: String| given.clone().unwrap_or(default);
        config.images = Images {
            driver: pick(&self.driver_image, defaults.driver),
            nfs_driver: pick(&self.nfs_driver_image, defaults.nfs_driver),
            provisioner: pick(&self.provisioner_image, defaults.provisioner),
            attacher: pick(&self.attacher_image, defaults.attacher),
            resizer: pick(&self.resizer_image, defaults.resizer),
            snapshotter: pick(&self.snapshotter_image, defaults.snapshotter),
            node_driver_registrar: pick(
                &self.node_driver_registrar_image,
                defaults.node_driver_registrar,
            ),
            liveness_probe: pick(&self.liveness_probe_image, defaults.liveness_probe),
        };
        config
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let hook = startup::init_logging(args.common.verbosity);
    let mut config = args.config();
    let client = kube_support::kube_client::client(args.kubeconfig.as_deref())
        .await
        .context("connecting to Kubernetes")?;
    config.pdb_api_version = pdb_api_version(&client).await;
    let instance = kube_support::instance::name(IDENTITY.operator_name);
    let mut ctx = Context::new(client.clone(), config.clone(), &instance);
    ctx.operator_log_level = Some(hook);
    let metrics = ctx.metrics.clone();
    let ctx = Arc::new(ctx);
    let release = config.release.to_string();
    let starting = Starting {
        namespace: &config.namespace,
        version: &config.version,
        release: &release,
    };
    startup::serve_and_run(
        client,
        &IDENTITY,
        &instance,
        &args.common,
        metrics,
        starting,
        |shutdown| controller::run(ctx, shutdown),
    )
    .await?;
    Ok(())
}

/// The PodDisruptionBudget API the cluster serves: `policy/v1`, or `policy/v1beta1` when the
/// API server does not know `policy/v1` (before Kubernetes 1.21). Any other answer keeps
/// `policy/v1`: a failing apply then says what is wrong.
async fn pdb_api_version(client: &kube::Client) -> &'static str {
    match client.list_api_group_resources(PDB_V1).await {
        Ok(list)
            if list
                .resources
                .iter()
                .any(|r| r.name == "poddisruptionbudgets") =>
        {
            PDB_V1
        }
        Ok(_) => PDB_V1BETA1,
        Err(kube::Error::Api(status)) if status.is_not_found() => PDB_V1BETA1,
        Err(error) => {
            tracing::warn!(%error, "API discovery of {PDB_V1} failed; assuming it is served");
            PDB_V1
        }
    }
}
