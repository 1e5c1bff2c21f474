//! Logs of the code under test in the test's own output.

/// Installs a subscriber writing to the test's output (captured by the test runner), with
/// `RUST_LOG` if set, else `default_filter` (e.g. `"node_agent=info"`). Later calls in the same
/// test binary do nothing.
pub fn init_tracing(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}
