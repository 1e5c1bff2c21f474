//! The suite must catch a plugin that breaks the spec: an in-process plugin with known
//! bugs, served over a real unix socket, fails exactly the cases that check those bugs,
//! and the runner still removes every volume it created.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod grouped_plugin;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use csi_proto::v1::controller_server::{Controller, ControllerServer};
use csi_proto::v1::node_server::{Node, NodeServer};
use csi_proto::v1::{self, controller_service_capability};
use csi_proto::{Endpoint, Listener};
use grouped_plugin::{GROUP_AND_CLASSES, Grouped, run_grouped};
use suites::sanity::{self, Outcome, SanityConfig};
use testkit::drivers::TestIdentity;
use testkit::task::InProcess;
use tonic::{Request, Response, Status};

/// Volumes by id: (name, size).
#[derive(Clone, Default)]
struct Deviant {
    volumes: Arc<Mutex<BTreeMap<String, (String, i64)>>>,
}

#[tonic::async_trait]
impl Controller for Deviant {
    async fn controller_get_capabilities(
        &self,
        _: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        Ok(Response::new(v1::ControllerGetCapabilitiesResponse {
            capabilities: vec![v1::ControllerServiceCapability {
                r#type: Some(controller_service_capability::Type::Rpc(
                    controller_service_capability::Rpc {
                        r#type: controller_service_capability::rpc::Type::CreateDeleteVolume as i32,
                    },
                )),
            }],
        }))
    }

    /// Bugs: accepts an empty name and no capabilities, and returns the existing volume
    /// for a known name whatever the size (should be AlreadyExists).
    async fn create_volume(
        &self,
        request: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        let request = request.into_inner();
        let size = request.capacity_range.map_or(0, |r| r.required_bytes);
        let mut volumes = self.volumes.lock().unwrap();
        let existing = volumes
            .iter()
            .find(|(_, (name, _))| *name == request.name)
            .map(|(id, (_, size))| (id.clone(), *size));
        let (id, size) = existing.unwrap_or_else(|| {
            let id = format!("vol-{}", volumes.len() + 1);
            volumes.insert(id.clone(), (request.name.clone(), size));
            (id, size)
        });
        Ok(Response::new(v1::CreateVolumeResponse {
            volume: Some(v1::Volume {
                capacity_bytes: size,
                volume_id: id,
                ..Default::default()
            }),
        }))
    }

    /// Bug: an unknown volume is NotFound (deletion must be idempotent).
    async fn delete_volume(
        &self,
        request: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        let id = request.into_inner().volume_id;
        if id.is_empty() {
            return Err(Status::invalid_argument("volume_id: required"));
        }
        match self.volumes.lock().unwrap().remove(&id) {
            Some(_) => Ok(Response::new(v1::DeleteVolumeResponse {})),
            None => Err(Status::not_found(format!("no volume {id}"))),
        }
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<v1::ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<v1::ValidateVolumeCapabilitiesResponse>, Status> {
        let request = request.into_inner();
        if request.volume_id.is_empty() || request.volume_capabilities.is_empty() {
            return Err(Status::invalid_argument(
                "volume_id and volume_capabilities required",
            ));
        }
        if !self
            .volumes
            .lock()
            .unwrap()
            .contains_key(&request.volume_id)
        {
            return Err(Status::not_found("no such volume"));
        }
        Ok(Response::new(v1::ValidateVolumeCapabilitiesResponse {
            confirmed: Some(v1::validate_volume_capabilities_response::Confirmed {
                volume_capabilities: request.volume_capabilities,
                ..Default::default()
            }),
            message: String::new(),
        }))
    }
}

#[tonic::async_trait]
impl Node for Deviant {
    async fn node_get_capabilities(
        &self,
        _: Request<v1::NodeGetCapabilitiesRequest>,
    ) -> Result<Response<v1::NodeGetCapabilitiesResponse>, Status> {
        Ok(Response::new(v1::NodeGetCapabilitiesResponse::default()))
    }
    async fn node_get_info(
        &self,
        _: Request<v1::NodeGetInfoRequest>,
    ) -> Result<Response<v1::NodeGetInfoResponse>, Status> {
        Ok(Response::new(v1::NodeGetInfoResponse {
            node_id: "deviant-node".into(),
            ..Default::default()
        }))
    }

