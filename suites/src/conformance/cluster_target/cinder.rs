//! The embedded default for the Cinder CSI driver: an embedded cluster started for the run,
//! the fake cloud with Cinder and Nova in this process (every node a Nova server; volumes on
//! loop devices), and the driver from `fixtures/cinder-csi/` or installed by the Cinder
//! operator. The driver requires attach and reports its zone, so the run's other driver
//! configurations ([`DriverConfig::AttachRequired`], [`DriverConfig::Topology`]) are the
//! installed driver itself.

use std::collections::{BTreeMap, HashMap};

use cluster::ClusterBackend;
use driver_spec::DriverSpec;

use super::super::progress::Progress;
use super::super::report::SetupStep;
use super::super::setup::SetupError;
use super::classes;
use super::options::EmbeddedOptions;
use crate::e2e::cinder::{
    CINDER_DRIVER_NAME, CINDER_OPERATOR_CLASS, CinderCsiEnvironment, CinderEnvironmentOptions,
    CinderInstall, CinderOperatorOptions,
};
use crate::registry::cloud::Cloud;
use crate::registry::{DriverConfig, DriverUnderTest, RunEnvironment, Target, TargetNode};

/// The node attach limit the run gives the driver (`[BlockStorage]
/// node-volume-attach-limit`): small enough for the volumeLimits suite to fill a node, large
/// enough that the other tests running beside each other never reach it.
pub const ATTACH_LIMIT: u32 = 16;

/// Starts the embedded default for the Cinder driver `spec`; returns the target and the
/// set-up steps with their times.
pub async fn start(
    spec: &DriverSpec,
    options: &EmbeddedOptions,
    progress: &dyn Progress,
) -> Result<(Target, Vec<SetupStep>), SetupError> {
    if options.backend != ClusterBackend::Embedded {
        return Err(SetupError::Usage(format!(
            "the Cinder driver runs on --backend embedded only (its loop devices and Nova servers are set up for node agents on this host), not {}",
            options.backend
        )));
    }
    if options.clouds_yaml.is_some() {
        return Err(SetupError::Usage(
            "--clouds-yaml: the Cinder driver runs against the run's own fake cloud only".into(),
        ));
    }
    let installer = if options.by_operator {
        "installed by the Cinder operator"
    } else {
        "from fixtures/cinder-csi"
    };
    progress.step(&format!(
        "starting an embedded cluster ({} nodes, zones {}) and the Cinder CSI driver {installer} against the fake cloud with Cinder and Nova (OpenStack {}; the first run builds the binaries and installs the control plane: minutes)",
        options.nodes,
        options.zones.join(","),
        options.openstack_release
    ));
    let environment = CinderCsiEnvironment::start(CinderEnvironmentOptions {
        nodes: options.nodes,
        zones: options.zones.clone(),
        attach_limit: Some(ATTACH_LIMIT),
        cloud: fakes::CloudConfig {
            release: options.openstack_release,
            ..fakes::CloudConfig::default()
        },
        install: if options.by_operator {
            CinderInstall::Operator(CinderOperatorOptions::default())
        } else {
            CinderInstall::Fixtures
        },
        ready_timeout: options.ready_timeout,
        keep_run_dir: options.keep_run_dir,
        ..CinderEnvironmentOptions::default()
    })
    .await
    .map_err(|e| SetupError::Environment(e.to_string()))?;
    let timings = environment.timings();
    let steps = vec![
        SetupStep::new("binaries located (and built)", timings.binaries),
        SetupStep::new("embedded cluster started", timings.cluster),
        SetupStep::new(&format!("driver deployed {installer}"), timings.deploy),
    ];

    let cluster = environment.cluster().clone();
    let client = cluster.client();
    let secret: HashMap<String, String> = environment
        .cloud()
        .secret(fakes::SecretKind::Password)
        .into_iter()
        .collect();
    let cloud = Cloud::cinder_from_flat_secret(secret, "the fake cloud")
        .await
        .map_err(|e| SetupError::Environment(e.to_string()))?;

    let hint = |e: SetupError| match e {
        SetupError::Spec(message) if options.by_operator => SetupError::Spec(format!(
            "{message} (the Cinder operator names its classes {CINDER_OPERATOR_CLASS}: use fixtures/driver-specs/cinder-operator.yaml)"
        )),
        other => other,
    };
    let storage_class = classes::storage_class(&client, spec).await.map_err(hint)?;
    let snapshot_class = classes::snapshot_class(&client, spec).await.map_err(hint)?;
    let default = DriverUnderTest {
        config: DriverConfig::Default,
        name: CINDER_DRIVER_NAME.into(),
        namespace: Some(environment.namespace().to_string()),
        spec: spec.clone(),
        storage_class,
        snapshot_class,
        attach_required: true,
        cluster: cluster.clone(),
    };
    let mut drivers = BTreeMap::new();
    for config in [DriverConfig::AttachRequired, DriverConfig::Topology] {
        drivers.insert(
            config,
            DriverUnderTest {
                config,
                ..default.clone()
            },
        );
    }
    drivers.insert(DriverConfig::Default, default);

    let nodes = TargetNode::all_of(&cluster);
    let target = Target {
        description: format!(
            "embedded cluster ({} nodes, zones {}) in {}, driver {installer}, against the fake cloud (OpenStack {}; Cinder, Nova; node attach limit {ATTACH_LIMIT})",
            options.nodes,
            options.zones.join(","),
            environment.run_dir().display(),
            options.openstack_release
        ),
        cluster,
        nodes,
        drivers,
        unavailable: BTreeMap::new(),
        cloud: Some(cloud),
        mounts_root: Some(environment.run_dir().to_path_buf()),
        environment: Some(RunEnvironment::Cinder(Box::new(environment))),
        events: None,
    };
    Ok((target, steps))
}
