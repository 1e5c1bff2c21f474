//! Identity Service cases.

use csi_proto::v1::plugin_capability::{self, service, volume_expansion};
use csi_proto::v1::{self};
use regex::Regex;

use crate::sanity::case::{Case, case};
use crate::sanity::context::CaseContext;
use crate::sanity::verdict::{CaseResult, Verdict, ensure, expect_ok};

const GROUP: &str = "Identity Service";

/// The Identity cases.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            GROUP,
            "GetPluginCapabilities",
            "should return appropriate capabilities",
            plugin_capabilities
        ),
        case!(
            GROUP,
            "Probe",
            "should return appropriate information",
            probe
        ),
        case!(
            GROUP,
            "GetPluginInfo",
            "should return appropriate information",
            plugin_info
        ),
    ]
}

async fn plugin_capabilities(cx: &mut CaseContext) -> CaseResult {
    for (label, mut client) in cx.identities() {
        let response = expect_ok(
            client
                .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
                .await,
            &format!("GetPluginCapabilities ({label} endpoint)"),
        )?;
        for capability in response.capabilities {
            match capability.r#type {
                Some(plugin_capability::Type::Service(s)) => {
                    let known = matches!(
                        service::Type::try_from(s.r#type),
                        Ok(service::Type::ControllerService
                            | service::Type::VolumeAccessibilityConstraints
                            | service::Type::GroupControllerService
                            | service::Type::SnapshotMetadataService)
                    );
                    ensure(known, || format!("unknown service capability {}", s.r#type))?;
                }
                Some(plugin_capability::Type::VolumeExpansion(e)) => {
                    let known = matches!(
                        volume_expansion::Type::try_from(e.r#type),
                        Ok(volume_expansion::Type::Online | volume_expansion::Type::Offline)
                    );
                    ensure(known, || {
                        format!("unknown volume expansion mode {}", e.r#type)
                    })?;
                }
                None => return Err(Verdict::Fail("a plugin capability has no type".into())),
            }
        }
    }
    Ok(())
}

async fn probe(cx: &mut CaseContext) -> CaseResult {
    for (label, mut client) in cx.identities() {
        // FailedPrecondition is an allowed answer: "not ready (yet)".
        match client.probe(v1::ProbeRequest {}).await {
            Ok(_) => {}
            Err(status) if status.code() == tonic::Code::FailedPrecondition => {}
            Err(status) => {
                return Err(Verdict::Fail(format!(
                    "Probe ({label} endpoint) failed: {}",
                    crate::sanity::verdict::describe_status(&status)
                )));
            }
        }
    }
    Ok(())
}

async fn plugin_info(cx: &mut CaseContext) -> CaseResult {
    // The spec's rule for names: at most 63 characters, begin and end with a letter,
    // letters, digits, dashes, dots and underscores between.
    let valid = Regex::new(r"^[a-zA-Z][A-Za-z0-9\-._]{0,61}[a-zA-Z]$")
        .map_err(|e| Verdict::Fail(e.to_string()))?;
    for (label, mut client) in cx.identities() {
        let info = expect_ok(
            client.get_plugin_info(v1::GetPluginInfoRequest {}).await,
            &format!("GetPluginInfo ({label} endpoint)"),
        )?;
        ensure(!info.name.is_empty(), || "the plugin name is empty".into())?;
        ensure(info.name.len() <= 63, || {
            format!(
                "the plugin name {:?} is longer than 63 characters",
                info.name
            )
        })?;
        ensure(valid.is_match(&info.name), || {
            format!("the plugin name {:?} does not match {valid}", info.name)
        })?;
        ensure(!info.vendor_version.is_empty(), || {
            "vendor_version is empty (the spec requires it)".into()
        })?;
    }
    Ok(())
}
