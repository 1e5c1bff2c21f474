//! `fake-openstack`: serves the fake Keystone + Manila cloud on a port, seeded from flags
//! or a YAML file, writes a `clouds.yaml` and the flat `os-*` secret, and exits cleanly on
//! Ctrl-C (SIGINT) or SIGTERM.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use fakes::{CloudConfig, Delays, FakeCloud, OpenStackRelease, SecretKind, ShareTypeSeed};

/// Serve a stateful fake OpenStack cloud (Keystone v3 + Manila v2).
#[derive(Debug, Parser)]
#[command(name = "fake-openstack", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "FAKE_OPENSTACK_LISTEN", default_value = "127.0.0.1")]
    listen: IpAddr,
    /// Port to listen on (0: any free port).
    #[arg(long, env = "FAKE_OPENSTACK_PORT", default_value_t = 8786)]
    port: u16,
    /// YAML seed (see fixtures/fake-cloud/); the flags below override it.
    #[arg(long, env = "FAKE_OPENSTACK_SEED")]
    seed: Option<PathBuf>,
    /// The OpenStack release to emulate: 2025.1, 2025.2 or 2026.1 (default: the seed's,
    /// else the newest). It sets each service's highest microversion unless the seed sets
    /// a `max_microversion`.
    #[arg(long, env = "FAKE_OPENSTACK_RELEASE", value_name = "RELEASE")]
    openstack_release: Option<OpenStackRelease>,
    /// Directory for the share directories (default: a temporary one, removed on exit).
    #[arg(long)]
    backend_root: Option<PathBuf>,
    /// Share type to offer (repeatable; replaces the seed's types). DHSS false, snapshots on.
    #[arg(long = "share-type", value_name = "NAME")]
    share_types: Vec<String>,
    /// The default share type (must be one of the types).
    #[arg(long)]
    default_share_type: Option<String>,
    /// Availability zone (repeatable; replaces the seed's zones).
    #[arg(long = "availability-zone", value_name = "NAME")]
    availability_zones: Vec<String>,
    /// A cloud without Manila: not in the catalog, its URLs answer 404.
    #[arg(long)]
    no_manila: bool,
    /// Manila present but `GET /types` answers 403.
    #[arg(long)]
    types_forbidden: bool,
    /// Serve Cinder v3 and Nova v2.1 too (block storage; attaching needs root and loop
    /// devices).
    #[arg(long)]
    cinder: bool,
    /// A Nova server `NAME=ZONE` (repeatable; implies --cinder): its node's metadata
    /// document names it, and attached volumes appear in `<backend>/servers/NAME/by-id`.
    #[arg(long = "server", value_name = "NAME=ZONE")]
    servers: Vec<String>,
    /// Delay of every asynchronous transition, in milliseconds.
    #[arg(long, value_name = "MS")]
    delay_ms: Option<u64>,
    /// Token lifetime in seconds.
    #[arg(long, value_name = "SECONDS")]
    token_lifetime: Option<u64>,
    /// Serve HTTPS with a CA generated at start (its certificate goes to --write-ca, or next
    /// to --write-clouds-yaml as fake-openstack-ca.pem; clouds.yaml's `cacert` names it).
    #[arg(long)]
    tls: bool,
    /// With --tls: write the CA certificate (PEM) here.
    #[arg(long, value_name = "PATH", requires = "tls")]
    write_ca: Option<PathBuf>,
    /// Write a clouds.yaml for this cloud here.
    #[arg(long, value_name = "PATH")]
    write_clouds_yaml: Option<PathBuf>,
    /// Name of the cloud in the written clouds.yaml.
    #[arg(long, default_value = "fake")]
    cloud_name: String,
    /// Write the flat os-* secret here (JSON if the path ends in .json, else YAML).
    #[arg(long, value_name = "PATH")]
    write_secret: Option<PathBuf>,
    /// Which credential the written secret carries.
    #[arg(long, value_enum, default_value_t = Kind::Password)]
    secret_kind: Kind,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Kind {
    Password,
    ApplicationCredential,
}

fn seed(args: &Args) -> anyhow::Result<CloudConfig> {
    let mut config = match &args.seed {
        Some(path) => CloudConfig::from_yaml_file(path)?,
        None => CloudConfig::default(),
    };
    if let Some(release) = args.openstack_release {
        config.release = release;
    }
    let m = &mut config.manila;
    if !args.share_types.is_empty() {
        m.share_types = args.share_types.iter().map(ShareTypeSeed::named).collect();
        if m.default_share_type
            .as_ref()
            .is_some_and(|d| !args.share_types.contains(d))
        {
            m.default_share_type = args.share_types.first().cloned();
        }
    }
    if let Some(d) = &args.default_share_type {
        m.default_share_type = Some(d.clone());
    }
    if !args.availability_zones.is_empty() {
        m.availability_zones = args.availability_zones.clone();
    }
    if args.no_manila {
        m.present = false;
    }
    if args.types_forbidden {
        m.types_forbidden = true;
    }
    if let Some(ms) = args.delay_ms {
        m.delays = Delays::uniform(ms);
        config.cinder.delays = fakes::CinderDelays::uniform(ms);
    }
    if args.cinder || !args.servers.is_empty() {
        config.cinder.present = true;
    }
    for server in &args.servers {
        let Some((name, zone)) = server.split_once('=') else {
            anyhow::bail!("--server {server:?} is not NAME=ZONE");
        };
        config.nova.servers.push(fakes::ServerSeed {
            name: name.into(),
            availability_zone: zone.into(),
            id: None,
            disk_dir: None,
        });
    }
    if let Some(secs) = args.token_lifetime {
        config.token_lifetime_secs = secs;
    }
    config.validate()?;
    Ok(config)
}

