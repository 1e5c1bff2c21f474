//! StorageClass parameters and PV volume attributes, parsed into typed structs.
//!
//! Every error names the parameter at fault.

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Result};

/// Metadata keys the external-provisioner adds with `--extra-create-metadata`.
pub const PVC_NAME_KEY: &str = "csi.storage.k8s.io/pvc/name";
/// See [`PVC_NAME_KEY`].
pub const PVC_NAMESPACE_KEY: &str = "csi.storage.k8s.io/pvc/namespace";
/// See [`PVC_NAME_KEY`].
pub const PV_NAME_KEY: &str = "csi.storage.k8s.io/pv/name";
/// Share metadata key carrying `--cluster-id`.
pub const CLUSTER_METADATA_KEY: &str = "manila.csi.openstack.org/cluster";

/// StorageClass parameter (and volume-context key): the share group.
pub const GROUP_ID_PARAMETER: &str = "groupID";
/// StorageClass parameter (and volume-context key): `same_host` share ids.
pub const AFFINITY_PARAMETER: &str = "affinity";
/// StorageClass parameter (and volume-context key): `different_host` share ids.
pub const ANTI_AFFINITY_PARAMETER: &str = "antiAffinity";

/// How the CephFS partner mounts a share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CephfsMounter {
    /// ceph-fuse (upstream default).
    Fuse,
    /// The kernel client.
    Kernel,
}

impl CephfsMounter {
    /// The parameter value.
    pub fn as_str(self) -> &'static str {
        match self {
            CephfsMounter::Fuse => "fuse",
            CephfsMounter::Kernel => "kernel",
        }
    }
}

/// CephFS-specific options shared by StorageClass parameters and volume attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CephfsOptions {
    /// `cephfs-mounter`; `None` means the default (fuse).
    pub mounter: Option<CephfsMounter>,
    /// `cephfs-clientID` as given: the cephx user(s) to grant, a comma list; defaults to
    /// the share name. See [`CephfsOptions::client_ids`].
    pub client_id: Option<String>,
    /// `cephfs-kernelMountOptions`.
    pub kernel_mount_options: Option<String>,
    /// `cephfs-fuseMountOptions`.
    pub fuse_mount_options: Option<String>,
}

impl CephfsOptions {
    /// The volume-context entries the node side needs (only those that were set).
    pub fn node_context(&self) -> BTreeMap<String, String> {
        let mut context = BTreeMap::new();
        if let Some(mounter) = self.mounter {
            context.insert("cephfs-mounter".into(), mounter.as_str().into());
        }
        if let Some(options) = &self.kernel_mount_options {
            context.insert("cephfs-kernelMountOptions".into(), options.clone());
        }
        if let Some(options) = &self.fuse_mount_options {
            context.insert("cephfs-fuseMountOptions".into(), options.clone());
        }
        context
    }

    /// The cephx users of `cephfs-clientID`: its comma-separated entries, trimmed, empty
    /// ones and repeats dropped, in the order given (the first is the one the node mounts
    /// with). Empty when the parameter is absent or names nobody.
    pub fn client_ids(&self) -> Vec<&str> {
        let mut users: Vec<&str> = Vec::new();
        for user in self.client_id.as_deref().unwrap_or_default().split(',') {
            let user = user.trim();
            if !user.is_empty() && !users.contains(&user) {
                users.push(user);
            }
        }
        users
    }

