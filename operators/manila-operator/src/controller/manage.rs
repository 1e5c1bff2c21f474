//! managementState Managed and Removed: what a reconcile installs, keeps or removes.

use super::*;

pub(super) async fn manage(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let mut report = Report::default();
    let force = driver.spec.management_state == ManagementState::Force;
    let installed = installed_version(driver);
    match downgrade::check(installed, &ctx.config.version, ctx.config.release, force) {
        VersionCheck::Proceed => {}
        VersionCheck::Refuse { message } => return refuse_downgrade(ctx, installed, message).await,
        VersionCheck::Forced { message } => {
            // Once: the status then reports this operator's version.
            tracing::warn!("{message}");
            ctx.recorder
                .publish(driver, EventType::Warning, downgrade::FORCED, message)
                .await;
        }
    }
    report.health(status::OPERATOR_VERSION, &Health::ok("AsExpected", ""));
    let inputs = match cloud::read_inputs(&ctx.client, &ctx.config).await {
        Ok(inputs) => inputs,
        Err(error) => {
            report.failed(status::CREDENTIALS, "InvalidCredentials", error.into());
            return report;
        }
    };
    let share_types = match cloud::probe_manila(&inputs).await {
        Ok(ManilaStatus::Available(types)) => types,
        Ok(ManilaStatus::Disabled { reason, message }) => {
            let installed = driver_installed(ctx).await;
            let message = if installed {
                format!("{message}; the installed driver is kept so volumes can still be unmounted")
            } else {
                format!("{message}; the driver is not installed")
            };
            report.conditions.push(Condition::new(
                status::MANILA_DISABLED,
                Status::True,
                reason.as_str(),
                message,
            ));
            report.health(status::CREDENTIALS, &Health::ok("AsExpected", ""));
            return report;
        }
        Err(error) => {
            report.failed(status::CREDENTIALS, "InvalidCredentials", error.into());
            return report;
        }
    };
    ctx.metrics.share_types_seen(share_types.len());
    report.conditions.push(Condition::new(
        status::MANILA_DISABLED,
        Status::False,
        "AsExpected",
        format!("Manila offers {} share type(s)", share_types.len()),
    ));
    let Some(owner) = owner_reference(driver) else {
        report.error = Some(Error::Invalid(format!(
            "ClusterCSIDriver {DRIVER_NAME} has no uid: cannot own the driver's objects"
        )));
        return report;
    };
    let owner_uid = owner.uid.clone();
    let applier = Applier::new(ctx.client.clone(), FIELD_MANAGER, owner);

    // Credentials first: the pods' hash annotation depends on them.
    let secret_data = secret_sync::driver_secret_data(&inputs, ctx.config.release);
    let credentials_hash = secret_sync::data_hash(&secret_data);
    match driver_secret(&ctx.config, &secret_data) {
        Ok(secret) => match applier.apply(&secret).await {
            Ok(applied) => {
                record_applied(driver, ctx, &applied).await;
                report.health(status::CREDENTIALS, &Health::ok("AsExpected", ""));
            }
            Err(error) => report.failed(status::CREDENTIALS, "SyncFailed", error.into()),
        },
        Err(error) => report.failed(status::CREDENTIALS, "SyncFailed", error),
    }

    let snapshot_crds_present = match Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .get_opt(SNAPSHOT_CLASS_CRD)
        .await
    {
        Ok(found) => found.is_some(),
        Err(error) => {
            tracing::warn!(error = %error, "cannot tell whether the snapshot CRDs exist; assuming not");
            false
        }
    };
    let inputs = AssetInputs {
        config: &ctx.config,
        log_level: driver.spec.log_level.unwrap_or_default(),
        credentials_hash,
        snapshot_crds_present,
    };
    let objects = match assets::render(&inputs) {
        Ok(objects) => objects,
        Err(error) => {
            report.failed(status::STATIC_RESOURCES, "RenderFailed", error.into());
            return report;
        }
    };
    let mut static_failure = None;
    for object in &objects {
        match applier.apply(object).await {
            Ok(applied) => {
                record_applied(driver, ctx, &applied).await;
                if let Some(generation) = applied.generation
                    && matches!(applied.kind.as_str(), "Deployment" | "DaemonSet")
                {
                    report.generations.push(GenerationStatus {
                        group: "apps".into(),
                        resource: format!("{}s", applied.kind.to_ascii_lowercase()),
                        namespace: applied.namespace.clone().unwrap_or_default(),
                        name: applied.name.clone(),
                        last_generation: generation,
                    });
                }
            }
            Err(error) => {
                static_failure.get_or_insert(Error::from(error));
            }
        }
    }
    match static_failure {
        Some(error) => report.failed(status::STATIC_RESOURCES, "ApplyFailed", error),
        None => {
            // Everything wanted is in place: what an earlier release (or configuration)
            // installed and this one does not goes now, e.g. N-1's shared sidecar role.
            let mut wanted: BTreeSet<ObjectKey> = objects.iter().map(ObjectKey::of).collect();
            wanted.insert(ObjectKey {
                api_version: "v1".into(),
                kind: "Secret".into(),
                namespace: Some(ctx.config.namespace.clone()),
                name: ctx.config.driver_secret.clone(),
            });
            match prune::prune(
                &ctx.client,
                &applier,
                &ctx.config.namespace,
                &owner_uid,
                &wanted,
            )
            .await
            {
                Ok(deleted) => {
                    for key in &deleted {
                        record_pruned(driver, ctx, key).await;
                    }
                    report.health(status::STATIC_RESOURCES, &Health::ok("AsExpected", ""));
                }
                Err(error) => report.failed(status::STATIC_RESOURCES, "PruneFailed", error.into()),
            }
        }
    }

    let share_networks = driver
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.manila.as_ref())
        .map(|m| m.share_network_ids.clone())
        .unwrap_or_default();
    let class_state = driver.spec.storage_class_state.unwrap_or_default();
    match storage_classes::sync(
        &ctx.client,
        &share_types,
        &share_networks,
        class_state,
        &ctx.config,
    )
    .await
    {
        Ok(changes) => {
            let skipped: Vec<String> = changes
                .iter()
                .filter_map(|c| match c {
                    ClassChange::Skipped { name, reason } => Some(format!("{name}: {reason}")),
                    _ => None,
                })
                .collect();
            for change in new_changes(ctx, &changes) {
                record_class_change(driver, ctx, change).await;
            }
            let message = format!("{} share type(s)", share_types.len());
            let mut health = Health::ok("AsExpected", message);
            if !skipped.is_empty() {
                // Not degraded: the other classes work; the message says what to configure.
                health.message = format!("skipped: {}", skipped.join("; "));
            }
            report.health(status::STORAGE_CLASSES, &health);
        }
        Err(error) => report.failed(status::STORAGE_CLASSES, "SyncFailed", error.into()),
    }

    workload_health(ctx, &objects, &mut report).await;
    report
}

