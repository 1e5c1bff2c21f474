//! Controller behaviour against the fake cloud: ValidateVolumeCapabilities (access types,
//! the share's status and protocol).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::{self};
use support::{ControllerEnv, GIB, mount_capability};
use tonic::Code;

#[tokio::test]
async fn validate_volume_capabilities_confirms_mount_and_rejects_block() {
    let mut env = ControllerEnv::start(&[]).await;
    let volume = env.create("pvc-validate", GIB).await.unwrap();
    let mut request = v1::ValidateVolumeCapabilitiesRequest {
        volume_id: volume.volume_id.clone(),
        volume_capabilities: vec![mount_capability(Mode::MultiNodeMultiWriter)],
        secrets: env.secrets.clone(),
        ..Default::default()
    };
    let ok = env
        .client
        .validate_volume_capabilities(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(ok.confirmed.is_some(), "{ok:?}");
    request.volume_capabilities = vec![v1::VolumeCapability {
        access_mode: Some(v1::volume_capability::AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
        access_type: Some(v1::volume_capability::AccessType::Block(Default::default())),
    }];
    let rejected = env
        .client
        .validate_volume_capabilities(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(
        rejected.confirmed.is_none() && rejected.message.contains("block"),
        "{rejected:?}"
    );
    request.volume_id = "00000000-0000-0000-0000-000000000000".into();
    let error = env
        .client
        .validate_volume_capabilities(request)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::NotFound);
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

/// ValidateVolumeCapabilities looks at the share as upstream does: only an `available` share
/// is confirmed; one still creating is Unavailable, one in `error` or `deleting`
/// FailedPrecondition naming the status; a share of another protocol than the selector is
/// not confirmed, with a message (the driver used to confirm all of these).
#[tokio::test]
async fn validate_volume_capabilities_checks_the_shares_status_and_protocol() {
    use fakes::{FaultAction, FaultRule, Operation, Times};
    use openstack_client::Connector;
    use openstack_client::manila::NewShare;

    let mut env = ControllerEnv::start(&[]).await;
    // Shares made straight through the Manila client: available at once, so the checks
    // below see the protocol and the error, not a share still being created.
    env.cloud.set_delays(fakes::Delays::none());
    let client = Connector::new("validate-test".into())
        .connect(&env.secrets)
        .await
        .unwrap();
    let new_share = |name: &str, protocol: &str| NewShare {
        name: name.into(),
        size: 1,
        protocol: protocol.into(),
        share_type: "default".into(),
        ..NewShare::default()
    };
    let secrets = env.secrets.clone();
    let validate = |volume_id: &str| v1::ValidateVolumeCapabilitiesRequest {
        volume_id: volume_id.into(),
        volume_capabilities: vec![mount_capability(Mode::MultiNodeMultiWriter)],
        secrets: secrets.clone(),
        ..Default::default()
    };

    // A share of another protocol: not confirmed, the message names both.
    let ceph = client
        .create_share(&new_share("ceph-share", "CEPHFS"))
        .await
        .unwrap();
    let answer = env
        .client
        .validate_volume_capabilities(validate(&ceph.id))
        .await
        .unwrap()
        .into_inner();
    assert!(answer.confirmed.is_none(), "{answer:?}");
    assert!(
        answer.message.contains("protocol mismatch")
            && answer.message.contains("CEPHFS")
            && answer.message.contains("NFS"),
        "{answer:?}"
    );

    // A share that ended in `error`: FailedPrecondition naming the status.
    env.cloud
        .add_fault(
            FaultRule::new(
                Operation::ShareCreate,
                FaultAction::Error {
                    detail_id: "002".into(),
                    message: None,
                },
            )
            .for_resource("broken")
            .times(Times::Count(1)),
        )
        .unwrap();
    let broken = client
        .create_share(&new_share("broken", "NFS"))
        .await
        .unwrap();
    let error = env
        .client
        .validate_volume_capabilities(validate(&broken.id))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(error.message().contains("status error"), "{error:?}");

    // A share being deleted: FailedPrecondition too.
    let volume = env.create("pvc-going", GIB).await.unwrap();
    env.cloud
        .add_fault(
            FaultRule::new(Operation::ShareDelete, FaultAction::Stuck { status: None })
                .for_resource(volume.volume_id.clone()),
        )
        .unwrap();
    assert!(client.delete_share(&volume.volume_id).await.unwrap());
    let error = env
        .client
        .validate_volume_capabilities(validate(&volume.volume_id))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(error.message().contains("status deleting"), "{error:?}");

    // A share still creating: Unavailable (the CO may ask again).
    env.cloud
        .add_fault(
            FaultRule::new(Operation::ShareCreate, FaultAction::Stuck { status: None })
                .for_resource("slow"),
        )
        .unwrap();
    let slow = client
        .create_share(&new_share("slow", "NFS"))
        .await
        .unwrap();
    let error = env
        .client
        .validate_volume_capabilities(validate(&slow.id))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");
    assert!(error.message().contains("creating"), "{error:?}");

    // What can be deleted is; the stuck shares never finish by design: the seed again.
    env.delete(&ceph.id).await.unwrap();
    env.delete(&broken.id).await.unwrap();
    env.cloud.reset().unwrap();
    env.assert_no_leftovers();
}