    fn take(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "cephfs-mounter" => {
                self.mounter = Some(match value {
                    "fuse" => CephfsMounter::Fuse,
                    "kernel" => CephfsMounter::Kernel,
                    other => {
                        return Err(Error::InvalidArgument(format!(
                            "parameter cephfs-mounter: {other:?} is not one of fuse, kernel"
                        )));
                    }
                })
            }
            "cephfs-clientID" => self.client_id = non_empty(value),
            "cephfs-kernelMountOptions" => self.kernel_mount_options = non_empty(value),
            "cephfs-fuseMountOptions" => self.fuse_mount_options = non_empty(value),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// CreateVolume parameters (StorageClass `parameters` plus extra-create-metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeOptions {
    /// `type`: Manila share type (default `default`).
    pub share_type: String,
    /// `shareNetworkID`.
    pub share_network_id: Option<String>,
    /// `availability`: Manila availability zone.
    pub availability: Option<String>,
    /// `autoTopology`: take the zone from the accessibility requirements.
    pub auto_topology: bool,
    /// `appendShareMetadata`: extra share metadata (JSON object of strings).
    pub append_share_metadata: BTreeMap<String, String>,
    /// `nfs-shareClient`: addresses/CIDRs granted `rw` (default `0.0.0.0/0`).
    pub nfs_share_clients: Vec<String>,
    /// CephFS options.
    pub cephfs: CephfsOptions,
    /// `groupID`: the Manila share group the share is created in.
    pub group_id: Option<String>,
    /// `affinity`: share ids the share goes next to (scheduler hint `same_host`, 2.65).
    pub affinity: Vec<String>,
    /// `antiAffinity`: share ids the share keeps away from (`different_host`, 2.65).
    pub anti_affinity: Vec<String>,
    /// Extra-create-metadata: PVC name.
    pub pvc_name: Option<String>,
    /// Extra-create-metadata: PVC namespace.
    pub pvc_namespace: Option<String>,
    /// Extra-create-metadata: PV name.
    pub pv_name: Option<String>,
}

impl Default for VolumeOptions {
    fn default() -> Self {
        VolumeOptions {
            share_type: "default".into(),
            share_network_id: None,
            availability: None,
            auto_topology: false,
            append_share_metadata: BTreeMap::new(),
            nfs_share_clients: vec!["0.0.0.0/0".into()],
            cephfs: CephfsOptions::default(),
            group_id: None,
            affinity: Vec::new(),
            anti_affinity: Vec::new(),
            pvc_name: None,
            pvc_namespace: None,
            pv_name: None,
        }
    }
}

impl TryFrom<&HashMap<String, String>> for VolumeOptions {
    type Error = Error;

    fn try_from(parameters: &HashMap<String, String>) -> Result<Self> {
        let mut options = VolumeOptions::default();
        // Sorted, so that with several bad parameters the reported one is deterministic.
        let sorted: BTreeMap<_, _> = parameters.iter().collect();
        for (key, value) in sorted {
            let key = key.as_str();
            match key {
                "type" => {
                    options.share_type = non_empty(value).ok_or_else(|| {
                        Error::InvalidArgument("parameter type: must not be empty".into())
                    })?
                }
                "shareNetworkID" => options.share_network_id = non_empty(value),
                "availability" => options.availability = non_empty(value),
                "autoTopology" => options.auto_topology = parse_bool("autoTopology", value)?,
                "appendShareMetadata" => {
                    options.append_share_metadata = parse_metadata(value)?;
                }
                "nfs-shareClient" => options.nfs_share_clients = parse_share_clients(value)?,
                GROUP_ID_PARAMETER => options.group_id = parse_group_id(value)?,
                AFFINITY_PARAMETER => {
                    options.affinity = parse_share_ids(AFFINITY_PARAMETER, value)?;
                }
                ANTI_AFFINITY_PARAMETER => {
                    options.anti_affinity = parse_share_ids(ANTI_AFFINITY_PARAMETER, value)?;
                }
                PVC_NAME_KEY => options.pvc_name = non_empty(value),
                PVC_NAMESPACE_KEY => options.pvc_namespace = non_empty(value),
                PV_NAME_KEY => options.pv_name = non_empty(value),
                _ if options.cephfs.take(key, value)? => {}
                // Secret references and other CO-reserved keys are not ours to interpret.
                _ if key.starts_with("csi.storage.k8s.io/") => {}
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "parameter {key}: unknown StorageClass parameter"
                    )));
                }
            }
        }
        Ok(options)
    }
}

