//! The embedded default: one embedded cluster for the whole run, the fake cloud in this
//! process, the Manila CSI driver deployed from `fixtures/manila-csi/`, and a driver instance
//! of its own for each other configuration the selected tests need (see
//! `suites::e2e::InstanceOptions`). A spec file of the Cinder driver starts the Cinder
//! environment instead (see [`super::cinder`]).

use std::collections::BTreeMap;
use std::time::Instant;

use driver_spec::{Capability, DriverSpec};

use super::super::progress::Progress;
use super::super::report::SetupStep;
use super::super::setup::SetupError;
use super::classes;
pub use super::options::EmbeddedOptions;
use cluster::ClusterBackend;

use crate::e2e::cinder::CINDER_DRIVER_NAME;
use crate::e2e::{
    CloudSource, DRIVER_NAME, DriverInstance, EnvironmentOptions, ExternalCloud, Install,
    InstanceOptions, ManilaCsiEnvironment, NfsAccess, OperatorOptions, TOPOLOGY_KEY,
};
use crate::registry::cloud::{self, Cloud};
use crate::registry::{DriverConfig, DriverUnderTest, RunEnvironment, Target, TargetNode};

/// Starts the embedded default for `spec` (the Manila or the Cinder driver); returns the
/// target and the set-up steps with their times.
pub async fn start(
    spec: &DriverSpec,
    options: &EmbeddedOptions,
    progress: &dyn Progress,
) -> Result<(Target, Vec<SetupStep>), SetupError> {
    if spec.driver_info.name == CINDER_DRIVER_NAME {
        return super::cinder::start(spec, options, progress).await;
    }
    if spec.driver_info.name != DRIVER_NAME {
        return Err(SetupError::Spec(format!(
            "DriverInfo.Name is {}, but the embedded default deploys {DRIVER_NAME} or {CINDER_DRIVER_NAME}: use --kubeconfig for another driver",
            spec.driver_info.name
        )));
    }
    let (cloud_source, cloud_name) = match &options.clouds_yaml {
        Some((path, name)) => {
            let secret = cloud::flat_secret_from_clouds_yaml(path, name)
                .map_err(|e| SetupError::Cloud(e.to_string()))?;
            let external = ExternalCloud {
                secret,
                source: cloud::describe(path, name),
                nfs: match &options.nfs_export_root {
                    Some(root) => NfsAccess::Local(root.clone()),
                    None => NfsAccess::Kernel,
                },
            };
            let described = external.source.clone();
            (CloudSource::External(external), described)
        }
        None => (
            CloudSource::Fake,
            format!("the fake cloud (OpenStack {})", options.openstack_release),
        ),
    };
    let kind = match options.backend {
        ClusterBackend::Embedded => "an embedded cluster",
        ClusterBackend::Containers => "a cluster in containers",
    };
    let installer = if options.by_operator {
        "installed by the Manila operator"
    } else {
        "from fixtures/manila-csi"
    };
    progress.step(&format!(
        "starting {kind} ({} nodes, zones {}) and the Manila CSI driver {installer} against {cloud_name} (the first run builds the binaries and installs the control plane: minutes)",
        options.nodes,
        options.zones.join(",")
    ));
    let mut environment = ManilaCsiEnvironment::start(EnvironmentOptions {
        nodes: options.nodes,
        zones: options.zones.clone(),
        keep_run_dir: options.keep_run_dir,
        ready_timeout: options.ready_timeout,
        cloud_source,
        cloud: fakes::CloudConfig {
            release: options.openstack_release,
            ..fakes::CloudConfig::default()
        },
        backend: options.backend,
        install: if options.by_operator {
            Install::Operator(OperatorOptions::default())
        } else {
            Install::Fixtures
        },
        ..EnvironmentOptions::default()
    })
    .await
    .map_err(|e| SetupError::Environment(e.to_string()))?;
    let timings = environment.timings();
    let mut steps = vec![
        SetupStep::new("binaries located (and built)", timings.binaries),
        SetupStep::new(
            &format!("{} cluster started", options.backend),
            timings.cluster,
        ),
        SetupStep::new(&format!("driver deployed {installer}"), timings.deploy),
    ];

    let wanted: Vec<InstanceOptions> = options
        .configs
        .iter()
        .filter_map(|config| match config {
            DriverConfig::Default => None,
            DriverConfig::AttachRequired => Some(InstanceOptions {
                name: "attach".into(),
                attach_required: true,
                topology: false,
            }),
            DriverConfig::Topology => Some(InstanceOptions {
                name: "topo".into(),
                attach_required: false,
                topology: true,
            }),
        })
        .collect();
    let mut instances = Vec::new();
    if !wanted.is_empty() {
        let names: Vec<&str> = wanted.iter().map(|w| w.name.as_str()).collect();
        progress.step(&format!(
            "deploying driver instances for other configurations: {}",
            names.join(", ")
        ));
        let started = Instant::now();
        instances = environment
            .deploy_instances(&wanted)
            .await
            .map_err(|e| SetupError::Environment(e.to_string()))?;
        steps.push(SetupStep::new(
            "driver instances deployed",
            started.elapsed(),
        ));
    }

    let cluster = environment.cluster().clone();
    let client = cluster.client();
    let secret: std::collections::HashMap<String, String> =
        environment.driver_secret().into_iter().collect();
    let cloud = Cloud::from_flat_secret(secret, &cloud_name)
        .await
        .map_err(|e| SetupError::Environment(e.to_string()))?;

    let storage_class = classes::storage_class(&client, spec).await?;
    let snapshot_class = classes::snapshot_class(&client, spec).await?;
    let default = DriverUnderTest {
        config: DriverConfig::Default,
        name: DRIVER_NAME.into(),
        namespace: Some(environment.namespace().to_string()),
        spec: spec.clone(),
        storage_class,
        snapshot_class,
        attach_required: false,
        cluster: cluster.clone(),
    };
    let mut drivers = BTreeMap::new();
    for (options, instance) in wanted.iter().zip(&instances) {
        let config = if options.attach_required {
            DriverConfig::AttachRequired
        } else {
            DriverConfig::Topology
        };
        drivers.insert(config, instance_driver(&default, config, instance));
    }
    drivers.insert(DriverConfig::Default, default);

    let nodes = TargetNode::all_of(&cluster);
    let mounts_root = Some(environment.run_dir().to_path_buf());
    let target = Target {
        description: format!(
            "{} cluster ({} nodes, zones {}) in {}, driver {installer}, against {cloud_name}",
            options.backend,
            options.nodes,
            options.zones.join(","),
            environment.run_dir().display()
        ),
        cluster,
        nodes,
        drivers,
        unavailable: BTreeMap::new(),
        cloud: Some(cloud),
        mounts_root,
        environment: Some(RunEnvironment::Manila(Box::new(environment))),
        events: None,
    };
    Ok((target, steps))
}

/// The driver under test for an extra instance: the default's spec and classes, renamed and
/// pointed at the instance's Secret; with topology, the spec claims it.
fn instance_driver(
    default: &DriverUnderTest,
    config: DriverConfig,
    instance: &DriverInstance,
) -> DriverUnderTest {
    let mut spec = default.spec.clone();
    spec.driver_info.name = instance.driver_name.clone();
    if instance.topology {
        spec.driver_info
            .capabilities
            .set(Capability::Topology, true);
        spec.driver_info.topology_keys = vec![TOPOLOGY_KEY.to_string()];
    }
    DriverUnderTest {
        config,
        name: instance.driver_name.clone(),
        namespace: Some(instance.namespace.clone()),
        spec,
        storage_class: default.storage_class.as_ref().map(|t| {
            classes::for_instance(
                t,
                &instance.driver_name,
                &instance.namespace,
                &instance.secret_name,
            )
        }),
        snapshot_class: default.snapshot_class.as_ref().map(|t| {
            classes::snapshot_class_for_instance(
                t,
                &instance.driver_name,
                &instance.namespace,
                &instance.secret_name,
            )
        }),
        attach_required: instance.attach_required,
        cluster: default.cluster.clone(),
    }
}
