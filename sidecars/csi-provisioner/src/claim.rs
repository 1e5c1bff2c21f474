//! Claims → volumes: the reconcile of one PersistentVolumeClaim.

use std::collections::BTreeMap;
use std::sync::Arc;

use csi_proto::v1::CreateVolumeRequest;
use csi_proto::v1::controller_service_capability::rpc;
use csi_proto::v1::plugin_capability::service;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube_support::backoff::object_key;
use kube_support::events::EventType;
use sidecar_common::CsiCallError;
use sidecar_common::secrets::{
    SecretKind, SecretRef, TemplateContext, request_secrets, secret_reference,
};

use crate::data_source::content_source;
use crate::request::{FSTYPE_PARAMETER, capacity, driver_parameters, volume_capabilities};
use crate::topology;
use crate::volume::{Provisioned, kind_key, persistent_volume};
use crate::{Context, Error, Result};

/// The PV controller's annotation naming the provisioner of a claim (Kubernetes ≤ 1.22).
pub const ANN_STORAGE_PROVISIONER_BETA: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// The same, GA name (Kubernetes ≥ 1.23).
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The scheduler's choice of node for WaitForFirstConsumer.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// Whether the claim is unbound, alive and annotated for `driver`.
fn wants_provisioning(claim: &PersistentVolumeClaim, driver: &str) -> bool {
    let annotations = claim.annotations();
    let annotated = [ANN_STORAGE_PROVISIONER, ANN_STORAGE_PROVISIONER_BETA]
        .iter()
        .any(|a| annotations.get(*a).map(String::as_str) == Some(driver));
    let unbound = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.as_deref())
        .is_none_or(str::is_empty);
    annotated && unbound && claim.metadata.deletion_timestamp.is_none()
}

/// Reconciles one claim: provisions its volume and PV when it is ours and has none yet.
pub async fn reconcile(claim: Arc<PersistentVolumeClaim>, ctx: Arc<Context>) -> Result<Action> {
    let driver = ctx.driver.info.name.as_str();
    let key = object_key(claim.as_ref());
    if !wants_provisioning(&claim, driver) {
        return Ok(Action::await_change());
    }
    let Some(class_name) = claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
    else {
        return Ok(Action::await_change());
    };
    let classes: Api<StorageClass> = Api::all(ctx.client.clone());
    let Some(class) = classes
        .get_opt(&class_name)
        .await
        .map_err(|e| Error::kube(format!("reading StorageClass {class_name}"), e))?
    else {
        let error = Error::NotReady(format!("StorageClass {class_name:?} not found"));
        ctx.recorder
            .publish(
                claim.as_ref(),
                EventType::Warning,
                "ProvisioningFailed",
                error.to_string(),
            )
            .await;
        return Err(error);
    };
    if class.provisioner != driver {
        return Ok(Action::await_change());
    }
    let selected_node = claim.annotations().get(ANN_SELECTED_NODE).cloned();
    if class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
        && selected_node.is_none()
    {
        return Ok(Action::await_change());
    }
    let uid = claim.uid().unwrap_or_default();
    let pv_name = ctx.config.volume_name(&uid);
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    if pvs
        .get_opt(&pv_name)
        .await
        .map_err(|e| Error::kube(format!("reading PersistentVolume {pv_name}"), e))?
        .is_some()
    {
        // Provisioned before (maybe by an earlier instance): the PV controller binds it.
        ctx.backoff.succeeded(&key);
        return Ok(Action::await_change());
    }
    ctx.recorder
        .publish(
            claim.as_ref(),
            EventType::Normal,
            "Provisioning",
            format!("External provisioner is provisioning volume for claim \"{key}\""),
        )
        .await;
    match provision(&claim, &class, &pv_name, selected_node.as_deref(), &ctx).await {
        Ok(()) => {
            ctx.backoff.succeeded(&key);
            ctx.recorder
                .publish(
                    claim.as_ref(),
                    EventType::Normal,
                    "ProvisioningSucceeded",
                    format!("Successfully provisioned volume {pv_name}"),
                )
                .await;
            tracing::info!(claim = %key, volume = %pv_name, "provisioned");
            Ok(Action::await_change())
        }
        Err(error) => {
            ctx.recorder
                .publish(
                    claim.as_ref(),
                    EventType::Warning,
                    "ProvisioningFailed",
                    format!(
                        "failed to provision volume with StorageClass \"{class_name}\": {error}"
                    ),
                )
                .await;
            Err(error)
        }
    }
}

