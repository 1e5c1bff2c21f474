//! What the resizer's tests share beyond the test kit: resizers built from their command
//! line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use csi_resizer::{Config, Resizer};
use kube::Client;
use testkit::sidecars::args;

/// A resizer for the driver at `socket` (it waits for the driver's Probe itself).
pub async fn resizer(client: Client, socket: &Path) -> Resizer {
    let config = <Config as clap::Parser>::try_parse_from(args("csi-resizer", socket, &[]));
    Resizer::new(config.unwrap(), client).await.unwrap()
}