/// Writes `text` to `path`, creating its parent directories.
fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| {
            format!(
                "cannot create {} (the directory of {})",
                parent.display(),
                path.display()
            )
        })?;
    }
    // Credentials: readable by the owner only. `mode` applies to a new file only, so an
    // existing one (perhaps world-readable) is restricted before anything is written to it.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} readable by its owner only", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

async fn shutdown_signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kube_support::telemetry::init_with_default("info");
    let args = Args::parse();
    let config = seed(&args)?;
    let cinder = config.cinder.present;
    let (manila, types, zones) = (
        config.manila.present,
        config
            .manila
            .share_types
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>(),
        config.manila.availability_zones.clone(),
    );
    let mut builder = FakeCloud::builder(config).listen(SocketAddr::new(args.listen, args.port));
    if let Some(root) = &args.backend_root {
        builder = builder.backend_root(root);
    }
    let cloud = builder.tls(args.tls).start().await?;
    // The CA is written where the user asked (or beside clouds.yaml): the cloud's own copy
    // goes when it stops.
    let ca_path = args.write_ca.clone().or_else(|| {
        args.write_clouds_yaml
            .as_ref()
            .filter(|_| args.tls)
            .map(|p| p.with_file_name("fake-openstack-ca.pem"))
    });
    if let (Some(path), Some(pem)) = (&ca_path, cloud.ca_pem()) {
        write_file(path, &pem)?;
        tracing::info!(path = %path.display(), "wrote the CA certificate");
    }
    if let Some(path) = &args.write_clouds_yaml {
        let mut text = cloud.clouds_yaml(&args.cloud_name);
        if let (Some(own), Some(written)) = (cloud.ca_file(), &ca_path) {
            text = text.replace(&own.display().to_string(), &written.display().to_string());
        }
        write_file(path, &text)?;
        tracing::info!(path = %path.display(), cloud = %args.cloud_name, "wrote clouds.yaml");
    }
    if let Some(path) = &args.write_secret {
        let kind = match args.secret_kind {
            Kind::Password => SecretKind::Password,
            Kind::ApplicationCredential => SecretKind::ApplicationCredential,
        };
        let secret = cloud.secret(kind);
        let text = if path.extension().is_some_and(|e| e == "json") {
            serde_json::to_string_pretty(&secret)?
        } else {
            serde_yaml::to_string(&secret)?
        };
        write_file(path, &text)?;
        tracing::info!(path = %path.display(), "wrote the os-* secret");
    }
    let account = cloud.account();
    tracing::info!(
        keystone = %cloud.auth_url(),
        manila = %if manila { cloud.manila_url() } else { "absent".into() },
        control = %cloud.control_url(),
        backend = %cloud.backend_root().display(),
        release = %cloud.release(),
        user = %account.user_name,
        project = %account.project_name,
        share_types = ?types,
        availability_zones = ?zones,
        "fake OpenStack cloud serving"
    );
    if cinder {
        tracing::info!(cinder = %cloud.cinder_url(), nova = %cloud.nova_url(), "block storage serving");
    }
    if types.is_empty() && manila {
        tracing::warn!("Manila has no share types");
    }
    let signal = shutdown_signal().await?;
    tracing::info!(signal, "stopping");
    drop(cloud);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn flags_override_seed() {
        let args = Args::parse_from([
            "fake-openstack",
            "--share-type",
            "gold",
            "--share-type",
            "silver",
            "--no-manila",
            "--delay-ms",
            "5",
            "--availability-zone",
            "az1",
        ]);
        let c = seed(&args).unwrap();
        assert_eq!(c.manila.share_types.len(), 2);
        assert_eq!(c.manila.default_share_type.as_deref(), Some("gold"));
        assert!(!c.manila.present);
        assert_eq!(c.manila.delays.share_create_ms, 5);
        assert_eq!(c.manila.availability_zones, ["az1"]);
    }

    #[test]
    fn bad_default_type_is_named() {
        let args = Args::parse_from(["fake-openstack", "--default-share-type", "nope"]);
        let err = seed(&args).unwrap_err().to_string();
        assert!(err.contains("\"nope\""), "{err}");
    }

    #[test]
    fn the_release_flag_sets_the_seeds_release() {
        let args = Args::parse_from(["fake-openstack"]);
        assert_eq!(seed(&args).unwrap().release, OpenStackRelease::V2026_1);
        let args = Args::parse_from(["fake-openstack", "--openstack-release", "2025.1"]);
        let c = seed(&args).unwrap();
        assert_eq!(c.release, OpenStackRelease::V2025_1);
        assert_eq!(c.manila_max_microversion().to_string(), "2.89");
        let err = Args::try_parse_from(["fake-openstack", "--openstack-release", "2024.2"])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("expected one of 2025.1, 2025.2, 2026.1"),
            "{err}"
        );
    }
}
