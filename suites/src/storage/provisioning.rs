//! `provisioning`: dynamic provisioning of claims from the driver's StorageClass.

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams};
use kube_support::wait;

use super::WAIT;
use super::bind_claim;
use crate::e2e::workload::{claim, events_about, volume_capacity};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "provisioning";

/// The annotation marking the cluster's default StorageClass.
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should provision a volume of the claim's size and delete it with the claim",
            Needs::NONE,
            provisions_and_deletes
        ),
        test_case!(
            SUITE,
            "should provision a claim without a class from the cluster's default class",
            Needs::NONE,
            default_class
        ),
        test_case!(
            SUITE,
            "should provision storage with mount options",
            Needs::NONE,
            mount_options
        ),
        test_case!(
            SUITE,
            "should fail to provision from a share type Manila does not have, naming it in an event",
            Needs::NONE.manila(),
            unknown_share_type
        ),
    ]
}

/// A claim binds to a PV of the driver with the claim's size; behind it a share of that size
/// named after the PV, with the claim in its metadata; deleting the claim deletes both.
async fn provisions_and_deletes(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let mode = access_mode(ctx);
    let size = ctx.claim_size();
    let data = bind_claim(ctx, &claim("data", Some(&class), &size, mode), None).await?;
    let pv = &data.volume;
    let pv_name = data.volume_name().to_string();
    let driver = pv
        .spec
        .as_ref()
        .and_then(|s| s.csi.as_ref())
        .map(|c| c.driver.clone());
    ensure_eq!(
        driver.as_deref(),
        Some(ctx.driver().name.as_str()),
        "the PV's CSI driver"
    );
    ensure_eq!(
        volume_capacity(pv).as_deref(),
        Some(size.as_str()),
        "the PV's capacity"
    );
    let events = events_about(&ctx.client(), w.namespace(), "data").await?;
    ensure!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("ProvisioningSucceeded")),
        "no ProvisioningSucceeded event about the claim: {events:?}"
    );

    if let (Ok(cloud), true) = (ctx.cloud(), is_manila(ctx)) {
        let share = cloud.share(&data.share_id).await?.ok_or_else(|| {
            TestError::failed(format!(
                "the PV's share {} is not in the cloud",
                data.share_id
            ))
        })?;
        let bytes = kube_support::quantity::parse_bytes(&size).unwrap_or(0);
        let gib = u64::try_from(bytes).unwrap_or(0).div_ceil(1 << 30);
        ensure_eq!(share.size, gib, "the share's size in GiB");
        ensure_eq!(share.status.as_str(), "available", "the share's status");
        ensure_eq!(
            share.name.as_deref(),
            Some(pv_name.as_str()),
            "the share's name"
        );
        ensure_eq!(
            share
                .metadata
                .get("csi.storage.k8s.io/pvc/name")
                .map(String::as_str),
            Some("data"),
            "the share's claim-name metadata"
        );
        ensure_eq!(
            share
                .metadata
                .get("csi.storage.k8s.io/pvc/namespace")
                .map(String::as_str),
            Some(w.namespace()),
            "the share's claim-namespace metadata"
        );
    }

    w.claims.delete("data", &DeleteParams::default()).await?;
    let volumes: Api<PersistentVolume> = Api::all(ctx.client());
    let pv_gone = wait::wait_deleted(&volumes, &pv_name, WAIT).await;
    w.check("PV deleted with the claim", pv_gone).await?;
    if ctx.cloud().is_ok() && is_manila(ctx) {
        super::wait_share_gone(ctx, &data.share_id).await?;
    }
    Ok(())
}

