//! The report as the ClusterCSIDriver's and the ClusterOperator's status
//! ([`operator_kit::operator_status`]).

use operator_kit::api::ClusterCSIDriver;
use operator_kit::operator_status::{self, Reporter, StatusUpdate};

use super::Context;
use super::report::Report;
use crate::error::Result;
use crate::identity::IDENTITY;

/// Writes the ClusterCSIDriver's status (when it changed) and the ClusterOperator's.
pub(super) async fn write_status(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    report: &Report,
) -> Result<()> {
    let reporter = Reporter {
        identity: &IDENTITY,
        version: &ctx.config.version,
        namespace: &ctx.config.namespace,
    };
    let update = StatusUpdate {
        conditions: &report.conditions,
        driver_version: report.driver_version.clone(),
        ready_replicas: report.ready_replicas,
        generations: &report.generations,
    };
    operator_status::write(&ctx.client, &ctx.recorder, reporter, driver, &update).await?;
    Ok(())
}
