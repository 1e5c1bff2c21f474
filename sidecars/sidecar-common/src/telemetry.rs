//! Logging set-up for sidecar binaries: `tracing` to stderr, level from `-v` unless
//! `RUST_LOG` says otherwise.

use tracing_subscriber::EnvFilter;

/// The tracing level klog's `-v` corresponds to.
pub fn level_for(verbosity: u8) -> &'static str {
    match verbosity {
        0 | 1 => "warn",
        2 | 3 => "info",
        4 => "debug",
        _ => "trace",
    }
}

/// Installs the global subscriber (once; later calls are ignored).
pub fn init(verbosity: u8) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level_for(verbosity)));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