/// A downgrade refused: nothing is applied, pruned or synced; the installed driver's
/// workloads are still reported on, the status keeps the installed version, and the
/// version condition is Degraded (its first report is a Warning Event) but the driver stays
/// Available as long as its workloads are.
async fn refuse_downgrade(ctx: &Context, installed: Option<&str>, message: String) -> Report {
    tracing::warn!("{message}");
    let mut report = Report {
        driver_version: installed.map(str::to_string),
        ..Report::default()
    };
    report.health(
        status::OPERATOR_VERSION,
        &Health {
            available: true,
            progressing: false,
            degraded: Some(message.clone()),
            reason: downgrade::REFUSED.into(),
            message,
        },
    );
    // The workloads have the same names in every release.
    let inputs = AssetInputs {
        config: &ctx.config,
        log_level: LogLevel::Normal,
        credentials_hash: String::new(),
        snapshot_crds_present: false,
    };
    match assets::render(&inputs) {
        Ok(objects) => workload_health(ctx, &objects, &mut report).await,
        Err(error) => report.failed(status::STATIC_RESOURCES, "RenderFailed", error.into()),
    }
    report
}

/// Whether the driver was installed before (its controller Deployment exists).
pub(super) async fn driver_installed(ctx: &Context) -> bool {
    let api = Api::<Deployment>::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let managed =
        kube::api::ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    match api.list_metadata(&managed).await {
        Ok(list) => !list.items.is_empty(),
        Err(error) => {
            tracing::warn!(error = %error, "cannot list the driver's Deployments");
            true
        }
    }
}

/// managementState Removed: the driver's objects go; StorageClasses, the
/// VolumeSnapshotClass and volumes stay.
pub(super) async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let mut report = Report::default();
    let Some(owner) = owner_reference(driver) else {
        return report;
    };
    let applier = Applier::new(ctx.client.clone(), FIELD_MANAGER, owner);
    let inputs = AssetInputs {
        config: &ctx.config,
        log_level: LogLevel::Normal,
        credentials_hash: String::new(),
        snapshot_crds_present: false,
    };
    let mut objects = match assets::render(&inputs) {
        Ok(objects) => objects,
        Err(error) => {
            report.failed(status::STATIC_RESOURCES, "RenderFailed", error.into());
            return report;
        }
    };
    match driver_secret(&ctx.config, &BTreeMap::new()) {
        Ok(secret) => objects.push(secret),
        Err(error) => report.error = Some(error),
    }
    // Workloads first, then what they use.
    objects.reverse();
    for object in &objects {
        match applier.delete(object).await {
            Ok(true) => {
                let kind = object
                    .types
                    .as_ref()
                    .map(|t| t.kind.clone())
                    .unwrap_or_default();
                let what = describe(&kind, object.namespace().as_deref(), &object.name_any());
                ctx.metrics.object_changed();
                ctx.recorder
                    .publish(
                        driver,
                        EventType::Normal,
                        &format!("{kind}Deleted"),
                        format!("deleted {what} (managementState Removed)"),
                    )
                    .await;
            }
            Ok(false) => {}
            Err(error) => {
                report.error.get_or_insert(error.into());
            }
        }
    }
    let removed = Health::ok(
        "Removed",
        "managementState is Removed: the driver is not installed",
    );
    for prefix in [
        status::CONTROLLER_SERVICE,
        status::NODE_SERVICE,
        status::NFS_NODE_SERVICE,
        status::STATIC_RESOURCES,
    ] {
        report.health(prefix, &removed);
    }
    report
}

/// The driver's flat Secret as an object to apply.
pub(super) fn driver_secret(
    config: &OperatorConfig,
    data: &BTreeMap<String, String>,
) -> Result<DynamicObject> {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(config.driver_secret.clone()),
            namespace: Some(config.namespace.clone()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_string(),
                MANAGED_BY.to_string(),
            )])),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), k8s_openapi::ByteString(v.clone().into_bytes())))
                .collect(),
        ),
        ..Default::default()
    };
    let mut value = serde_json::to_value(&secret).map_err(|e| {
        Error::Invalid(format!(
            "building Secret {}/{}: {e}",
            config.namespace, config.driver_secret
        ))
    })?;
    value["apiVersion"] = serde_json::json!("v1");
    value["kind"] = serde_json::json!("Secret");
    serde_json::from_value(value).map_err(|e| {
        Error::Invalid(format!(
            "building Secret {}/{}: {e}",
            config.namespace, config.driver_secret
        ))
    })
}
