//! Whether the driver runs with topology: on only when every compute availability zone is
//! also a volume availability zone, as upstream's operator decides. Otherwise a pod could be
//! scheduled to a node whose zone has no Cinder volumes, and the claim would never provision.
//! The decision carries a reason for the condition that reports it.

use std::collections::BTreeSet;

/// The topology decision and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyDecision {
    /// Topology on: the driver's `--with-topology=true`, the provisioner's
    /// `--feature-gates=Topology=true`, and `[BlockStorage] ignore-volume-az = false`.
    pub enabled: bool,
    /// A short CamelCase reason for the condition.
    pub reason: &'static str,
    /// A sentence for the condition's message, naming the zones.
    pub message: String,
}

/// Decides from the names of the compute zones (Nova) and the volume zones (Cinder); zones
/// that are not available should be left out by the caller. Order and repeats do not matter.
pub fn decide<C, V>(compute: C, volume: V) -> TopologyDecision
where
    C: IntoIterator,
    C::Item: AsRef<str>,
    V: IntoIterator,
    V::Item: AsRef<str>,
{
    let compute: BTreeSet<String> = compute.into_iter().map(|z| z.as_ref().to_owned()).collect();
    let volume: BTreeSet<String> = volume.into_iter().map(|z| z.as_ref().to_owned()).collect();
    let list = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(", ");
    if compute.is_empty() {
        return TopologyDecision {
            enabled: false,
            reason: "NoComputeZones",
            message: "topology is off: Nova lists no available compute availability zone".into(),
        };
    }
    let missing: BTreeSet<String> = compute.difference(&volume).cloned().collect();
    if missing.is_empty() {
        TopologyDecision {
            enabled: true,
            reason: "ZonesMatch",
            message: format!(
                "topology is on: every compute availability zone ({}) is also a volume availability zone ({})",
                list(&compute),
                list(&volume)
            ),
        }
    } else {
        TopologyDecision {
            enabled: false,
            reason: "ZonesDiffer",
            message: format!(
                "topology is off: compute availability zone(s) {} have no Cinder volume availability zone of the same name (compute zones: {}; volume zones: {})",
                list(&missing),
                list(&compute),
                if volume.is_empty() {
                    "none".into()
                } else {
                    list(&volume)
                }
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::decide;

    #[rstest]
    #[case(&["nova"], &["nova"], true, "ZonesMatch")]
    #[case(&["a", "b"], &["b", "a", "a"], true, "ZonesMatch")]
    // More volume zones than compute zones: every node's zone can still provision.
    #[case(&["a"], &["a", "b"], true, "ZonesMatch")]
    #[case(&["a", "b"], &["a"], false, "ZonesDiffer")]
    #[case(&["az1"], &["nova"], false, "ZonesDiffer")]
    #[case(&["a"], &[], false, "ZonesDiffer")]
    #[case(&[], &["nova"], false, "NoComputeZones")]
    fn topology_is_on_only_when_every_compute_zone_is_a_volume_zone(
        #[case] compute: &[&str],
        #[case] volume: &[&str],
        #[case] enabled: bool,
        #[case] reason: &str,
    ) {
        let decision = decide(compute, volume);
        assert_eq!(decision.enabled, enabled, "{decision:?}");
        assert_eq!(decision.reason, reason);
    }

    #[test]
    fn the_reason_names_the_zones_that_have_no_volumes() {
        let decision = decide(["zone-a", "zone-b", "zone-c"], ["zone-a"]);
        assert_eq!(
            decision.message,
            "topology is off: compute availability zone(s) zone-b, zone-c have no Cinder volume availability zone of the same name (compute zones: zone-a, zone-b, zone-c; volume zones: zone-a)"
        );
        let on = decide(["nova"], ["nova"]);
        assert!(on.message.starts_with("topology is on"), "{}", on.message);
    }
}
