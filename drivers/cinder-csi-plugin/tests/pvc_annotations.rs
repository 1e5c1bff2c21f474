//! `--pvc-annotations` on the fake cloud: CreateVolume reads the claim named by the
//! request's extra-create-metadata from the Kubernetes API (here a wiremock API server
//! reached through a kubeconfig, as the Manila driver's test does) and sends its
//! `cinder.csi.openstack.org/affinity` / `anti-affinity` annotations, names resolved to
//! ids, as Cinder's `same_host` / `different_host` scheduler hints; a bad annotation is
//! InvalidArgument naming it, and nothing is created.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use cinder_csi_plugin::cloud::connect;
use cinder_csi_plugin::controller::{Controller, ControllerSettings};
use cinder_csi_plugin::driver::Driver;
use cinder_csi_plugin::identity::identity_service;
use cinder_csi_plugin::pvc::ClaimReader;
use common::{TestResult, fake_global, quick_wait};
use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};
use csi_proto::v1::{self, VolumeCapability};
use fakes::{CloudConfig, FakeCloud};
use serde_json::{Value, json};
use tonic::Code;
use tonic::transport::Channel;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const GIB: i64 = 1 << 30;

/// A fake API server answering for claims `ns1/<name>` with `annotations`.
async fn api_server(claims: &[(&str, Value)]) -> MockServer {
    let server = MockServer::start().await;
    for (name, annotations) in claims {
        Mock::given(method("GET"))
            .and(path(format!(
                "/api/v1/namespaces/ns1/persistentvolumeclaims/{name}"
            )))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": "ns1", "annotations": annotations},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            })))
            .mount(&server)
            .await;
    }
    server
}

fn kubeconfig(
    dir: &std::path::Path,
    server: &MockServer,
) -> Result<std::path::PathBuf, std::io::Error> {
    let file = dir.join("kubeconfig");
    std::fs::write(
        &file,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n\
             users:\n- name: u\n  user:\n    token: not-a-secret\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
             current-context: x\n",
            server.uri()
        ),
    )?;
    Ok(file)
}

fn create_request(name: &str, claim: &str) -> v1::CreateVolumeRequest {
    v1::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: GIB,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: Some(AccessMode {
                mode: Mode::SingleNodeWriter as i32,
            }),
        }],
        parameters: [
            ("csi.storage.k8s.io/pvc/name", claim),
            ("csi.storage.k8s.io/pvc/namespace", "ns1"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        ..Default::default()
    }
}

