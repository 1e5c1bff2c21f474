//! `cinder-csi-driver-operator`: without a subcommand it installs and manages the Cinder CSI
//! driver as the ClusterCSIDriver `cinder.csi.openstack.org` asks (in a pod with in-cluster
//! configuration, or anywhere with a kubeconfig; with leader election two replicas are
//! safe). `render` prints the manifests it installs for its configuration, as YAML
//! documents, without a cluster.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use cinder_operator::OperatorConfig;
use cinder_operator::assets::{AssetInputs, render};
use cinder_operator::config::{DiskSource, Release};
use cinder_operator::controller::{self, Context};
use cinder_operator::identity::IDENTITY;
use clap::{ArgAction, Parser, Subcommand};
use kube_support::go_duration::parse_go_duration as parse_duration;
use operator_kit::startup::{self, CommonFlags, Starting};

#[derive(Debug, Parser)]
#[command(version, about = "Installs and manages the Cinder CSI driver")]
struct Args {
    /// Namespace of the driver, the credentials Secret and the config ConfigMap.
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "openshift-cluster-csi-drivers"
    )]
    namespace: String,
    /// Kubeconfig file; in-cluster configuration when absent.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The Secret with clouds.yaml (key clouds.yaml).
    #[arg(long, default_value = "cloud-credentials")]
    credentials_secret: String,
    /// The cloud of clouds.yaml to use.
    #[arg(long, env = "OS_CLOUD", default_value = "openstack")]
    cloud_name: String,
    /// The ConfigMap with the user's INI configuration (key config) and a CA bundle (key
    /// ca-bundle.pem); optional, as are both keys.
    #[arg(long, default_value = "cloud-provider-config")]
    config_map: String,
    /// How often everything is reconciled without a watch event.
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    resync_interval: Duration,
    /// The Secret the operator writes for the driver (cloud.conf and the CA bundle).
    #[arg(long, default_value = "openstack-cinder-config")]
    driver_secret: String,
    /// The driver's --cluster (volume metadata cinder.csi.openstack.org/cluster).
    #[arg(long, default_value = "kubernetes")]
    cluster_name: String,
    /// The embedded cluster's directory holding every node's disk directory, mounted into
    /// the node plugin at the same path; absent on real clouds.
    #[arg(long)]
    disk_root: Option<PathBuf>,
    /// Port of the driver controller pod's liveness probe.
    #[arg(long, default_value_t = 10301)]
    controller_health_port: u16,
    /// Make the StorageClass standard-csi the cluster's default class.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false,
          action = ArgAction::Set)]
    default_storage_class: bool,
    /// Image of cinder-csi-plugin.
    #[arg(long, env = "DRIVER_IMAGE")]
    driver_image: Option<String>,
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
    /// Which release's objects to install: `current`, or `previous` (N-1, the older layout
    /// the upgrade tests start from; it reports `<version>-previous`).
    #[arg(long, env = "OPERATOR_RELEASE", default_value = "current")]
    release: Release,
    /// Leader election, metrics and verbosity, as every operator has them.
    #[command(flatten)]
    common: CommonFlags,
    /// What to do; without one, run the operator.
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the driver's manifests as YAML documents.
    Render {
        /// Render with topology off (as when the compute and volume zones differ).
        #[arg(long)]
        no_topology: bool,
        /// Leave out the VolumeSnapshotClass (as when the snapshot CRDs are missing).
        #[arg(long)]
        no_snapshot_class: bool,
    },
}

