//! Availability zones (`/availability-zones` ≥ 2.7, `/os-availability-zone` below).

use serde_json::json;

use super::Ctx;
use crate::faults::Operation;
use crate::reply::Reply;

/// Lists the seeded zones.
pub(crate) fn list(ctx: &mut Ctx<'_>) -> Reply {
    if let Err(r) = ctx.fault(Operation::AvailabilityZones, &[]) {
        return r;
    }
    let zones: Vec<_> = ctx
        .config
        .manila
        .availability_zones
        .iter()
        .enumerate()
        .map(|(i, name)| {
            json!({
                "id": format!("{:08x}-0000-4000-8000-{:012x}", i + 1, i + 1),
                "name": name,
                "created_at": "2024-01-01T00:00:00.000000",
                "updated_at": null,
            })
        })
        .collect();
    Reply::json(200, json!({"availability_zones": zones}))
}