/// Serves a controller on `fake` (claims read through `claims` when given) on a socket in
/// `dir`; the client and the sender that stops it.
async fn serve(
    fake: &FakeCloud,
    dir: &std::path::Path,
    name: &str,
    claims: Option<ClaimReader>,
) -> Result<(ControllerClient<Channel>, tokio::sync::oneshot::Sender<()>), Box<dyn std::error::Error>>
{
    let controller = Controller::new(
        Arc::new(connect(fake_global(fake, None))?),
        ControllerSettings {
            wait: quick_wait(),
            claims,
            ..ControllerSettings::default()
        },
    );
    let socket = format!("unix://{}", dir.join(format!("{name}.sock")).display());
    let listener = Driver::bind(&socket).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let driver = Driver::new(identity_service(true, false), Some(controller), None);
    tokio::spawn(async move {
        let _ = driver
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    let client = ControllerClient::new(csi_proto::connect(&socket.parse()?).await?);
    Ok((client, stop))
}

async fn create(
    client: &mut ControllerClient<Channel>,
    request: v1::CreateVolumeRequest,
) -> Result<v1::Volume, Box<dyn std::error::Error>> {
    Ok(client
        .create_volume(request)
        .await?
        .into_inner()
        .volume
        .ok_or("no volume")?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_annotations_become_cinder_scheduler_hints() -> TestResult {
    let mut config = CloudConfig::default();
    config.cinder.present = true;
    let fake = FakeCloud::start(config).await?;
    let dir = tempfile::tempdir()?;
    let (mut plain_client, _stop_plain) = serve(&fake, dir.path(), "plain", None).await?;
    let anchor = create(&mut plain_client, create_request("pvc-anchor", "none")).await?;
    let other = create(&mut plain_client, create_request("pvc-other", "none")).await?;

    let server = api_server(&[
        (
            "near",
            json!({
                "cinder.csi.openstack.org/affinity": "pvc-anchor",
                "cinder.csi.openstack.org/anti-affinity": format!(" {}, pvc-anchor ,", other.volume_id),
            }),
        ),
        ("unrelated", json!({"unrelated": "x"})),
        (
            "unknown",
            json!({"cinder.csi.openstack.org/anti-affinity": "no-such-volume"}),
        ),
        (
            "malformed",
            json!({"cinder.csi.openstack.org/affinity": "pvc-anchor,two\nlines"}),
        ),
    ])
    .await;
    let kubeconfig = kubeconfig(dir.path(), &server)?;
    let claims = ClaimReader::connect(None, Some(&kubeconfig)).await?;
    let (mut client, _stop) = serve(&fake, dir.path(), "annotated", Some(claims)).await?;

    let near = create(&mut client, create_request("pvc-near", "near")).await?;
    let stored = fake
        .block_volume(&near.volume_id)
        .ok_or("not in the cloud")?;
    assert_eq!(
        stored.scheduler_hints,
        BTreeMap::from([
            ("same_host".to_string(), vec![anchor.volume_id.clone()]),
            (
                "different_host".to_string(),
                vec![other.volume_id.clone(), anchor.volume_id.clone()]
            ),
        ])
    );
    assert_eq!(near.volume_context.get("affinity"), Some(&anchor.volume_id));
    assert_eq!(
        near.volume_context.get("anti-affinity"),
        Some(&format!("{},{}", other.volume_id, anchor.volume_id))
    );

    let unrelated = create(&mut client, create_request("pvc-unrelated", "unrelated")).await?;
    let stored = fake
        .block_volume(&unrelated.volume_id)
        .ok_or("not in the cloud")?;
    assert!(stored.scheduler_hints.is_empty(), "{stored:?}");

    // Bad annotations and a claim the API server does not know: refused, nothing created.
    let before = fake.block_leftovers().volumes.len();
    for (claim, code, texts) in [
        (
            "unknown",
            Code::InvalidArgument,
            &["cinder.csi.openstack.org/anti-affinity", "no-such-volume"][..],
        ),
        (
            "malformed",
            Code::InvalidArgument,
            &["cinder.csi.openstack.org/affinity", "ns1/malformed"][..],
        ),
        ("absent", Code::NotFound, &["ns1/absent"][..]),
    ] {
        let error = client
            .create_volume(create_request(&format!("pvc-{claim}"), claim))
            .await
            .err()
            .ok_or(format!("claim {claim} was accepted"))?;
        assert_eq!(error.code(), code, "{claim}: {error:?}");
        for text in texts {
            assert!(
                error.message().contains(text),
                "{claim}: {}",
                error.message()
            );
        }
    }
    assert_eq!(fake.block_leftovers().volumes.len(), before);

    // Without the flag the claim is not read and no hint is sent.
    let reads = server
        .received_requests()
        .await
        .ok_or("no recording")?
        .len();
    let flat = create(&mut plain_client, create_request("pvc-flat", "near")).await?;
    assert_eq!(
        server
            .received_requests()
            .await
            .ok_or("no recording")?
            .len(),
        reads
    );
    let stored = fake
        .block_volume(&flat.volume_id)
        .ok_or("not in the cloud")?;
    assert!(stored.scheduler_hints.is_empty(), "{stored:?}");
    assert!(!flat.volume_context.contains_key("affinity"));

    for volume in [near, unrelated, flat, anchor, other] {
        plain_client
            .delete_volume(v1::DeleteVolumeRequest {
                volume_id: volume.volume_id,
                ..Default::default()
            })
            .await?;
    }
    assert!(fake.block_leftovers().volumes.is_empty());
    Ok(())
}