/// CreateVolume, then the PV.
async fn provision(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    pv_name: &str,
    selected_node: Option<&str>,
    ctx: &Context,
) -> Result<()> {
    let driver = ctx.driver.info.name.as_str();
    let parameters = class.parameters.clone().unwrap_or_default();
    let claim_name = claim.name_any();
    let claim_namespace = claim.namespace().unwrap_or_default();
    let templates = TemplateContext {
        pv_name,
        pvc_name: Some(&claim_name),
        pvc_namespace: Some(&claim_namespace),
        pvc_annotations: Some(claim.annotations()),
    };
    let mut secrets: BTreeMap<&'static str, SecretRef> = BTreeMap::new();
    for kind in SecretKind::ALL {
        if let Some(reference) = secret_reference(kind, &parameters, &templates)? {
            secrets.insert(kind_key(kind), reference);
        }
    }
    let provisioner_secret = secrets.get(kind_key(SecretKind::Provisioner)).cloned();
    let secret_data = request_secrets(&ctx.client, provisioner_secret.as_ref()).await?;
    let fs_type = parameters
        .get(FSTYPE_PARAMETER)
        .cloned()
        .unwrap_or_else(|| ctx.config.default_fstype.clone());
    let mount_options = class.mount_options.clone().unwrap_or_default();
    let range = capacity(claim)?;
    let info = &ctx.driver.info;
    // Topology as upstream: the driver's capability and the `Topology` feature gate.
    let topology = ctx.config.feature_gates.topology
        && info.has_plugin_service(service::Type::VolumeAccessibilityConstraints);
    let accessibility_requirements =
        if topology && (selected_node.is_some() || ctx.config.immediate_topology) {
            topology::requirement(
                &ctx.client,
                driver,
                selected_node,
                class.allowed_topologies.as_deref().unwrap_or_default(),
                ctx.config.strict_topology,
                &claim_name,
            )
            .await?
        } else {
            None
        };
    let volume_content_source = content_source(
        &ctx.client,
        claim,
        driver,
        info.has_controller_rpc(rpc::Type::CloneVolume),
    )
    .await?;
    let request = CreateVolumeRequest {
        name: pv_name.to_string(),
        capacity_range: Some(range),
        volume_capabilities: volume_capabilities(claim, &fs_type, &mount_options)?,
        parameters: driver_parameters(
            &parameters,
            ctx.config.extra_create_metadata.then_some((
                claim_name.as_str(),
                claim_namespace.as_str(),
                pv_name,
            )),
        ),
        secrets: secret_data,
        volume_content_source,
        accessibility_requirements,
        mutable_parameters: Default::default(),
    };
    let volume = ctx
        .call("CreateVolume", ctx.controller().create_volume(request))
        .await?
        .volume
        .ok_or_else(|| {
            Error::Csi(CsiCallError {
                call: "CreateVolume",
                status: tonic::Status::internal("CreateVolume answered without a volume"),
            })
        })?;
    let identity = crate::identity(ctx);
    let pv = persistent_volume(
        claim,
        class,
        &Provisioned {
            pv_name,
            driver,
            volume: &volume,
            requested_bytes: range.required_bytes,
            fs_type: &fs_type,
            secrets: &secrets,
            provisioner_secret: provisioner_secret.as_ref(),
            identity: &identity,
            topology,
        },
    );
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    match pvs.create(&PostParams::default(), &pv).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(Error::kube(
            format!("creating PersistentVolume {pv_name}"),
            e,
        )),
    }
}
