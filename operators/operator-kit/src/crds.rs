//! The operators' CRDs, as shipped in `fixtures/crds/` (ClusterCSIDriver and
//! ClusterOperator), compiled in, and their installation.
//!
//! The YAML files are the single source of the schema the apiserver enforces: tests, suites
//! and the operator install exactly what a user applies with kubectl. Their schemas mirror
//! [`crate::api`] field for field; the unit tests below check that in both directions, so a
//! field added on one side only (which the apiserver would silently prune) fails a test.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube_support::crd::{self, CrdError};

/// The CRD manifests: (file name, YAML).
pub const MANIFESTS: [(&str, &str); 2] = [
    (
        "operator.openshift.io_clustercsidrivers.yaml",
        include_str!("../../../fixtures/crds/operator.openshift.io_clustercsidrivers.yaml"),
    ),
    (
        "config.openshift.io_clusteroperators.yaml",
        include_str!("../../../fixtures/crds/config.openshift.io_clusteroperators.yaml"),
    ),
];

/// How long [`install`] waits for the CRDs to be Established, in all.
pub const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// The two CRDs, parsed: ClusterCSIDriver, then ClusterOperator.
pub fn definitions() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    crd::parse_all(&MANIFESTS)
}

/// Applies the CRDs (server-side apply with force, field manager `field_manager`) and waits
/// until each is Established, for at most [`ESTABLISH_TIMEOUT`] in all
/// ([`kube_support::crd::install`]).
pub async fn install(client: &Client, field_manager: &str) -> Result<(), CrdError> {
    crd::install(client, field_manager, &definitions()?, ESTABLISH_TIMEOUT).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::Resource;
    use serde::Serialize;
    use serde_json::{Value, json};

    use super::*;
    use crate::api::*;

    fn crd<K: Resource<DynamicType = ()>>() -> CustomResourceDefinition {
        definitions()
            .unwrap()
            .into_iter()
            .find(|c| c.spec.names.kind == K::kind(&()))
            .unwrap()
    }

    fn schema<K: Resource<DynamicType = ()>>() -> JSONSchemaProps {
        let crd = crd::<K>();
        let version = crd
            .spec
            .versions
            .iter()
            .find(|v| v.name == K::version(&()))
            .unwrap();
        version.schema.clone().unwrap().open_api_v3_schema.unwrap()
    }

    fn check<K: Resource<DynamicType = ()>>(crd: &CustomResourceDefinition) {
        assert_eq!(crd.spec.group, K::group(&()));
        assert_eq!(crd.spec.names.kind, K::kind(&()));
        assert_eq!(crd.spec.names.plural, K::plural(&()));
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(format!("{}.{}", K::plural(&()), K::group(&())).as_str())
        );
        assert_eq!(crd.spec.scope, "Cluster");
        let versions: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(versions, [(K::version(&()).as_ref(), true, true)]);
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "{} has a status subresource",
            K::kind(&())
        );
        assert!(
            !version
                .additional_printer_columns
                .clone()
                .unwrap_or_default()
                .is_empty()
        );
    }

    #[test]
    fn the_manifests_describe_the_rust_types() {
        let definitions = definitions().unwrap();
        assert_eq!(definitions.len(), 2);
        check::<ClusterCSIDriver>(&definitions[0]);
        check::<ClusterOperator>(&definitions[1]);
    }

    /// Every place `value` has a field `schema` does not declare (the apiserver would prune
    /// it) or a value of another type or outside the enum.
    fn undeclared(schema: &JSONSchemaProps, value: &Value, path: &str, found: &mut Vec<String>) {
        if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
            return;
        }
        let type_ = schema.type_.as_deref().unwrap_or("");
        let matches = match value {
            Value::Object(_) => type_ == "object",
            Value::Array(_) => type_ == "array",
            Value::String(_) => type_ == "string",
            Value::Number(n) => type_ == "integer" && n.is_i64() || type_ == "number",
            Value::Bool(_) => type_ == "boolean",
            Value::Null => schema.nullable == Some(true),
        };
        if !matches {
            found.push(format!("{path}: {value} is not of type {type_:?}"));
            return;
        }
        if let Some(values) = &schema.enum_
            && !values.iter().any(|v| &v.0 == value)
        {
            found.push(format!("{path}: {value} is not in the enum"));
        }
        match value {
            Value::Object(map) => {
                for (key, field) in map {
                    let path = format!("{path}.{key}");
                    let declared = schema.properties.as_ref().and_then(|p| p.get(key));
                    match (declared, &schema.additional_properties) {
                        (Some(field_schema), _) => undeclared(field_schema, field, &path, found),
                        (None, Some(JSONSchemaPropsOrBool::Schema(values))) => {
                            undeclared(values, field, &path, found)
                        }
                        (None, _) => found.push(format!("{path} is not in the schema")),
                    }
                }
            }
            Value::Array(items) => match &schema.items {
                Some(JSONSchemaPropsOrArray::Schema(item)) => {
                    for (i, element) in items.iter().enumerate() {
                        undeclared(item, element, &format!("{path}[{i}]"), found);
                    }
                }
                _ => found.push(format!("{path}: no items schema")),
            },
            _ => {}
        }
    }

    /// Every property path the schema declares, except the free-form ones.
    fn declared(schema: &JSONSchemaProps, path: &str, paths: &mut BTreeSet<String>) {
        if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
            return;
        }
        for (key, field) in schema.properties.iter().flatten() {
            let path = format!("{path}.{key}");
            paths.insert(path.clone());
            declared(field, &path, paths);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
            declared(item, &format!("{path}[]"), paths);
        }
    }

    /// Every field path `value` has (array elements as `[]`, map values as `.*`).
    fn present(value: &Value, path: &str, maps: &[&str], paths: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) if maps.contains(&path) => {
                for field in map.values() {
                    present(field, &format!("{path}.*"), maps, paths);
                }
            }
            Value::Object(map) => {
                for (key, field) in map {
                    let path = format!("{path}.{key}");
                    paths.insert(path.clone());
                    present(field, &path, maps, paths);
                }
            }
            Value::Array(items) => {
                for item in items {
                    present(item, &format!("{path}[]"), maps, paths);
                }
            }
            _ => {}
        }
    }

    fn to_value(object: &impl Serialize) -> Value {
        serde_json::to_value(object).unwrap()
    }

    fn condition() -> OperatorCondition {
        OperatorCondition {
            type_: "ManilaControllerDisabled".into(),
            status: "False".into(),
            last_transition_time: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap(),
            )),
            reason: Some("AsExpected".into()),
            message: Some("Manila offers 1 share type(s)".into()),
        }
    }

    /// A ClusterCSIDriver with every field set. Struct literals without `..`: a field added
    /// to `api.rs` does not compile here until it is added (and to the schema).
    fn full_driver() -> ClusterCSIDriver {
        let mut driver = ClusterCSIDriver::new(
            "example.csi.test",
            ClusterCSIDriverSpec {
                management_state: ManagementState::Managed,
                log_level: Some(LogLevel::Debug),
                operator_log_level: Some(LogLevel::Trace),
                storage_class_state: Some(StorageClassState::Unmanaged),
                driver_config: Some(DriverConfig {
                    driver_type: Some("Manila".into()),
                    manila: Some(ManilaDriverConfig {
                        share_network_ids: BTreeMap::from([("dhss".into(), "net-1".into())]),
                        topology: Some(TopologyState::Enabled),
                        nfs_share_client: Some("10.0.0.0/8,192.168.1.5".into()),
                        match_export_location_address: Some("10.0.0.0/24".into()),
                        protocol: Some(ShareProtocol::Nfs),
                    }),
                    cinder: Some(CinderDriverConfig {}),
                }),
            },
        );
        driver.status = Some(ClusterCSIDriverStatus {
            observed_generation: Some(2),
            conditions: vec![condition()],
            version: Some("0.1.0".into()),
            ready_replicas: 1,
            generations: vec![GenerationStatus {
                group: "apps".into(),
                resource: "deployments".into(),
                namespace: "manila-csi".into(),
                name: "openstack-manila-csi-controllerplugin".into(),
                last_generation: 3,
            }],
        });
        driver
    }

    /// A ClusterOperator with every field set.
    fn full_operator() -> ClusterOperator {
        let mut operator =
            ClusterOperator::new("example-csi-driver-operator", ClusterOperatorSpec {});
        operator.status = Some(ClusterOperatorStatus {
            conditions: vec![condition()],
            versions: vec![OperandVersion {
                name: "operator".into(),
                version: "0.1.0".into(),
            }],
            related_objects: vec![ObjectReference {
                group: "apps".into(),
                resource: "deployments".into(),
                namespace: Some("manila-csi".into()),
                name: "openstack-manila-csi-controllerplugin".into(),
            }],
        });
        operator
    }

    fn assert_schema_matches(schema: &JSONSchemaProps, mut object: Value, maps: &[&str]) {
        // The apiserver validates metadata itself; the schema only says it is an object.
        object.as_object_mut().unwrap().remove("metadata");
        let mut found = Vec::new();
        undeclared(schema, &object, "", &mut found);
        assert!(
            found.is_empty(),
            "the schema would prune or refuse: {found:?}"
        );

        let mut in_schema = BTreeSet::new();
        declared(schema, "", &mut in_schema);
        let mut in_rust = BTreeSet::new();
        present(&object, "", maps, &mut in_rust);
        let free_form = [".spec.unsupportedConfigOverrides", ".spec.observedConfig"];
        let missing: Vec<_> = in_schema
            .iter()
            .filter(|p| !in_rust.contains(*p))
            .filter(|p| !free_form.contains(&p.as_str()))
            .filter(|p| !p.starts_with(".metadata"))
            .collect();
        assert!(
            missing.is_empty(),
            "declared in the CRD, not in api.rs: {missing:?}"
        );
    }

    #[test]
    fn the_cluster_csi_driver_schema_has_exactly_the_fields_of_the_rust_type() {
        let schema = schema::<ClusterCSIDriver>();
        assert_schema_matches(
            &schema,
            to_value(&full_driver()),
            &[".spec.driverConfig.manila.shareNetworkIDs"],
        );
        // Defaults: what the apiserver fills in is what the Rust type defaults to.
        let spec = &schema.properties.as_ref().unwrap()["spec"];
        let default_of = |field: &str| {
            spec.properties.as_ref().unwrap()[field]
                .default
                .as_ref()
                .map(|d| d.0.clone())
        };
        assert_eq!(
            default_of("managementState"),
            Some(to_value(&ManagementState::default()))
        );
        assert_eq!(default_of("logLevel"), Some(to_value(&LogLevel::default())));
        assert_eq!(
            default_of("operatorLogLevel"),
            Some(to_value(&LogLevel::default()))
        );
        assert_eq!(schema.required, Some(vec!["spec".to_string()]));
    }

    #[test]
    fn the_cluster_operator_schema_has_exactly_the_fields_of_the_rust_type() {
        assert_schema_matches(
            &schema::<ClusterOperator>(),
            to_value(&full_operator()),
            &[],
        );
    }

    #[test]
    fn the_enums_list_exactly_the_rust_variants() {
        // Exhaustive matches: a new variant does not compile until it is listed here.
        let management = [
            ManagementState::Managed,
            ManagementState::Unmanaged,
            ManagementState::Removed,
            ManagementState::Force,
        ];
        for state in management {
            match state {
                ManagementState::Managed
                | ManagementState::Unmanaged
                | ManagementState::Removed
                | ManagementState::Force => {}
            }
        }
        let levels = [
            LogLevel::Normal,
            LogLevel::Debug,
            LogLevel::Trace,
            LogLevel::TraceAll,
        ];
        for level in levels {
            match level {
                LogLevel::Normal | LogLevel::Debug | LogLevel::Trace | LogLevel::TraceAll => {}
            }
        }
        let classes = [
            StorageClassState::Managed,
            StorageClassState::Unmanaged,
            StorageClassState::Removed,
        ];
        for state in classes {
            match state {
                StorageClassState::Managed
                | StorageClassState::Unmanaged
                | StorageClassState::Removed => {}
            }
        }
        let values = |items: &[Value]| items.to_vec();
        let topologies = [TopologyState::Enabled, TopologyState::Disabled];
        for state in topologies {
            match state {
                TopologyState::Enabled | TopologyState::Disabled => {}
            }
        }
        let protocols = [ShareProtocol::Nfs, ShareProtocol::Cephfs];
        for protocol in protocols {
            match protocol {
                ShareProtocol::Nfs | ShareProtocol::Cephfs => {}
            }
        }
        let schema = schema::<ClusterCSIDriver>();
        let spec = &schema.properties.as_ref().unwrap()["spec"];
        let manila = &spec.properties.as_ref().unwrap()["driverConfig"]
            .properties
            .as_ref()
            .unwrap()["manila"];
        let manila_enum_of = |field: &str| -> Vec<Value> {
            manila.properties.as_ref().unwrap()[field]
                .enum_
                .clone()
                .unwrap()
                .into_iter()
                .map(|v| v.0)
                .collect()
        };
        assert_eq!(
            manila_enum_of("topology"),
            values(&topologies.map(|v| to_value(&v)))
        );
        assert_eq!(
            manila_enum_of("protocol"),
            values(&protocols.map(|v| to_value(&v)))
        );
        assert_eq!(manila_enum_of("protocol"), [json!("NFS"), json!("CEPHFS")]);
        let enum_of = |field: &str| -> Vec<Value> {
            spec.properties.as_ref().unwrap()[field]
                .enum_
                .clone()
                .unwrap()
                .into_iter()
                .map(|v| v.0)
                .collect()
        };
        assert_eq!(
            enum_of("managementState"),
            values(&management.map(|v| to_value(&v)))
        );
        assert_eq!(enum_of("logLevel"), values(&levels.map(|v| to_value(&v))));
        assert_eq!(
            enum_of("operatorLogLevel"),
            values(&levels.map(|v| to_value(&v)))
        );
        assert_eq!(
            enum_of("storageClassState"),
            values(&classes.map(|v| to_value(&v)))
        );
        assert_eq!(
            enum_of("managementState"),
            [
                json!("Managed"),
                json!("Unmanaged"),
                json!("Removed"),
                json!("Force")
            ]
        );
    }

    #[test]
    fn the_checker_finds_a_field_the_schema_lacks() {
        let schema = schema::<ClusterCSIDriver>();
        let mut object = to_value(&full_driver());
        object.as_object_mut().unwrap().remove("metadata");
        object["spec"]["driverConfig"]["manila"]["shareNetworkId"] = json!("x");
        // A Cinder setting added to the Rust type only.
        object["spec"]["driverConfig"]["cinder"]["availabilityZones"] = json!(true);
        object["status"]["conditions"][0]["status"] = json!(1);
        object["spec"]["logLevel"] = json!("Loud");
        object["spec"]["driverConfig"]["manila"]["protocol"] = json!("SMB");
        let mut found = Vec::new();
        undeclared(&schema, &object, "", &mut found);
        found.sort();
        assert_eq!(
            found,
            [
                ".spec.driverConfig.cinder.availabilityZones is not in the schema",
                ".spec.driverConfig.manila.protocol: \"SMB\" is not in the enum",
                ".spec.driverConfig.manila.shareNetworkId is not in the schema",
                ".spec.logLevel: \"Loud\" is not in the enum",
                ".status.conditions[0].status: 1 is not of type \"string\"",
            ]
        );
    }
}
