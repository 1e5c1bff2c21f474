//! The whole default `conformance run` (every suite on the embedded default) as a user runs
//! it, with warm caches: prints the set-up steps, the time of each suite and the total, and
//! the target (≤ 5 minutes on the project's 2-core machine).
//!
//! ```sh
//! cargo bench -p suites --bench conformance_run --profile dev   # PARALLEL=n (default 4)
//! ```
//!
//! The first run builds the binaries; the figures that count are from a run after it.
#![allow(missing_docs)]

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;

/// The target for the whole run.
const TARGET: Duration = Duration::from_secs(300);

fn main() -> anyhow::Result<()> {
    let parallel = std::env::var("PARALLEL").unwrap_or_else(|_| "4".into());
    let conformance = workspace_binaries::binary("suites", "conformance")?;
    // Build everything the run needs first, so the figures are of a warm run.
    let binaries = suites::e2e::binaries::IMAGES
        .iter()
        .map(|i| (i.package, i.binary))
        .chain([("node-agent", "node-agent"), ("pod-runtime", "pod-sandbox")])
        .collect::<Vec<_>>();
    workspace_binaries::binaries(&binaries)?;
    let output = tempfile::Builder::new()
        .prefix("conformance-bench-")
        .tempdir()?;
    let started = Instant::now();
    let out = Command::new(&conformance)
        .args(["run", "--plain", "--parallel", &parallel, "--output"])
        .arg(output.path())
        .output()
        .context("running conformance")?;
    let elapsed = started.elapsed();
    let report = std::fs::read_to_string(output.path().join("report.md")).with_context(|| {
        format!(
            "no report; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    println!("conformance run (embedded default, --parallel {parallel}), warm caches:");
    for line in report.lines() {
        // The set-up and suite tables of the report.
        if line.starts_with("| ") && !line.starts_with("| suite | test") {
            println!("  {line}");
        }
        if line.starts_with("## Failures") || line.starts_with("## Tests") {
            break;
        }
    }
    println!(
        "whole run: {:.1} s (target ≤ {} s) {}",
        elapsed.as_secs_f64(),
        TARGET.as_secs(),
        if elapsed <= TARGET { "met" } else { "MISSED" }
    );
    if !out.status.success() {
        anyhow::bail!(
            "the run failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    Ok(())
}