/// With the driver's class marked as the cluster's default, a claim without a class gets it
/// (the DefaultStorageClass admission plugin) and binds.
async fn default_class(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    let classes: Api<StorageClass> = Api::all(ctx.client());
    let found = classes.get(&class).await?;
    let is_default = found
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .is_some_and(|v| v == "true");
    if !is_default {
        return Err(TestError::skip(format!(
            "StorageClass {class} is not the cluster's default class"
        )));
    }
    let data = bind_claim(
        ctx,
        &claim("plain", None, &ctx.claim_size(), access_mode(ctx)),
        None,
    )
    .await?;
    let given = data
        .claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone());
    ensure_eq!(
        given.as_deref(),
        Some(class.as_str()),
        "the class given to the claim"
    );
    Ok(())
}

/// The spec file's supported and required mount options on the class: the PV carries them
/// and a pod mounts the volume with them.
async fn mount_options(ctx: &TestContext<'_>) -> TestResult {
    let info = &ctx.spec().driver_info;
    if info.supported_mount_options.is_empty() {
        return Err(TestError::skip(format!(
            "Driver {} does not define supported mount option",
            info.name
        )));
    }
    let options: Vec<String> = info
        .supported_mount_options
        .union(&info.required_mount_options)
        .cloned()
        .collect();
    let wanted = options.clone();
    let class = ctx
        .storage_class_with("mount-options", move |class| {
            class.mount_options = Some(wanted);
        })
        .await?;
    let w = ctx.workload();
    let data = bind_claim(
        ctx,
        &claim("data", Some(&class), &ctx.claim_size(), access_mode(ctx)),
        None,
    )
    .await?;
    let on_pv = data
        .volume
        .spec
        .as_ref()
        .and_then(|s| s.mount_options.clone())
        .unwrap_or_default();
    ensure_eq!(on_pv, options, "the PV's mount options");
    w.ready_pod(&crate::e2e::workload::pod_with_claim(
        "user",
        "data",
        None,
        "echo ok > /data/ok",
    ))
    .await?;
    ensure_eq!(
        w.exec("user", "cat /data/ok").await?,
        "ok\n",
        "data written with the options"
    );
    w.delete_pods(&["user"]).await?;
    Ok(())
}

/// A class naming a share type Manila does not have: the claim stays Pending with a
/// ProvisioningFailed Warning naming the type and the class, and no share is made.
async fn unknown_share_type(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx
        .storage_class_with("no-such-type", |class| {
            class
                .parameters
                .get_or_insert_with(Default::default)
                .insert("type".into(), "no-such-type".into());
        })
        .await?;
    let w = ctx.workload();
    w.create_claim(&claim(
        "orphan",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    let event = w
        .wait_event("orphan", "ProvisioningFailed", "no-such-type")
        .await?;
    let message = event.message.unwrap_or_default();
    ensure!(
        message.contains(&class),
        "the event does not name the class {class}: {message}"
    );
    ensure_eq!(event.type_.as_deref(), Some("Warning"), "the event's type");
    let pending = w.claims.get("orphan").await?;
    ensure_eq!(
        pending.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending"),
        "the claim's phase"
    );
    if let Ok(cloud) = ctx.cloud() {
        // The provisioner names a claim's volume pvc-<claim uid>.
        let name = format!("pvc-{}", pending.metadata.uid.unwrap_or_default());
        let volumes = cloud.volumes_named(&name).await?;
        ensure!(
            volumes.is_empty(),
            "{}s named {name} exist: {volumes:?}",
            cloud.volume_noun()
        );
    }
    Ok(())
}

/// The access mode the driver's claims ask for: ReadWriteMany when the spec claims RWX (as
/// a Manila share is meant to be used), else the first required mode.
pub fn access_mode(ctx: &TestContext<'_>) -> &'static str {
    use driver_spec::Capability;
    if ctx.spec().has(Capability::Rwx) {
        "ReadWriteMany"
    } else {
        ctx.spec()
            .driver_info
            .required_access_modes
            .first()
            .map_or("ReadWriteOnce", |m| m.as_str())
    }
}

/// Whether the driver under test is a Manila driver (its volumes are Manila shares).
pub fn is_manila(ctx: &TestContext<'_>) -> bool {
    ctx.driver().name.ends_with(crate::e2e::DRIVER_NAME)
}
