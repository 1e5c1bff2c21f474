//! Helpers the fake-cloud tests share: the `[Global]` of the fake's account, a quick wait,
//! a mount capability.
#![allow(dead_code)]

use std::time::Duration;

use cinder_csi_plugin::cloud_config::{Global, Secret};
use cinder_csi_plugin::wait::WaitPolicy;
use csi_proto::v1::VolumeCapability;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};
use fakes::FakeCloud;

/// What the tests return.
pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The `[Global]` section for the fake's account (`password` instead of its own, if given).
pub fn fake_global(fake: &FakeCloud, password: Option<&str>) -> Global {
    let account = fake.account();
    Global {
        auth_url: fake.auth_url(),
        username: Some(account.user_name.clone()),
        password: Some(Secret::new(password.unwrap_or(account.password.expose()))),
        project_name: Some(account.project_name.clone()),
        domain_name: Some(account.domain_name.clone()),
        interface: "public".into(),
        ..Global::default()
    }
}

/// Polls from 20 ms, doubling up to 200 ms, for 30 s.
pub fn quick_wait() -> WaitPolicy {
    WaitPolicy::new(
        Duration::from_millis(20),
        2.0,
        Duration::from_millis(200),
        Duration::from_secs(30),
    )
}

/// A single-node-writer mount capability.
pub fn capability() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}
