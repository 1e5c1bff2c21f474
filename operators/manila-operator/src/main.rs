//! `manila-csi-driver-operator`: installs and manages the Manila CSI driver as the
//! ClusterCSIDriver `manila.csi.openstack.org` asks. Runs in a pod (in-cluster config) or
//! anywhere with a kubeconfig; with leader election two replicas are safe.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Parser};
use kube_support::go_duration::parse_go_duration as parse_duration;
use kube_support::leader::LeaderElection;
use kube_support::telemetry::level_for;
use manila_operator::OperatorConfig;
use manila_operator::api::LogLevel;
use manila_operator::config::{Images, NfsMounter, PDB_V1, PDB_V1BETA1};
use manila_operator::controller::{self, Context};
use manila_operator::metrics::Metrics;
use manila_operator::release::Release;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

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
    /// Act only while holding the leader Lease (safe with several replicas).
    #[arg(long = "leader-election", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = ArgAction::Set)]
    leader_election: bool,
    /// Validity of the leader Lease after its last renewal.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    leader_election_lease_duration: Duration,
    /// Renew the Lease this long before it expires at the latest.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    leader_election_renew_deadline: Duration,
    /// `host:port` serving Prometheus `/metrics` (off when absent).
    #[arg(long)]
    metrics_address: Option<SocketAddr>,
    /// Which release's objects to install: `current`, or `previous` (N-1, the older layout the
    /// upgrade suite starts from; it reports its own version).
    #[arg(long, env = "OPERATOR_RELEASE", default_value = "current")]
    release: Release,
    /// Verbosity as klog's `-v` (spec.operatorLogLevel overrides it; RUST_LOG wins over both).
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    verbosity: u8,
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

/// Installs the log subscriber; the returned hook changes the level at run time
/// (spec.operatorLogLevel), unless `RUST_LOG` is set.
fn init_logging(verbosity: u8) -> controller::LogLevelHook {
    let from_env = EnvFilter::try_from_default_env().ok();
    let fixed = from_env.is_some();
    let filter = from_env.unwrap_or_else(|| EnvFilter::new(level_for(verbosity)));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(kube_support::telemetry::stderr_layer())
        .try_init();
    let current = std::sync::Mutex::new(None::<LogLevel>);
    Box::new(move |level: LogLevel| {
        if fixed {
            return;
        }
        let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
        if *current == Some(level) {
            return;
        }
        *current = Some(level);
        if let Err(error) = handle.reload(EnvFilter::new(level_for(level.verbosity()))) {
            tracing::warn!(error = %error, "cannot change the log level");
        } else {
            tracing::info!(?level, "operator log level changed");
        }
    })
}

async fn serve_metrics(address: SocketAddr, metrics: Arc<Metrics>) -> anyhow::Result<SocketAddr> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("listening for metrics on {address}"))?;
    let bound = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let metrics = metrics.clone();
            async move { metrics.render() }
        }),
    );
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::warn!(error = %error, "metrics server stopped");
        }
    });
    Ok(bound)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let hook = init_logging(args.verbosity);
    let mut config = args.config();
    let client = kube_support::kube_client::client(args.kubeconfig.as_deref())
        .await
        .context("connecting to Kubernetes")?;
    config.pdb_api_version = pdb_api_version(&client).await;
    let instance = kube_support::instance::name("manila-csi-driver-operator");
    let mut ctx = Context::new(client.clone(), config.clone(), &instance);
    ctx.operator_log_level = Some(hook);
    if let Some(address) = args.metrics_address {
        let bound = serve_metrics(address, ctx.metrics.clone()).await?;
        tracing::info!(%bound, "serving /metrics");
    }
    let ctx = Arc::new(ctx);
    tracing::info!(namespace = %config.namespace, version = %config.version, release = %config.release, "starting");
    if !args.leader_election {
        controller::run(ctx, kube_support::shutdown::signal_received()).await;
        return Ok(());
    }
    let election = LeaderElection {
        lease_name: "manila-csi-driver-operator-lock".into(),
        namespace: config.namespace.clone(),
        identity: format!("{instance}_{}", std::process::id()),
        lease_duration: args.leader_election_lease_duration,
        renew_deadline: args.leader_election_renew_deadline,
    };
    // The controller stops when the signal arrives; so does the election, which then
    // releases the Lease for the next replica.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let work = async move {
        let mut stop_rx = stop_rx;
        controller::run(ctx, async move {
            let _ = stop_rx.wait_for(|stop| *stop).await;
        })
        .await;
        Ok(())
    };
    let shutdown = async move {
        kube_support::shutdown::signal_received().await;
        let _ = stop_tx.send(true);
    };
    election
        .run(client, work, shutdown)
        .await
        .context("leader election")?;
    tracing::info!("stopped");
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
