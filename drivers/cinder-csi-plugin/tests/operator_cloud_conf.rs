//! The Cinder operator's `cloud.conf` read back by this driver's own parser, then used to
//! reach the fake cloud over TLS with the CA the operator stored beside it: what the
//! operator writes is what the driver reads. (The operator crate may not depend on a driver
//! crate, so the check lives here, with the operator as a dev-dependency.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cinder_csi_plugin::cloud::connect;
use cinder_csi_plugin::cloud_config::{CloudConfig as DriverConfig, MetadataSource};
use cinder_operator::OperatorConfig;
use cinder_operator::cloud_conf::{Inputs, Sources, translate};
use fakes::config::Secret as FakeSecret;
use fakes::{CloudConfig, FakeCloud};

/// A password with every character INI writers and readers disagree about, starting and
/// ending with a double quote (which a reader must not strip a second time). Not leading or
/// trailing blanks: `openstack_client` trims every credential value it reads.
const NASTY_PASSWORD: &str = "\"p;a#s=s:w \"o\" r\\d\t'x'\"";

#[tokio::test]
async fn the_operators_cloud_conf_and_ca_reach_the_cloud_through_the_drivers_parser() {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    config.account.password = FakeSecret::new(NASTY_PASSWORD);
    let fake = FakeCloud::builder(config).tls(true).start().await.unwrap();
    let ca = fake.ca_pem().unwrap();
    let dir = tempfile::tempdir().unwrap();

    let mut sources = Sources::from(&OperatorConfig::new("ns"));
    // The pods mount the driver Secret at /etc/cinder-csi; here its files are in `dir`.
    sources.ca_file = dir.path().join("ca-bundle.pem").display().to_string();
    let user = "[BlockStorage]\ntrust-device-path = false\nnode-volume-attach-limit = 7\n[Metadata]\nsearch-order = metadataService\n";
    let written = translate(
        &Inputs {
            clouds_yaml: &fake.clouds_yaml("openstack"),
            user_config: Some(user),
            ca_bundle: Some(&ca),
            topology: false,
        },
        &sources,
    )
    .unwrap();
    for (key, value) in written.secret_data() {
        std::fs::write(dir.path().join(key), value).unwrap();
    }

    let read = DriverConfig::load(&[dir.path().join("cloud.conf")]).unwrap();
    let account = fake.account();
    assert_eq!(
        read.global.password.as_ref().unwrap().expose(),
        NASTY_PASSWORD
    );
    assert_eq!(
        read.global.username.as_deref(),
        Some(account.user_name.as_str())
    );
    assert_eq!(
        read.global.project_name.as_deref(),
        Some(account.project_name.as_str())
    );
    assert_eq!(read.global.auth_url, fake.auth_url());
    assert_eq!(
        read.global.ca_file.as_deref(),
        Some(dir.path().join("ca-bundle.pem").as_path())
    );
    assert!(read.block_storage.ignore_volume_az);
    assert_eq!(read.block_storage.node_volume_attach_limit, 7);
    assert_eq!(read.search_order, [MetadataSource::MetadataService]);

    // The driver authenticates with it and lists volumes over TLS with the stored CA.
    let cloud = connect(read.global).unwrap();
    assert!(cloud.volumes(None).await.unwrap().is_empty());
}
