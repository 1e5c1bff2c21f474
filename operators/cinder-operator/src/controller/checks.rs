//! The checks before anything is applied, each under its own conditions: the inputs and
//! their translation (`…ConfigController`), the cloud (`…CloudController`) and the zone
//! decision (`…TopologyController`). A failing check ends the reconcile before the apply:
//! an installed driver is never deleted for it (its pods keep their mounts).

use operator_kit::status::{Condition, Health, Status};

use super::Context;
use super::report::Report;
use crate::cloud::{self, CloudError};
use crate::cloud_conf::{self, DriverConfig, Sources};
use crate::identity::{self, TOPOLOGY_ENABLED};
use crate::inputs::{self, InputError};
use crate::zones::TopologyDecision;

/// Reason of `…ConfigControllerDegraded` when the inputs cannot be translated (or the
/// credentials Secret is missing).
pub(super) const INVALID_CONFIG: &str = "InvalidConfig";

/// What the checks found: the driver's configuration for the zone decision.
#[derive(Debug)]
pub(super) struct Checked {
    /// The driver Secret's content.
    pub(super) driver_config: DriverConfig,
    /// The zone decision.
    pub(super) topology: TopologyDecision,
}

/// Reads and translates the inputs, checks the cloud and decides on topology; `None` when a
/// check failed (its part is Degraded in `report`).
pub(super) async fn run(ctx: &Context, report: &mut Report) -> Option<Checked> {
    let sources = Sources::from(&ctx.config);
    let raw = match inputs::read(&ctx.client, &ctx.config).await {
        Ok(raw) => raw,
        Err(error) => {
            let reason = input_reason(&error);
            report.failed(identity::CONFIG, reason, error.into());
            return None;
        }
    };
    // Translated once before the cloud is asked, so a configuration error is reported as
    // such even when the cloud cannot be reached; again below with the zone decision.
    if let Err(error) = cloud_conf::translate(&raw.translation(true), &sources) {
        report.failed(identity::CONFIG, INVALID_CONFIG, error.into());
        return None;
    }
    report.health(
        identity::CONFIG,
        &Health::ok("AsExpected", "the driver's cloud.conf is translated"),
    );
    let topology = match cloud::check(&raw.clouds_yaml, raw.ca_bundle.as_deref(), &sources).await {
        Ok(decision) => decision,
        Err(error) => {
            report.failed(identity::CLOUD, cloud_reason(&error), error.into());
            return None;
        }
    };
    report.health(
        identity::CLOUD,
        &Health::ok("AsExpected", "Keystone, Nova and Cinder answered"),
    );
    ctx.metrics
        .set(&TOPOLOGY_ENABLED, u64::from(topology.enabled));
    report.conditions.extend(topology_conditions(&topology));
    match cloud_conf::translate(&raw.translation(topology.enabled), &sources) {
        Ok(driver_config) => Some(Checked {
            driver_config,
            topology,
        }),
        Err(error) => {
            report.failed(identity::CONFIG, INVALID_CONFIG, error.into());
            None
        }
    }
}

/// The reason of `…ConfigControllerDegraded` for an input that cannot be read.
pub(super) fn input_reason(error: &InputError) -> &'static str {
    match error {
        InputError::Missing(_) => INVALID_CONFIG,
        InputError::Kube { .. } => "ReadFailed",
    }
}

/// The reason of `…CloudControllerDegraded` for a failed cloud check.
pub(super) fn cloud_reason(error: &CloudError) -> &'static str {
    match error {
        CloudError::Tls { .. } => "CertificateProblem",
        CloudError::Rejected { .. } => "CredentialsRejected",
        CloudError::Credentials { .. } => "InvalidCredentials",
        CloudError::Cloud(_) => "CloudError",
    }
}