    /// Bug: no argument checks at all.
    async fn node_publish_volume(
        &self,
        request: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        let target = request.into_inner().target_path;
        if !target.is_empty() {
            std::fs::create_dir_all(&target).map_err(|e| Status::internal(e.to_string()))?;
        }
        Ok(Response::new(v1::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        let request = request.into_inner();
        if request.volume_id.is_empty() || request.target_path.is_empty() {
            return Err(Status::invalid_argument(
                "volume_id and target_path required",
            ));
        }
        let _ = std::fs::remove_dir(&request.target_path);
        Ok(Response::new(v1::NodeUnpublishVolumeResponse {}))
    }
}

#[tokio::test]
async fn suite_fails_exactly_the_cases_a_buggy_plugin_breaks() {
    let dir = tempfile::Builder::new()
        .prefix("sanity-detects-deviations-")
        .tempdir()
        .unwrap();
    let endpoint = Endpoint::Unix(dir.path().join("deviant.sock"));
    let plugin = Deviant::default();
    let listener = Listener::bind(&endpoint).await.unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(TestIdentity::with_controller("deviant.example.com").service())
        .add_service(ControllerServer::new(plugin.clone()))
        .add_service(NodeServer::new(plugin.clone()));
    let server = InProcess::spawn(|stopped| csi_proto::serve(router, listener, stopped));

    let mut config = SanityConfig::new(endpoint);
    config.mount_dir = dir.path().join("mnt");
    config.staging_dir = dir.path().join("staging");
    let report = sanity::run(config).await.unwrap();
    let failed: BTreeSet<&str> = report.failures().map(|c| c.name.as_str()).collect();
    let expected: BTreeSet<&str> = [
        "Controller Service [Controller Server] CreateVolume should fail when no name is provided",
        "Controller Service [Controller Server] CreateVolume should fail when no volume capabilities are provided",
        "Controller Service [Controller Server] CreateVolume should fail when requesting to create a volume with already existing name and different capacity",
        "Controller Service [Controller Server] DeleteVolume should succeed when an invalid volume id is used",
        "Node Service NodePublishVolume should fail when no volume id is provided",
        "Node Service NodePublishVolume should fail when no target path is provided",
        "Node Service NodePublishVolume should fail when no volume capability is provided",
    ]
    .into();
    assert_eq!(failed, expected, "{}", report.summary());

    let reason = |name: &str| match &report
        .cases
        .iter()
        .find(|c| c.name == name)
        .unwrap()
        .outcome
    {
        Outcome::Failed(reason) => reason.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        reason(
            "Controller Service [Controller Server] CreateVolume should fail when no name is provided"
        ),
        "CreateVolume without a name: expected error InvalidArgument, but the call succeeded"
    );
    assert!(
        reason("Controller Service [Controller Server] DeleteVolume should succeed when an invalid volume id is used")
            .contains("must succeed, got NotFound"),
    );
    assert!(
        reason("Node Service NodePublishVolume should fail when no volume capability is provided")
            .contains("cleanup failed: cannot remove"),
        "a target path left behind is reported"
    );
    assert!(report.passed() > 15, "{}", report.summary());
    // Even the volume created without a name by the failing case was deleted.
    assert!(
        plugin.volumes.lock().unwrap().is_empty(),
        "{:?}",
        plugin.volumes.lock().unwrap()
    );

    server.stop().await.unwrap();
}

/// Writes an executable shell script `name` into `dir` that appends `<name> <path>` to
/// `log` and then runs `body` (with the path as `$1`).
fn script(dir: &std::path::Path, log: &std::path::Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"{name} $1\" >> '{}'\n{body}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// csi-sanity's path commands: given `--csi.createmountpathcmd` and friends, the suite runs
/// them (`<cmd> <path>`) instead of making, removing and checking the directories itself,
/// uses the path a create command prints, and fails a case whose command fails.
#[tokio::test]
async fn path_commands_replace_the_suites_own_directory_handling() {
    let dir = tempfile::Builder::new()
        .prefix("sanity-path-commands-")
        .tempdir()
        .unwrap();
    let endpoint = Endpoint::Unix(dir.path().join("deviant.sock"));
    let plugin = Deviant::default();
    let listener = Listener::bind(&endpoint).await.unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(TestIdentity::with_controller("deviant.example.com").service())
        .add_service(ControllerServer::new(plugin.clone()))
        .add_service(NodeServer::new(plugin.clone()));
    let server = InProcess::spawn(|stopped| csi_proto::serve(router, listener, stopped));

    let log = dir.path().join("calls.log");
    // The create commands make `<path>-made` and print it: the suite must use that.
    let create_mount = script(
        dir.path(),
        &log,
        "create-mount",
        "mkdir \"$1-made\" && echo \"  $1-made\"",
    );
    let create_staging = script(
        dir.path(),
        &log,
        "create-staging",
        "mkdir \"$1-made\" && echo \"$1-made\"",
    );
    let remove_mount = script(dir.path(), &log, "remove-mount", "rmdir \"$1\"");
    let remove_staging = script(dir.path(), &log, "remove-staging", "rmdir \"$1\"");
    let check = script(
        dir.path(),
        &log,
        "check",
        "if [ -d \"$1\" ]; then echo directory; elif [ -f \"$1\" ]; then echo file; \
         elif [ -e \"$1\" ]; then echo other; else echo not_found; fi",
    );
    let focus = |patterns: &[&str]| sanity::CaseFilter {
        focus: patterns
            .iter()
            .map(|p| regex::Regex::new(p).unwrap())
            .collect(),
        skip: Vec::new(),
    };
    let mnt = dir.path().join("mnt");
    let staging = dir.path().join("staging");
    let mut config = SanityConfig::new(endpoint);
    config.mount_dir = mnt.clone();
    config.staging_dir = staging.clone();
    config.path_commands = sanity::PathCommands {
        create_mount: Some(create_mount.clone().into()),
        create_staging: Some(create_staging.into()),
        remove_mount: Some(remove_mount.into()),
        remove_staging: Some(remove_staging.into()),
        check: Some(check.into()),
        ..Default::default()
    };
    config.filter = focus(&["NodeUnpublishVolume should remove target path$"]);
    let report = sanity::run(config.clone()).await.unwrap();
    let outcome = |report: &sanity::Report, name: &str| {
        report
            .cases
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .outcome
            .clone()
    };
    let remove_target = "Node Service NodeUnpublishVolume should remove target path";
    assert_eq!(
        outcome(&report, remove_target),
        Outcome::Passed,
        "{}",
        report.summary()
    );
    let (m, s) = (mnt.display(), staging.display());
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!(
            "create-mount {m}\ncreate-staging {s}\n\
             check {m}-made/target\ncheck {m}-made/target\n\
             remove-staging {s}-made\nremove-mount {m}-made\n"
        ),
        "the commands in order, each with its path; the target inside the printed mount path"
    );
    assert!(
        !mnt.exists() && !staging.exists(),
        "the suite made no directory itself"
    );
    assert!(
        !dir.path().join("mnt-made").exists() && !dir.path().join("staging-made").exists(),
        "the remove commands removed the made paths"
    );

    // A create command without a check command: the case that looks at the target path
    // is skipped as csi-sanity skips it.
    std::fs::remove_file(&log).unwrap();
    let mut no_check = config.clone();
    no_check.path_commands.check = None;
    let report = sanity::run(no_check).await.unwrap();
    assert_eq!(
        outcome(&report, remove_target),
        Outcome::Skipped(
            "CreateTargetPathCmd was set, but CheckPathCmd was not. Please update your testing configuration to enable CheckPathCmd.".into()
        )
    );

    // A create command that fails fails the case, naming the command and its stderr; a
    // check command printing nonsense fails the case naming what it printed.
    let failing = script(
        dir.path(),
        &log,
        "create-fails",
        "echo 'no space left' >&2; exit 3",
    );
    let mut broken = config.clone();
    broken.path_commands.create_mount = Some(failing.clone().into());
    broken.path_commands.remove_mount = None;
    let report = sanity::run(broken).await.unwrap();
    let Outcome::Failed(reason) = outcome(&report, remove_target) else {
        panic!("{}", report.summary())
    };
    assert!(
        reason.contains(&format!(
            "mount path creation command `{failing} {m}` failed"
        )) && reason.contains("no space left"),
        "{reason}"
    );
    assert!(
        !dir.path().join("staging-made").exists(),
        "nothing made before the failure is left"
    );
    let nonsense = script(dir.path(), &log, "check-nonsense", "echo maybe");
    let mut broken = config.clone();
    broken.path_commands.check = Some(nonsense.into());
    let report = sanity::run(broken).await.unwrap();
    let Outcome::Failed(reason) = outcome(&report, remove_target) else {
        panic!("{}", report.summary())
    };
    assert!(reason.contains("printed \"maybe\""), "{reason}");
    assert!(
        !dir.path().join("mnt-made").exists() && !dir.path().join("staging-made").exists(),
        "a failed case still runs the remove commands"
    );
    assert!(plugin.volumes.lock().unwrap().is_empty());

    server.stop().await.unwrap();
}

/// The ListVolumes cases, the pagination one included: they pass against a plugin whose
/// tokens are indexes, and the ones that look at deleted volumes fail against a plugin that
/// keeps listing them; no volume is left.
#[tokio::test]
async fn list_volumes_cases_with_pagination() {
    let good = Grouped::default();
    let report = run_grouped(&good, &["ListVolumes"]).await;
    assert_eq!(report.passed(), 4, "{}", report.summary());
    assert_eq!(report.failed(), 0, "{}", report.summary());
    assert!(good.volumes.lock().unwrap().is_empty());

    let stale = Grouped {
        stale_list: true,
        ..Default::default()
    };
    let report = run_grouped(&stale, &["ListVolumes"]).await;
    let failed: BTreeSet<&str> = report.failures().map(|c| c.name.as_str()).collect();
    let expected: BTreeSet<&str> = [
        "Controller Service [Controller Server] ListVolumes check the presence of new volumes and absence of deleted ones in the volume list",
        "Controller Service [Controller Server] ListVolumes pagination should detect volumes added between pages and accept tokens when the last volume from a page is deleted",
    ]
    .into();
    assert_eq!(failed, expected, "{}", report.summary());
    assert!(stale.volumes.lock().unwrap().is_empty());
}

/// csi-sanity's volume attribute class creation cases and GroupController cases: they pass
/// against a plugin that follows the spec, fail exactly where a plugin breaks it (leaving
/// no volume or group snapshot behind), and skip as csi-sanity skips without the
/// group snapshot capability.
#[tokio::test]
async fn group_controller_and_volume_attribute_class_cases() {
    let outcomes = |report: &sanity::Report| -> Vec<String> {
        report
            .cases
            .iter()
            .filter(|c| !matches!(&c.outcome, Outcome::Skipped(r) if r.starts_with("not matched")))
            .map(|c| format!("{}: {:?}", c.name, c.outcome))
            .collect()
    };
    let good = Grouped {
        group_caps: true,
        ..Default::default()
    };
    let report = run_grouped(&good, GROUP_AND_CLASSES).await;
    assert_eq!(report.passed(), 8, "{}", report.summary());
    assert_eq!(report.failed(), 0, "{}", report.summary());
    assert!(good.volumes.lock().unwrap().is_empty());

    let buggy = Grouped {
        buggy: true,
        group_caps: true,
        ..Default::default()
    };
    let report = run_grouped(&buggy, GROUP_AND_CLASSES).await;
    let failed: BTreeSet<&str> = report.failures().map(|c| c.name.as_str()).collect();
    let expected: BTreeSet<&str> = [
        "Controller Service [Controller Server] CreateVolume should not create volume with an invalid volume attribute class",
        "GroupController Service [GroupController VolumeGroupSnapshots] CreateVolumeGroupSnapshot should fail when no name is provided",
        "GroupController Service [GroupController VolumeGroupSnapshots] DeleteVolumeGroupSnapshot should succeed when an invalid volume id is used",
    ]
    .into();
    assert_eq!(failed, expected, "{:#?}", outcomes(&report));
    assert_eq!(report.passed(), 5, "{:#?}", outcomes(&report));
    assert!(buggy.volumes.lock().unwrap().is_empty(), "volumes left");
    assert!(
        buggy.groups.lock().unwrap().is_empty(),
        "group snapshots left"
    );

    let no_caps = Grouped::default();
    let report = run_grouped(&no_caps, GROUP_AND_CLASSES).await;
    let skipped: Vec<String> = outcomes(&report)
        .into_iter()
        .filter(|o| o.contains("VolumeGroupSnapshots not supported"))
        .collect();
    assert_eq!(skipped.len(), 5, "{:#?}", outcomes(&report));
    assert_eq!(report.passed(), 3, "{:#?}", outcomes(&report));
}
