//! What the provisioner's tests and bench share beyond the test kit: the bed they run on,
//! provisioners built from their command line, and namespaces holding the cloud's
//! credentials.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use csi_provisioner::{Config, Provisioner};
use fakes::FakeCloud;
use kube::Client;
use testkit::cloud::{credentials_secret, secret_parameters};
use testkit::objects::namespace;
use testkit::sidecars::{ControllerBed, args};

/// The bed: a control plane, the fake cloud with two zones (`nova`, `zone-b`) and the
/// Manila driver with topology.
pub async fn bed() -> ControllerBed {
    ControllerBed::start(&["nova", "zone-b"], &["--with-topology"]).await
}

/// A provisioner for the driver at `socket` with `extra` flags (it waits for the driver's
/// Probe itself).
pub async fn provisioner(client: Client, socket: &Path, extra: &[&str]) -> Provisioner {
    let config = <Config as clap::Parser>::try_parse_from(args("csi-provisioner", socket, extra));
    Provisioner::new(config.unwrap(), client).await.unwrap()
}

/// Creates the namespace `ns` holding the Secret `manila-creds` with the cloud's
/// credentials, and returns StorageClass `parameters` plus every secret parameter pointing
/// at that Secret.
pub async fn namespace_with_credentials<'a>(
    client: &Client,
    cloud: &FakeCloud,
    ns: &'a str,
    parameters: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    namespace(client, ns).await;
    credentials_secret(client, cloud, ns, "manila-creds").await;
    let mut parameters = parameters.to_vec();
    parameters.extend(secret_parameters("manila-creds", ns));
    parameters
}