impl VolumeOptions {
    /// The share metadata in upstream's order: extra-create-metadata, then
    /// `appendShareMetadata` (which may not overwrite those), then the cluster id.
    pub fn share_metadata(&self, cluster_id: Option<&str>) -> Result<BTreeMap<String, String>> {
        let mut metadata = BTreeMap::new();
        for (key, value) in [
            (PVC_NAME_KEY, &self.pvc_name),
            (PVC_NAMESPACE_KEY, &self.pvc_namespace),
            (PV_NAME_KEY, &self.pv_name),
        ] {
            if let Some(value) = value {
                metadata.insert(key.to_string(), value.clone());
            }
        }
        for (key, value) in &self.append_share_metadata {
            if metadata.contains_key(key) {
                return Err(Error::InvalidArgument(format!(
                    "parameter appendShareMetadata: key {key:?} may not overwrite the metadata set by the driver"
                )));
            }
            metadata.insert(key.clone(), value.clone());
        }
        if let Some(cluster) = cluster_id.filter(|c| !c.is_empty()) {
            metadata.insert(CLUSTER_METADATA_KEY.into(), cluster.into());
        }
        Ok(metadata)
    }
}

/// Volume attributes a node receives (from CreateVolume's context or a pre-provisioned PV).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeVolumeOptions {
    /// Which share: by id or by name (exactly one).
    pub share: ShareRef,
    /// Access rule ids (`shareAccessIDs`, or the deprecated `shareAccessID`).
    pub access_ids: Vec<String>,
    /// CephFS options.
    pub cephfs: CephfsOptions,
}

/// A share named by id or by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareRef {
    /// `shareID`.
    Id(String),
    /// `shareName`.
    Name(String),
}

impl TryFrom<&HashMap<String, String>> for NodeVolumeOptions {
    type Error = Error;

    fn try_from(attributes: &HashMap<String, String>) -> Result<Self> {
        let mut share_id = None;
        let mut share_name = None;
        let mut access_ids: Option<Vec<String>> = None;
        let mut legacy_access_id = None;
        let mut cephfs = CephfsOptions::default();
        let sorted: BTreeMap<_, _> = attributes.iter().collect();
        for (key, value) in sorted {
            let key = key.as_str();
            match key {
                "shareID" => share_id = non_empty(value),
                "shareName" => share_name = non_empty(value),
                "shareAccessIDs" => {
                    access_ids = Some(
                        value
                            .split(',')
                            .map(str::trim)
                            .filter(|id| !id.is_empty())
                            .map(String::from)
                            .collect(),
                    )
                }
                "shareAccessID" => legacy_access_id = non_empty(value),
                // Written into the context by CreateVolume (as upstream does); they only
                // mattered when the share was created.
                GROUP_ID_PARAMETER | AFFINITY_PARAMETER | ANTI_AFFINITY_PARAMETER => {}
                _ if cephfs.take(key, value)? => {}
                // Added by the CO (pod info, provisioner identity): not ours.
                _ if key.starts_with("csi.storage.k8s.io/")
                    || key.starts_with("storage.kubernetes.io/") => {}
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "volume attribute {key}: unknown attribute"
                    )));
                }
            }
        }
        let share = match (share_id, share_name) {
            (Some(id), None) if !openstack_client::manila::is_manila_id(&id) => {
                return Err(Error::InvalidArgument(format!(
                    "volume attribute shareID: {id:?} is not a Manila share id (a UUID)"
                )));
            }
            (Some(id), None) => ShareRef::Id(id),
            (None, Some(name)) => ShareRef::Name(name),
            (Some(_), Some(_)) => {
                return Err(Error::InvalidArgument(
                    "volume attributes shareID and shareName: exactly one may be set, both are"
                        .into(),
                ));
            }
            (None, None) => {
                return Err(Error::InvalidArgument(
                    "volume attributes shareID and shareName: exactly one must be set, neither is"
                        .into(),
                ));
            }
        };
        let access_ids = match (access_ids, legacy_access_id) {
            (Some(ids), _) if !ids.is_empty() => ids,
            (_, Some(id)) => vec![id],
            _ => {
                return Err(Error::InvalidArgument(
                    "volume attribute shareAccessIDs: missing (a comma list of Manila access rule ids)"
                        .into(),
                ));
            }
        };
        Ok(NodeVolumeOptions {
            share,
            access_ids,
            cephfs,
        })
    }
}