impl Args {
    fn operator_config(&self) -> OperatorConfig {
        let mut config = OperatorConfig::new(&self.namespace);
        config.credentials_secret = self.credentials_secret.clone();
        config.cloud_name = self.cloud_name.clone();
        config.config_map = self.config_map.clone();
        config.resync_interval = self.resync_interval;
        config.driver_secret = self.driver_secret.clone();
        config.cluster_name = self.cluster_name.clone();
        config.controller_health_port = self.controller_health_port;
        config.default_storage_class = self.default_storage_class;
        config.set_release(self.release);
        if let Some(root) = &self.disk_root {
            config.disk_source = DiskSource::DiskRoot(root.clone());
        }
        let images = &mut config.images;
        for (slot, flag) in [
            (&mut images.driver, &self.driver_image),
            (&mut images.provisioner, &self.provisioner_image),
            (&mut images.attacher, &self.attacher_image),
            (&mut images.resizer, &self.resizer_image),
            (&mut images.snapshotter, &self.snapshotter_image),
            (
                &mut images.node_driver_registrar,
                &self.node_driver_registrar_image,
            ),
            (&mut images.liveness_probe, &self.liveness_probe_image),
        ] {
            if let Some(image) = flag {
                slot.clone_from(image);
            }
        }
        config
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = args.operator_config();
    match args.command {
        Some(Command::Render {
            no_topology,
            no_snapshot_class,
        }) => print_manifests(&config, !no_topology, !no_snapshot_class),
        None => tokio::runtime::Runtime::new()
            .context("starting the async runtime")?
            .block_on(run(&args, config)),
    }
}

/// Prints the driver's manifests as YAML documents.
fn print_manifests(
    config: &OperatorConfig,
    topology: bool,
    snapshot_crds_present: bool,
) -> anyhow::Result<()> {
    let objects = render(&AssetInputs {
        config,
        verbosity: 2,
        config_hash: String::new(),
        topology,
        snapshot_crds_present,
    })?;
    for object in objects {
        let yaml = serde_yaml::to_string(&object).context("writing YAML")?;
        print!("---\n{yaml}");
    }
    Ok(())
}

/// Runs the operator until SIGTERM/SIGINT.
async fn run(args: &Args, config: OperatorConfig) -> anyhow::Result<()> {
    let hook = startup::init_logging(args.common.verbosity);
    let client = kube_support::kube_client::client(args.kubeconfig.as_deref())
        .await
        .context("connecting to Kubernetes")?;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn without_a_subcommand_the_operator_runs_with_the_contracts_defaults() {
        let args =
            Args::try_parse_from(["cinder-csi-driver-operator", "--namespace", "ns"]).unwrap();
        assert!(args.command.is_none());
        assert!(args.common.leader_election);
        let config = args.operator_config();
        assert_eq!(config.namespace, "ns");
        assert_eq!(config.credentials_secret, "cloud-credentials");
        assert_eq!(config.clouds_yaml_key, "clouds.yaml");
        assert_eq!(config.config_map, "cloud-provider-config");
        assert_eq!(config.config_key, "config");
        assert_eq!(config.ca_bundle_key, "ca-bundle.pem");
        assert_eq!(config.driver_secret, "openstack-cinder-config");
        assert_eq!(config.resync_interval, Duration::from_secs(600));
        assert!(!config.default_storage_class);
    }

    #[test]
    fn the_run_flags_reach_the_configuration_and_render_stays() {
        let args = Args::try_parse_from([
            "cinder-csi-driver-operator",
            "--namespace=ns",
            "--credentials-secret=creds",
            "--cloud-name=other",
            "--config-map=conf",
            "--resync-interval=30s",
            "--disk-root=/tmp/disks",
            "--default-storage-class",
            "--leader-election=false",
            "-v",
            "4",
            "render",
            "--no-topology",
        ])
        .unwrap();
        assert!(matches!(
            args.command,
            Some(Command::Render {
                no_topology: true,
                no_snapshot_class: false
            })
        ));
        assert!(!args.common.leader_election);
        assert_eq!(args.common.verbosity, 4);
        let config = args.operator_config();
        assert_eq!(config.credentials_secret, "creds");
        assert_eq!(config.cloud_name, "other");
        assert_eq!(config.config_map, "conf");
        assert_eq!(config.resync_interval, Duration::from_secs(30));
        assert_eq!(
            config.disk_source,
            DiskSource::DiskRoot(PathBuf::from("/tmp/disks"))
        );
        assert!(config.default_storage_class);
    }
}
