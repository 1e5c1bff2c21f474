//! [`PodBuilder`]: the test pods of the storage suites, beyond [`pod_with_claim`]'s one claim
//! at `/data`: several claims, read-only and subPath mounts, a pod security context
//! (fsGroup, user), node pinning, anti-affinity between pods, raw block devices
//! (`volumeDevices`) and the command.
//!
//! [`pod_with_claim`]: super::pod_with_claim

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, PersistentVolumeClaimVolumeSource, Pod, PodAffinityTerm, PodAntiAffinity,
    PodSecurityContext, PodSpec, Volume, VolumeDevice, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::objects::TEST_IMAGE;

/// The label every pod of a [`PodBuilder`] carries, for anti-affinity between them.
pub const TEST_POD_LABEL: &str = "conformance.openstack-csi.io/test-pod";

/// One mount of a claim into the pod's container.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClaimMount {
    claim: String,
    path: String,
    read_only: bool,
    sub_path: Option<String>,
    /// A raw block device at `path` (`volumeDevices`) rather than a mount.
    device: bool,
}

/// Builds a test pod: one container `app` running a shell script, then sleeping until
/// deleted (SIGTERM ends it at once).
///
/// ```
/// use suites::e2e::workload::PodBuilder;
/// let pod = PodBuilder::new("reader", "cat /data/f")
///     .claim("data", "/data")
///     .read_only_claim("shared", "/shared")
///     .node("node-1")
///     .build();
/// assert_eq!(pod.spec.unwrap().volumes.unwrap().len(), 2);
/// ```
#[derive(Debug, Clone)]
pub struct PodBuilder {
    name: String,
    script: String,
    mounts: Vec<ClaimMount>,
    node: Option<String>,
    node_selector: BTreeMap<String, String>,
    avoid_group: Option<String>,
    group: Option<String>,
    fs_group: Option<i64>,
    run_as_user: Option<i64>,
    run_once: bool,
}

impl PodBuilder {
    /// A pod `name` running `script` (`sh -c`).
    pub fn new(name: &str, script: &str) -> Self {
        PodBuilder {
            name: name.into(),
            script: script.into(),
            mounts: Vec::new(),
            node: None,
            node_selector: BTreeMap::new(),
            avoid_group: None,
            group: None,
            fs_group: None,
            run_as_user: None,
            run_once: false,
        }
    }

    /// Mounts the claim `claim` read-write at `path`.
    pub fn claim(mut self, claim: &str, path: &str) -> Self {
        self.mounts.push(ClaimMount {
            claim: claim.into(),
            path: path.into(),
            read_only: false,
            sub_path: None,
            device: false,
        });
        self
    }

    /// Gives the container the claim `claim` (a `volumeMode: Block` claim) as the device
    /// file `path` (`volumeDevices`).
    pub fn device(mut self, claim: &str, path: &str) -> Self {
        self.mounts.push(ClaimMount {
            claim: claim.into(),
            path: path.into(),
            read_only: false,
            sub_path: None,
            device: true,
        });
        self
    }

    /// Mounts the claim `claim` read-only at `path` (the volume and the mount are both
    /// read-only, as upstream's read-only tests make them).
    pub fn read_only_claim(mut self, claim: &str, path: &str) -> Self {
        self.mounts.push(ClaimMount {
            claim: claim.into(),
            path: path.into(),
            read_only: true,
            sub_path: None,
            device: false,
        });
        self
    }

    /// Mounts the directory `sub_path` of the claim `claim` at `path`.
    pub fn claim_sub_path(mut self, claim: &str, sub_path: &str, path: &str) -> Self {
        self.mounts.push(ClaimMount {
            claim: claim.into(),
            path: path.into(),
            read_only: false,
            sub_path: Some(sub_path.into()),
            device: false,
        });
        self
    }

    /// Pins the pod to `node` (its hostname label).
    pub fn node(mut self, node: &str) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Adds a node selector label (e.g. the spec file's `NodeSelectors`).
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector.insert(key.into(), value.into());
        self
    }

    /// Labels the pod as a member of `group` and keeps it off the nodes of the group's other
    /// pods (required anti-affinity on the hostname), as upstream's multi-node tests do.
    pub fn spread_in(mut self, group: &str) -> Self {
        self.group = Some(group.into());
        self.avoid_group = Some(group.into());
        self
    }

    /// The pod's `securityContext.fsGroup`.
    pub fn fs_group(mut self, gid: i64) -> Self {
        self.fs_group = Some(gid);
        self
    }

    /// The pod's `securityContext.runAsUser`.
    pub fn run_as_user(mut self, uid: i64) -> Self {
        self.run_as_user = Some(uid);
        self
    }

    /// Runs the script once and ends (restartPolicy Never) instead of sleeping afterwards.
    pub fn run_once(mut self) -> Self {
        self.run_once = true;
        self
    }