/// `nfs-shareClient`: a comma list of what Manila accepts as the target of an `ip` access
/// rule: an IP address, or a network in CIDR notation without host bits (Manila checks with
/// Python's strict `ip_network`, so `10.0.0.1/8` is refused). Duplicates are dropped (a
/// second identical rule would be refused as existing). Checked here, before anything is
/// created: a rule Manila refuses after the share exists would strand the share.
fn parse_share_clients(value: &str) -> Result<Vec<String>> {
    let mut clients: Vec<String> = Vec::new();
    for client in value.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        check_share_client(client)?;
        if !clients.iter().any(|c| c == client) {
            clients.push(client.to_string());
        }
    }
    if clients.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "parameter nfs-shareClient: {value:?} lists no address or CIDR"
        )));
    }
    Ok(clients)
}

fn check_share_client(client: &str) -> Result<()> {
    let invalid = |why: String| {
        Err(Error::InvalidArgument(format!(
            "parameter nfs-shareClient: {client:?} {why}"
        )))
    };
    if client.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    match client.parse::<ipnet::IpNet>() {
        Ok(net) if net.trunc() == net => Ok(()),
        Ok(net) => invalid(format!(
            "has host bits set, which Manila refuses (the network is {})",
            net.trunc()
        )),
        Err(_) => invalid("is not an IP address or a network in CIDR notation".into()),
    }
}

/// `groupID`: a Manila share group id (a UUID); empty means none.
fn parse_group_id(value: &str) -> Result<Option<String>> {
    match non_empty(value) {
        None => Ok(None),
        Some(id) if openstack_client::manila::is_manila_id(&id) => Ok(Some(id)),
        Some(id) => Err(Error::InvalidArgument(format!(
            "parameter {GROUP_ID_PARAMETER}: {id:?} is not a Manila share group id (a UUID)"
        ))),
    }
}

/// `affinity`/`antiAffinity`: a comma list of Manila share ids (UUIDs; spaces around
/// entries allowed, repeats dropped). An empty value means none; an empty entry (`a,,b`,
/// a trailing comma) or anything that is not a share id is refused, before anything is
/// created. Share names are not taken here (a class serves every claim: names are for the
/// claim's annotations, which are looked up).
pub fn parse_share_ids(parameter: &str, value: &str) -> Result<Vec<String>> {
    if value.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut ids: Vec<String> = Vec::new();
    for entry in value.split(',').map(str::trim) {
        if entry.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "parameter {parameter}: {value:?} has an empty entry"
            )));
        }
        if !openstack_client::manila::is_manila_id(entry) {
            return Err(Error::InvalidArgument(format!(
                "parameter {parameter}: {entry:?} is not a Manila share id (a UUID)"
            )));
        }
        if !ids.iter().any(|id| id == entry) {
            ids.push(entry.to_string());
        }
    }
    Ok(ids)
}

/// Whether an `nfs-shareClient` entry is IPv6 (Manila accepts those from microversion 2.38).
pub fn is_ipv6_client(client: &str) -> bool {
    client.contains(':')
}

fn non_empty(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_string())
}

fn parse_bool(name: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" | "" => Ok(false),
        _ => Err(Error::InvalidArgument(format!(
            "parameter {name}: {value:?} is not a boolean (true or false)"
        ))),
    }
}

