//! More than one deployment of the driver on one cluster: a [`DriverInstance`] is the Manila
//! CSI driver deployed from the fixtures under a name of its own (its CSIDriver, plugin
//! sockets, node registrations and cluster-scoped RBAC), in a namespace of its own, with its
//! own configuration (attach required, topology). Tests that need a configuration other than
//! the default one get such an instance on the shared cluster instead of changing the
//! default deployment under the feet of the tests running beside them.
//!
//! The environment's own deployment is the *default instance*
//! ([`ManilaCsiEnvironment::default_instance`]); [`ManilaCsiEnvironment::deploy_instances`]
//! adds others, which teardown removes with everything else the environment applied.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};

use super::super::error::{Error, Result};
use super::{DRIVER_NAME, ManilaCsiEnvironment};

/// The prefix of the default instance's cluster-scoped RBAC names (`${INSTANCE}` of the
/// fixtures).
pub const DEFAULT_INSTANCE: &str = "openstack-manila-csi";

/// What an additional driver instance looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceOptions {
    /// A short name (`attach`, `topo`): the driver is `<name>.manila.csi.openstack.org` in
    /// the namespace `manila-csi-<name>`. At most 9 bytes, lowercase letters and digits, so
    /// the driver name fits the node's socket paths.
    pub name: String,
    /// Deploy the attach-required CSIDriver (VolumeAttachments, the external attacher).
    pub attach_required: bool,
    /// Run the driver with `--with-topology`.
    pub topology: bool,
}

/// One deployment of the Manila CSI driver on the environment's cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInstance {
    /// The CSI driver's name (CSIDriver, provisioner of its classes, node registration).
    pub driver_name: String,
    /// Where its pods and credentials Secret are.
    pub namespace: String,
    /// The credentials Secret's name (flat `os-*` keys).
    pub secret_name: String,
    /// Whether its CSIDriver requires attachment.
    pub attach_required: bool,
    /// Whether it runs with `--with-topology`.
    pub topology: bool,
}

impl DriverInstance {
    /// StorageClass parameters for share type `share_type` naming the instance's credentials
    /// Secret for every operation, as the fixtures' classes do.
    pub fn storage_class_parameters(&self, share_type: &str) -> BTreeMap<String, String> {
        let mut parameters = BTreeMap::from([("type".to_string(), share_type.to_string())]);
        for operation in [
            "provisioner",
            "controller-expand",
            "node-stage",
            "node-publish",
        ] {
            parameters.insert(
                format!("csi.storage.k8s.io/{operation}-secret-name"),
                self.secret_name.clone(),
            );
            parameters.insert(
                format!("csi.storage.k8s.io/{operation}-secret-namespace"),
                self.namespace.clone(),
            );
        }
        parameters
    }

    /// VolumeSnapshotClass parameters naming the instance's credentials Secret.
    pub fn snapshot_class_parameters(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "csi.storage.k8s.io/snapshotter-secret-name".to_string(),
                self.secret_name.clone(),
            ),
            (
                "csi.storage.k8s.io/snapshotter-secret-namespace".to_string(),
                self.namespace.clone(),
            ),
        ])
    }
}

impl InstanceOptions {
    fn check(&self) -> Result<()> {
        let valid = !self.name.is_empty()
            && self.name.len() <= 9
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if valid {
            Ok(())
        } else {
            Err(Error::Unexpected(format!(
                "driver instance name {:?}: 1 to 9 lowercase letters or digits",
                self.name
            )))
        }
    }

    fn instance(&self) -> DriverInstance {
        DriverInstance {
            driver_name: format!("{}.{DRIVER_NAME}", self.name),
            namespace: format!("manila-csi-{}", self.name),
            secret_name: "manila-csi-secrets".into(),
            attach_required: self.attach_required,
            topology: self.topology,
        }
    }
}

impl ManilaCsiEnvironment {
    /// The deployment the environment started with (fixture installs; with the operator, the
    /// operator's).
    pub fn default_instance(&self) -> DriverInstance {
        DriverInstance {
            driver_name: DRIVER_NAME.into(),
            namespace: self.options.namespace.clone(),
            secret_name: self.options.secret_name.clone(),
            attach_required: self.options.attach_required,
            topology: self.options.topology,
        }
    }

    /// The instances deployed besides the default one.
    pub fn instances(&self) -> &[DriverInstance] {
        &self.instances
    }

    /// Deploys more instances of the driver from the fixtures (no StorageClasses, no
    /// VolumeSnapshotClass, no second snapshot controller: the tests using an instance make
    /// their classes from [`DriverInstance::storage_class_parameters`]), and waits until each
    /// one's controller is Ready and every node lists it in its CSINode.
    pub async fn deploy_instances(
        &mut self,
        wanted: &[InstanceOptions],
    ) -> Result<Vec<DriverInstance>> {
        let mut deployed = Vec::new();
        for options in wanted {
            options.check()?;
            let instance = options.instance();
            if self.instances.iter().any(|i| i == &instance) {
                deployed.push(instance);
                continue;
            }
            let namespaces: Api<Namespace> = Api::all(self.client());
            let mut ns = Namespace::default();
            ns.metadata.name = Some(instance.namespace.clone());
            namespaces
                .create(&PostParams::default(), &ns)
                .await
                .map_err(Error::kube(format!(
                    "creating namespace {}",
                    instance.namespace
                )))?;
            self.instances.push(instance.clone());
            self.create_secret_in(&instance.namespace, &instance.secret_name)
                .await?;
            let mut vars = self.vars()?;
            vars.insert("NAMESPACE".into(), instance.namespace.clone());
            vars.insert("SECRET_NAME".into(), instance.secret_name.clone());
            vars.insert("DRIVER_NAME".into(), instance.driver_name.clone());
            vars.insert(
                "INSTANCE".into(),
                format!("{DEFAULT_INSTANCE}-{}", options.name),
            );
            vars.insert("WITH_TOPOLOGY".into(), instance.topology.to_string());
            self.apply_driver(&vars, instance.attach_required).await?;
            deployed.push(instance);
        }
        let timeout = self.options.ready_timeout;
        for instance in &deployed {
            self.wait_pod_ready_in(&instance.namespace, super::CONTROLLER_SELECTOR, timeout)
                .await?;
            self.wait_registered_as(&instance.driver_name, timeout)
                .await?;
        }
        Ok(deployed)
    }
}
