//! `conformance cluster …`: embedded clusters from the command line.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use cluster::embedded::daemon::{self, UpOptions};
use cluster::embedded::is_node_ready;
use cluster::{CLUSTER_DIR_ENV, ClusterDescription, EmbeddedOptions};
use k8s_openapi::api::core::v1::Node;

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start a cluster in the background and wait until its nodes are Ready; prints
    /// `HARNESS_CLUSTER_DIR=<run dir>`.
    Up(UpArgs),
    /// Run a cluster in the foreground until SIGTERM/Ctrl-C (or until --until-pid exits).
    Serve(ServeArgs),
    /// Stop a background cluster and remove its run directory.
    Down(DirArgs),
    /// Show a cluster's processes, API endpoint and nodes.
    Status(DirArgs),
}

/// What the cluster looks like.
#[derive(Debug, Clone, Args)]
pub struct ClusterArgs {
    /// How many nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// The nodes' zones, assigned in turn.
    #[arg(long, value_delimiter = ',', default_value = "zone-a,zone-b,zone-c")]
    zones: Vec<String>,
    /// The nodes' region.
    #[arg(long, default_value = "RegionOne")]
    region: String,
    /// An image served by a host binary: `IMAGE=PATH` (repeatable).
    #[arg(long = "image", value_name = "IMAGE=PATH", value_parser = parse_image)]
    images: Vec<(String, PathBuf)>,
    /// Stop the cluster when the process with this pid exits (e.g. the nextest run).
    #[arg(long)]
    until_pid: Option<u32>,
    /// Keep the run directory (logs) after the cluster stops.
    #[arg(long)]
    keep_run_dir: bool,
}

impl ClusterArgs {
    /// The same options as `cluster serve` arguments.
    fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![
            "--nodes".into(),
            self.nodes.to_string().into(),
            "--zones".into(),
            self.zones.join(",").into(),
            "--region".into(),
            self.region.clone().into(),
        ];
        for (image, path) in &self.images {
            let mut mapping = OsString::from(format!("{image}="));
            mapping.push(path);
            args.extend(["--image".into(), mapping]);
        }
        if let Some(pid) = self.until_pid {
            args.extend(["--until-pid".into(), pid.to_string().into()]);
        }
        if self.keep_run_dir {
            args.push("--keep-run-dir".into());
        }
        args
    }
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// The run directory; default a fresh one under $TMPDIR/occ.
    #[arg(long)]
    run_dir: Option<PathBuf>,
    #[command(flatten)]
    cluster: ClusterArgs,
    /// Also append `HARNESS_CLUSTER_DIR=<run dir>` to this file (nextest's $NEXTEST_ENV).
    #[arg(long)]
    env_file: Option<PathBuf>,
    /// How long the start may take, in seconds.
    #[arg(long, default_value_t = 900)]
    timeout_secs: u64,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The run directory; default a fresh one under $TMPDIR/occ.
    #[arg(long)]
    run_dir: Option<PathBuf>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Args)]
pub struct DirArgs {
    /// The cluster's run directory.
    #[arg(long, env = CLUSTER_DIR_ENV)]
    run_dir: PathBuf,
    /// How long to wait, in seconds.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

fn parse_image(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((image, path)) if !image.is_empty() && !path.is_empty() => {
            Ok((image.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("{s:?} is not IMAGE=PATH")),
    }
}

fn base_dir() -> PathBuf {
    control_plane::run_dir::default_base()
}

pub async fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Up(args) => up(args).await,
        ClusterCommand::Serve(args) => serve(args).await,
        ClusterCommand::Down(args) => {
            eprintln!("stopping the cluster in {}", args.run_dir.display());
            daemon::down(&args.run_dir, Duration::from_secs(args.timeout_secs)).await?;
            eprintln!("stopped");
            Ok(())
        }
        ClusterCommand::Status(args) => status(&args.run_dir).await,
    }
}

async fn up(args: UpArgs) -> anyhow::Result<()> {
    eprintln!(
        "starting a {}-node cluster in the background (zones {})",
        args.cluster.nodes,
        args.cluster.zones.join(",")
    );
    let options = UpOptions {
        run_dir: args.run_dir,
        base_dir: base_dir(),
        serve_args: args.cluster.to_args(),
        conformance: None,
        timeout: Duration::from_secs(args.timeout_secs),
    };
    let run_dir = daemon::up(options, &mut std::io::stderr()).await?;
    let line = format!("{CLUSTER_DIR_ENV}={}", run_dir.display());
    if let Some(env_file) = &args.env_file {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(env_file)
            .with_context(|| format!("opening {}", env_file.display()))?;
        writeln!(file, "{line}").with_context(|| format!("writing {}", env_file.display()))?;
    }
    let description = ClusterDescription::read(&run_dir)?;
    eprintln!(
        "cluster ready: kubectl --kubeconfig {} get nodes",
        description.kubeconfig.display()
    );
    println!("{line}");
    Ok(())
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let ClusterArgs {
        nodes,
        zones,
        region,
        images,
        until_pid,
        keep_run_dir,
    } = args.cluster;
    let options = EmbeddedOptions {
        nodes,
        zones,
        region,
        run_dir: args.run_dir,
        base_dir: base_dir(),
        images,
        keep_run_dir,
        ..EmbeddedOptions::default()
    };
    daemon::serve(options, until_pid).await?;
    Ok(())
}

async fn status(run_dir: &Path) -> anyhow::Result<()> {
    let Some(owner) = daemon::owner(run_dir)? else {
        anyhow::bail!("no cluster running in {}", run_dir.display());
    };
    let description = ClusterDescription::read(run_dir)?;
    println!("run dir:    {}", run_dir.display());
    println!("process:    {}", owner.pid);
    println!("apiserver:  {}", description.api_url);
    println!("kubeconfig: {}", description.kubeconfig.display());
    let cluster = cluster::Cluster::connect(run_dir).await?;
    let nodes: kube::Api<Node> = kube::Api::all(cluster.client());
    for node in &description.nodes {
        let state = match nodes.get_opt(&node.name).await {
            Ok(Some(n)) if is_node_ready(&n) => "Ready".to_string(),
            Ok(Some(_)) => "NotReady".to_string(),
            Ok(None) => "not registered".to_string(),
            Err(e) => format!("unknown ({e})"),
        };
        println!(
            "node:       {} zone {} {state} (log {})",
            node.name,
            node.zone,
            node.log.display()
        );
    }
    Ok(())
}
