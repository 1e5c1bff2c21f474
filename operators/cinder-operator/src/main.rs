//! `cinder-csi-driver-operator`: for now, `render` prints the manifests the operator installs
//! for its configuration (flags and environment), as YAML documents, without a cluster. The
//! reconcile that applies them comes with the shared operator library.

use std::path::PathBuf;

use anyhow::Context as _;
use cinder_operator::OperatorConfig;
use cinder_operator::assets::{AssetInputs, render};
use cinder_operator::config::DiskSource;
use clap::{ArgAction, Parser, Subcommand};

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
    #[command(subcommand)]
    command: Command,
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
        config.driver_secret = self.driver_secret.clone();
        config.cluster_name = self.cluster_name.clone();
        config.controller_health_port = self.controller_health_port;
        config.default_storage_class = self.default_storage_class;
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
        Command::Render {
            no_topology,
            no_snapshot_class,
        } => {
            let objects = render(&AssetInputs {
                config: &config,
                verbosity: 2,
                config_hash: String::new(),
                topology: !no_topology,
                snapshot_crds_present: !no_snapshot_class,
            })?;
            for object in objects {
                let yaml = serde_yaml::to_string(&object).context("writing YAML")?;
                print!("---\n{yaml}");
            }
        }
    }
    Ok(())
}