fn parse_metadata(value: &str) -> Result<BTreeMap<String, String>> {
    if value.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_str::<BTreeMap<String, String>>(value).map_err(|e| {
        Error::InvalidArgument(format!(
            "parameter appendShareMetadata: not a JSON object of string values ({e})"
        ))
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_apply_to_empty_parameters() {
        let options = VolumeOptions::try_from(&HashMap::new()).unwrap();
        assert_eq!(options.share_type, "default");
        assert_eq!(options.nfs_share_clients, vec!["0.0.0.0/0"]);
        assert!(!options.auto_topology);
    }

    #[test]
    fn non_json_append_share_metadata_names_the_parameter() {
        let error =
            VolumeOptions::try_from(&map(&[("appendShareMetadata", "not json")])).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument(_)));
        assert!(
            error
                .to_string()
                .starts_with("parameter appendShareMetadata:"),
            "{error}"
        );
    }

    #[test]
    fn unknown_parameters_are_rejected_by_name() {
        let error = VolumeOptions::try_from(&map(&[("shareNetworkId", "x")])).unwrap_err();
        assert!(error.to_string().contains("shareNetworkId"), "{error}");
        // Secret references pass.
        VolumeOptions::try_from(&map(&[("csi.storage.k8s.io/provisioner-secret-name", "s")]))
            .unwrap();
    }

    #[rstest::rstest]
    #[case("not-an-ip", "is not an IP address")]
    #[case("10.0.0.0/33", "is not an IP address")]
    #[case("10.0.0.1/8", "has host bits set")]
    #[case("10.0.0.0/8,300.1.1.1", "\"300.1.1.1\"")]
    #[case(" , ", "lists no address")]
    fn bad_share_clients_name_the_parameter_and_value(#[case] value: &str, #[case] why: &str) {
        let error = VolumeOptions::try_from(&map(&[("nfs-shareClient", value)])).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
        let text = error.to_string();
        assert!(
            text.starts_with("parameter nfs-shareClient:") && text.contains(why),
            "{text}"
        );
    }

    #[test]
    fn share_clients_accept_addresses_and_networks_once() {
        let options = VolumeOptions::try_from(&map(&[(
            "nfs-shareClient",
            "0.0.0.0/0,192.168.1.5,fd00::/8,fd00::1,192.168.1.5",
        )]))
        .unwrap();
        assert_eq!(
            options.nfs_share_clients,
            vec!["0.0.0.0/0", "192.168.1.5", "fd00::/8", "fd00::1"]
        );
    }

    #[test]
    fn share_clients_are_a_comma_list() {
        let options =
            VolumeOptions::try_from(&map(&[("nfs-shareClient", "10.0.0.0/8, 192.168.1.5")]))
                .unwrap();
        assert_eq!(options.nfs_share_clients, vec!["10.0.0.0/8", "192.168.1.5"]);
    }

    #[test]
    fn metadata_follows_upstream_order_and_protects_driver_keys() {
        let options = VolumeOptions::try_from(&map(&[
            (PVC_NAME_KEY, "claim"),
            (PVC_NAMESPACE_KEY, "ns"),
            (PV_NAME_KEY, "pv-1"),
            ("appendShareMetadata", r#"{"team":"storage"}"#),
        ]))
        .unwrap();
        let metadata = options.share_metadata(Some("cluster-a")).unwrap();
        assert_eq!(metadata.get("team").map(String::as_str), Some("storage"));
        assert_eq!(
            metadata.get(CLUSTER_METADATA_KEY).map(String::as_str),
            Some("cluster-a")
        );
        assert_eq!(
            metadata.get(PVC_NAME_KEY).map(String::as_str),
            Some("claim")
        );

        let clash = VolumeOptions::try_from(&map(&[
            (PVC_NAME_KEY, "claim"),
            (
                "appendShareMetadata",
                r#"{"csi.storage.k8s.io/pvc/name":"other"}"#,
            ),
        ]))
        .unwrap();
        let error = clash.share_metadata(None).unwrap_err();
        assert!(error.to_string().contains("appendShareMetadata"), "{error}");
    }

    const SHARE_A: &str = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3";
    const SHARE_B: &str = "1a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3";

    #[test]
    fn group_and_affinity_parameters_are_parsed() {
        let options = VolumeOptions::try_from(&map(&[
            (GROUP_ID_PARAMETER, &format!(" {SHARE_B} ")),
            (
                AFFINITY_PARAMETER,
                &format!("{SHARE_A}, {SHARE_B},{SHARE_A}"),
            ),
            (ANTI_AFFINITY_PARAMETER, SHARE_B),
        ]))
        .unwrap();
        assert_eq!(options.group_id.as_deref(), Some(SHARE_B));
        assert_eq!(options.affinity, [SHARE_A, SHARE_B]);
        assert_eq!(options.anti_affinity, [SHARE_B]);
        // Empty values mean none.
        let options = VolumeOptions::try_from(&map(&[
            (GROUP_ID_PARAMETER, " "),
            (AFFINITY_PARAMETER, ""),
            (ANTI_AFFINITY_PARAMETER, "  "),
        ]))
        .unwrap();
        assert_eq!(options.group_id, None);
        assert!(options.affinity.is_empty() && options.anti_affinity.is_empty());
    }

    #[rstest::rstest]
    #[case(
        GROUP_ID_PARAMETER,
        "my-group",
        "\"my-group\" is not a Manila share group id"
    )]
    #[case(GROUP_ID_PARAMETER, "0a1b2c3d-4e5f", "is not a Manila share group id")]
    #[case(
        AFFINITY_PARAMETER,
        "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3,,x",
        "has an empty entry"
    )]
    #[case(
        AFFINITY_PARAMETER,
        "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3,",
        "has an empty entry"
    )]
    #[case(AFFINITY_PARAMETER, "share-a", "\"share-a\" is not a Manila share id")]
    #[case(ANTI_AFFINITY_PARAMETER, ",", "has an empty entry")]
    #[case(
        ANTI_AFFINITY_PARAMETER,
        "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3,../x",
        "\"../x\" is not a Manila share id"
    )]
    fn bad_group_and_affinity_values_name_the_parameter_and_value(
        #[case] parameter: &str,
        #[case] value: &str,
        #[case] why: &str,
    ) {
        let error = VolumeOptions::try_from(&map(&[(parameter, value)])).unwrap_err();
        assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
        let text = error.to_string();
        assert!(
            text.starts_with(&format!("parameter {parameter}:")) && text.contains(why),
            "{text}"
        );
    }

    #[test]
    fn node_attributes_accept_the_creation_only_keys() {
        let options = NodeVolumeOptions::try_from(&map(&[
            ("shareID", SHARE_A),
            ("shareAccessIDs", "x"),
            (GROUP_ID_PARAMETER, SHARE_B),
            (AFFINITY_PARAMETER, SHARE_B),
            (ANTI_AFFINITY_PARAMETER, SHARE_B),
        ]))
        .unwrap();
        assert_eq!(options.share, ShareRef::Id(SHARE_A.into()));
        // Other unknown keys are still refused.
        let error = NodeVolumeOptions::try_from(&map(&[
            ("shareID", SHARE_A),
            ("shareAccessIDs", "x"),
            ("groupId", SHARE_B),
        ]))
        .unwrap_err();
        assert!(error.to_string().contains("groupId"), "{error}");
    }

    #[test]
    fn node_attributes_need_exactly_one_share_reference() {
        let both = map(&[
            ("shareID", "a"),
            ("shareName", "b"),
            ("shareAccessIDs", "x"),
        ]);
        let error = NodeVolumeOptions::try_from(&both).unwrap_err();
        assert!(error.to_string().contains("exactly one"), "{error}");
        let neither = map(&[("shareAccessIDs", "x")]);
        assert!(NodeVolumeOptions::try_from(&neither).is_err());
        let legacy = map(&[("shareName", "b"), ("shareAccessID", "x")]);
        let options = NodeVolumeOptions::try_from(&legacy).unwrap();
        assert_eq!(options.share, ShareRef::Name("b".into()));
        assert_eq!(options.access_ids, vec!["x"]);
    }
}
