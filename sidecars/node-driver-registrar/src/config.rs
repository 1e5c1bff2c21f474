//! The registrar's flags, named and defaulted as upstream's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, ValueEnum};
use kube_support::go_duration::parse_go_duration as parse_duration;

/// What the binary does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Serve the registration socket until SIGTERM (the default).
    Registration,
    /// Exit 0 when kubelet has registered the plugin (the marker file next to
    /// `--kubelet-registration-path` exists), 1 otherwise: for an exec liveness probe.
    KubeletRegistrationProbe,
}

/// `node-driver-registrar` command line.
#[derive(Clone, Debug, Parser)]
#[command(name = "node-driver-registrar", version, about)]
pub struct Config {
    /// The CSI driver's socket as this container sees it: a path or `unix:///path`.
    #[arg(
        long = "csi-address",
        env = "ADDRESS",
        default_value = "/run/csi/socket"
    )]
    pub csi_address: String,

    /// The CSI driver's socket as kubelet sees it (the endpoint given to kubelet), e.g.
    /// `/var/lib/kubelet/plugins/<driver>/csi.sock`.
    #[arg(long = "kubelet-registration-path", env = "DRIVER_REG_SOCK_PATH")]
    pub kubelet_registration_path: PathBuf,

    /// The directory (kubelet's `plugins_registry`, mounted) where the registration socket
    /// `<driver>-reg.sock` is created.
    #[arg(long = "plugin-registration-path", default_value = "/registration")]
    pub plugin_registration_path: PathBuf,

    /// `registration` (default) or `kubelet-registration-probe`.
    #[arg(long, value_enum, default_value = "registration")]
    pub mode: Mode,

    /// Timeout of each call to the driver; waiting for the driver to be ready logs a line
    /// every such period and goes on.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// `host:port` (or `:port`) serving `/healthz`: 200 when the registration socket exists
    /// and kubelet reported the plugin registered. Off when absent.
    #[arg(long = "http-endpoint")]
    pub http_endpoint: Option<String>,

    /// Log verbosity as klog's `-v`. `RUST_LOG` wins.
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    pub verbosity: u8,
}

impl Config {
    /// Checks what the parser cannot.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.kubelet_registration_path.as_os_str().is_empty() {
            anyhow::bail!("--kubelet-registration-path must not be empty");
        }
        if !self.kubelet_registration_path.is_absolute() {
            anyhow::bail!(
                "--kubelet-registration-path {:?} must be an absolute path (kubelet resolves it on the host)",
                self.kubelet_registration_path
            );
        }
        if self.timeout.is_zero() {
            anyhow::bail!("--timeout must be positive");
        }
        Ok(())
    }

    /// The registration socket for `driver`: `<plugin-registration-path>/<driver>-reg.sock`.
    pub fn registration_socket(&self, driver: &str) -> PathBuf {
        self.plugin_registration_path
            .join(format!("{driver}-reg.sock"))
    }

    /// The marker written when kubelet reports the plugin registered, checked by
    /// `--mode=kubelet-registration-probe`: `registration` next to the driver's socket.
    pub fn registration_marker(&self) -> PathBuf {
        registration_marker(&self.kubelet_registration_path)
    }
}

/// `registration` in the directory of `kubelet_registration_path`.
pub fn registration_marker(kubelet_registration_path: &Path) -> PathBuf {
    kubelet_registration_path
        .parent()
        .unwrap_or_else(|| Path::new("/"))
        .join("registration")
}