    /// The pod.
    pub fn build(self) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(self.name.clone());
        if let Some(group) = &self.group {
            pod.metadata.labels = Some(BTreeMap::from([(
                TEST_POD_LABEL.to_string(),
                group.clone(),
            )]));
        }
        let command = if self.run_once {
            self.script.clone()
        } else {
            format!(
                "{}\ntrap 'exit 0' TERM\nwhile true; do sleep 1; done",
                self.script
            )
        };
        let mut volumes = Vec::new();
        let mut mounts = Vec::new();
        let mut devices = Vec::new();
        for (index, mount) in self.mounts.iter().enumerate() {
            // One pod volume per claim; several mounts of the same claim share it.
            let volume_name = match volumes.iter().position(|v: &Volume| {
                v.persistent_volume_claim
                    .as_ref()
                    .is_some_and(|c| c.claim_name == mount.claim)
            }) {
                Some(existing) => volumes[existing].name.clone(),
                None => {
                    let name = format!("vol{index}");
                    volumes.push(Volume {
                        name: name.clone(),
                        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                            claim_name: mount.claim.clone(),
                            read_only: mount.read_only.then_some(true),
                        }),
                        ..Default::default()
                    });
                    name
                }
            };
            if mount.device {
                devices.push(VolumeDevice {
                    name: volume_name,
                    device_path: mount.path.clone(),
                });
                continue;
            }
            mounts.push(VolumeMount {
                name: volume_name,
                mount_path: mount.path.clone(),
                read_only: mount.read_only.then_some(true),
                sub_path: mount.sub_path.clone(),
                ..Default::default()
            });
        }
        let mut node_selector = self.node_selector.clone();
        if let Some(node) = &self.node {
            node_selector.insert("kubernetes.io/hostname".into(), node.clone());
        }
        let affinity = self.avoid_group.as_ref().map(|group| Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            TEST_POD_LABEL.to_string(),
                            group.clone(),
                        )])),
                        ..Default::default()
                    }),
                    topology_key: "kubernetes.io/hostname".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        let security_context =
            (self.fs_group.is_some() || self.run_as_user.is_some()).then(|| PodSecurityContext {
                fs_group: self.fs_group,
                run_as_user: self.run_as_user,
                ..Default::default()
            });
        pod.spec = Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some(TEST_IMAGE.into()),
                command: Some(vec!["sh".into(), "-c".into(), command]),
                volume_mounts: (!mounts.is_empty()).then_some(mounts),
                volume_devices: (!devices.is_empty()).then_some(devices),
                ..Default::default()
            }],
            volumes: (!volumes.is_empty()).then_some(volumes),
            node_selector: (!node_selector.is_empty()).then_some(node_selector),
            affinity,
            security_context,
            restart_policy: self.run_once.then(|| "Never".to_string()),
            termination_grace_period_seconds: Some(5),
            ..Default::default()
        });
        pod
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn one_volume_per_claim_and_a_mount_per_use() {
        let pod = PodBuilder::new("p", "true")
            .claim("a", "/a")
            .claim_sub_path("a", "sub", "/a-sub")
            .read_only_claim("b", "/b")
            .build();
        let spec = pod.spec.unwrap();
        let volumes = spec.volumes.unwrap();
        assert_eq!(volumes.len(), 2);
        let b = volumes[1].persistent_volume_claim.as_ref().unwrap();
        assert_eq!((b.claim_name.as_str(), b.read_only), ("b", Some(true)));
        let mounts = spec.containers[0].volume_mounts.clone().unwrap();
        assert_eq!(mounts.len(), 3);
        assert_eq!(mounts[0].name, mounts[1].name);
        assert_eq!(mounts[1].sub_path.as_deref(), Some("sub"));
        assert_eq!(mounts[2].read_only, Some(true));
    }

    #[test]
    fn spreading_labels_the_pod_and_keeps_it_off_its_groups_nodes() {
        let pod = PodBuilder::new("p", "true")
            .spread_in("g")
            .node_selector("z", "a")
            .build();
        assert_eq!(
            pod.metadata
                .labels
                .unwrap()
                .get(TEST_POD_LABEL)
                .map(String::as_str),
            Some("g")
        );
        let spec = pod.spec.unwrap();
        let terms = spec
            .affinity
            .unwrap()
            .pod_anti_affinity
            .unwrap()
            .required_during_scheduling_ignored_during_execution
            .unwrap();
        assert_eq!(terms[0].topology_key, "kubernetes.io/hostname");
        assert_eq!(
            spec.node_selector.unwrap().get("z").map(String::as_str),
            Some("a")
        );
    }

    #[test]
    fn a_run_once_pod_ends_and_is_not_restarted() {
        let spec = PodBuilder::new("p", "exit 0")
            .run_once()
            .fs_group(1234)
            .build()
            .spec
            .unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        assert_eq!(spec.containers[0].command.as_ref().unwrap()[2], "exit 0");
        assert_eq!(spec.security_context.unwrap().fs_group, Some(1234));
    }
}