/// `…TopologyController{Available,Progressing,Degraded}`: Available and not Degraded either
/// way (topology off is a decision, not a fault), both with the decision's reason; the
/// message names the zones.
pub(super) fn topology_conditions(decision: &TopologyDecision) -> [Condition; 3] {
    let prefix = identity::TOPOLOGY;
    [
        Condition::new(
            format!("{prefix}Available"),
            Status::True,
            decision.reason,
            decision.message.clone(),
        ),
        Condition::new(
            format!("{prefix}Progressing"),
            Status::False,
            "AsExpected",
            "",
        ),
        Condition::new(
            format!("{prefix}Degraded"),
            Status::False,
            decision.reason,
            "",
        ),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use operator_kit::status::Status;

    use super::*;
    use crate::cloud_conf::TranslationError;
    use crate::user_config::UserConfigError;
    use crate::zones;

    #[test]
    fn each_cloud_error_has_its_reason() {
        let tls = CloudError::Tls {
            service: "Keystone".into(),
            url: "https://k:5000/v3".into(),
            reason: "invalid peer certificate: UnknownIssuer".into(),
            config_map: "ns/cloud-provider-config".into(),
            key: "ca-bundle.pem".into(),
        };
        let rejected = CloudError::Rejected {
            secret: "ns/cloud-credentials".into(),
            key: "clouds.yaml".into(),
            reason: "401".into(),
        };
        let credentials = CloudError::Credentials {
            secret: "ns/cloud-credentials".into(),
            key: "clouds.yaml".into(),
            reason: "no cloud openstack".into(),
        };
        let other = CloudError::Cloud("Nova unreachable".into());
        for (error, reason) in [
            (tls, "CertificateProblem"),
            (rejected, "CredentialsRejected"),
            (credentials, "InvalidCredentials"),
            (other, "CloudError"),
        ] {
            assert_eq!(cloud_reason(&error), reason);
            let mut report = Report::default();
            let message = error.to_string();
            report.failed(identity::CLOUD, cloud_reason(&error), error.into());
            let degraded = report.condition(identity::CLOUD, "Degraded").unwrap();
            assert_eq!(degraded.type_, "OpenStackCinderCloudControllerDegraded");
            assert_eq!(degraded.status, Status::True);
            assert_eq!(degraded.reason, reason);
            assert_eq!(degraded.message, message);
            assert!(report.error.is_some());
        }
    }

    #[test]
    fn a_translation_error_is_invalid_config_naming_the_config_map_and_key() {
        let error = TranslationError::UserConfig {
            config_map: "ns/cloud-provider-config".into(),
            key: "config".into(),
            source: UserConfigError::LegacyKey("secret-name".into()),
        };
        let mut report = Report::default();
        report.failed(identity::CONFIG, INVALID_CONFIG, error.into());
        let degraded = report.condition(identity::CONFIG, "Degraded").unwrap();
        assert_eq!(degraded.type_, "OpenStackCinderConfigControllerDegraded");
        assert_eq!(degraded.status, Status::True);
        assert_eq!(degraded.reason, "InvalidConfig");
        assert!(
            degraded
                .message
                .starts_with("ConfigMap ns/cloud-provider-config key config: "),
            "{}",
            degraded.message
        );
        assert!(
            degraded.message.contains("secret-name"),
            "{}",
            degraded.message
        );
        let available = report.condition(identity::CONFIG, "Available").unwrap();
        assert_eq!(available.status, Status::False);
    }

    #[test]
    fn a_missing_secret_is_invalid_config_and_an_api_refusal_is_not() {
        let missing = InputError::Missing("Secret ns/cloud-credentials not found".into());
        assert_eq!(input_reason(&missing), INVALID_CONFIG);
        let refused = InputError::Kube {
            what: "Secret ns/cloud-credentials".into(),
            source: kube::Error::LinesCodecMaxLineLengthExceeded,
        };
        assert_eq!(input_reason(&refused), "ReadFailed");
    }

    #[test]
    fn the_topology_conditions_carry_the_decision() {
        for (decision, reason) in [
            (zones::decide(["nova"], ["nova"]), "ZonesMatch"),
            (zones::decide(["a", "b"], ["a"]), "ZonesDiffer"),
            (
                zones::decide(Vec::<&str>::new(), ["nova"]),
                "NoComputeZones",
            ),
        ] {
            let [available, progressing, degraded] = topology_conditions(&decision);
            assert_eq!(
                available.type_,
                "OpenStackCinderTopologyControllerAvailable"
            );
            assert_eq!(available.status, Status::True);
            assert_eq!(available.reason, reason);
            assert_eq!(available.message, decision.message);
            assert_eq!(progressing.status, Status::False);
            assert_eq!(degraded.type_, "OpenStackCinderTopologyControllerDegraded");
            assert_eq!(degraded.status, Status::False);
            assert_eq!(degraded.reason, reason);
        }
        let differ = zones::decide(["a", "b"], ["a"]);
        assert!(topology_conditions(&differ)[0].message.contains("b"));
    }
}
