//! An interrupted run cleans up: a plugin that records volumes and publications, served on
//! a real unix socket, hangs in the middle of a call and interrupts the run from there (as
//! Ctrl-C would); everything the run created must be gone afterwards, calls cut off in flight
//! included, and the report must say so. The command line's signal handling is tested with
//! a real SIGINT.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use csi_proto::v1::controller_server::{Controller, ControllerServer};
use csi_proto::v1::node_server::{Node, NodeServer};
use csi_proto::v1::{self, controller_service_capability};
use csi_proto::{Endpoint, Listener};
use testkit::drivers::TestIdentity;
use testkit::task::InProcess;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

use super::case::{Case, case};
use super::context::CaseContext;
use super::verdict::CaseResult;
use super::{Interruption, Outcome, SanityConfig, run_interruptible};

/// Where the recorder stops answering, and how it then interrupts the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hang {
    /// The first CreateVolume: the volume is made, the answer never comes.
    CreateVolume,
    /// The first NodePublishVolume: the target is made, the answer never comes.
    NodePublish,
    /// As `NodePublish`, and NodeUnpublishVolume hangs too (a second signal then abandons
    /// the cleanup).
    NodePublishAndUnpublish,
}

#[derive(Default)]
struct State {
    /// Volumes by name: id.
    volumes: BTreeMap<String, String>,
    /// Every name CreateVolume was asked for.
    asked: BTreeSet<String>,
    /// Published target paths.
    published: BTreeSet<String>,
    hang: Option<Hang>,
    created: usize,
}

/// A plugin keeping its volumes in memory; when it reaches its [`Hang`] it sends `how` to
/// the run's interrupt channel (`interrupt`) and never answers.
#[derive(Clone)]
struct Recorder {
    state: Arc<Mutex<State>>,
    interrupt: mpsc::Sender<String>,
    how: &'static str,
}

impl Recorder {
    /// Interrupts the run and never answers.
    async fn hang<T>(&self) -> T {
        let _ = self.interrupt.send(self.how.to_owned()).await;
        std::future::pending().await
    }
}

#[tonic::async_trait]
impl Controller for Recorder {
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

    async fn create_volume(
        &self,
        request: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        let name = request.into_inner().name;
        let (id, hang) = {
            let mut state = self.state.lock().unwrap();
            state.asked.insert(name.clone());
            let id = match state.volumes.get(&name) {
                Some(id) => id.clone(),
                None => {
                    state.created += 1;
                    let id = format!("vol-{}", state.created);
                    state.volumes.insert(name, id.clone());
                    id
                }
            };
            let hang = state.hang == Some(Hang::CreateVolume);
            if hang {
                state.hang = None;
            }
            (id, hang)
        };
        if hang {
            return self.hang().await;
        }
        Ok(Response::new(v1::CreateVolumeResponse {
            volume: Some(v1::Volume {
                volume_id: id,
                capacity_bytes: 1 << 30,
                ..Default::default()
            }),
        }))
    }

    async fn delete_volume(
        &self,
        request: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        let id = request.into_inner().volume_id;
        self.state
            .lock()
            .unwrap()
            .volumes
            .retain(|_, volume| *volume != id);
        Ok(Response::new(v1::DeleteVolumeResponse {}))
    }
}

#[tonic::async_trait]
impl Node for Recorder {
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
            node_id: "recorder-node".into(),
            ..Default::default()
        }))
    }

    async fn node_publish_volume(
        &self,
        request: Request<v1::NodePublishVolumeRequest>,
    ) -> Result<Response<v1::NodePublishVolumeResponse>, Status> {
        let target = request.into_inner().target_path;
        std::fs::create_dir_all(&target).map_err(|e| Status::internal(e.to_string()))?;
        let hang = {
            let mut state = self.state.lock().unwrap();
            state.published.insert(target);
            matches!(
                state.hang,
                Some(Hang::NodePublish | Hang::NodePublishAndUnpublish)
            )
        };
        if hang {
            return self.hang().await;
        }
        Ok(Response::new(v1::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<v1::NodeUnpublishVolumeRequest>,
    ) -> Result<Response<v1::NodeUnpublishVolumeResponse>, Status> {
        let target = request.into_inner().target_path;
        if self.state.lock().unwrap().hang == Some(Hang::NodePublishAndUnpublish) {
            return self.hang().await;
        }
        let _ = std::fs::remove_dir(&target);
        self.state.lock().unwrap().published.remove(&target);
        Ok(Response::new(v1::NodeUnpublishVolumeResponse {}))
    }
}

/// The recorder served on a unix socket in `dir`, and a run configuration whose mount and
/// staging directories do not exist yet (the run creates them).
async fn serve(
    dir: &Path,
    recorder: &Recorder,
) -> (InProcess<csi_proto::Result<()>>, SanityConfig) {
    let endpoint = Endpoint::Unix(dir.join("recorder.sock"));
    let listener = Listener::bind(&endpoint).await.unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(TestIdentity::with_controller("recorder.example.com").service())
        .add_service(ControllerServer::new(recorder.clone()))
        .add_service(NodeServer::new(recorder.clone()));
    let server = InProcess::spawn(|stopped| csi_proto::serve(router, listener, stopped));
    let mut config = SanityConfig::new(endpoint);
    config.mount_dir = dir.join("mnt");
    config.staging_dir = dir.join("staging");
    (server, config)
}

async fn create(cx: &mut CaseContext) -> CaseResult {
    let request = cx.create_request(&cx.unique("interrupted"));
    cx.must_create_volume(request).await?;
    Ok(())
}

async fn create_and_publish(cx: &mut CaseContext) -> CaseResult {
    let volume = cx
        .must_create_volume(cx.create_request(&cx.unique("published")))
        .await?;
    let request = v1::NodePublishVolumeRequest {
        volume_id: volume.volume_id,
        target_path: cx.target_path(),
        volume_capability: Some(cx.writer()),
        ..Default::default()
    };
    cx.node_publish(request)
        .await
        .map_err(|s| super::verdict::Verdict::Fail(s.to_string()))
}

/// Must never run: the run stops at the interrupted case.
async fn afterwards(cx: &mut CaseContext) -> CaseResult {
    cx.must_create_volume(cx.create_request("must-not-run"))
        .await?;
    Ok(())
}

fn cases() -> [Case; 3] {
    [
        case!("Interruption", "", "creates a volume", create),
        case!(
            "Interruption",
            "",
            "creates and publishes a volume",
            create_and_publish
        ),
        case!("Interruption", "", "runs afterwards", afterwards),
    ]
}

/// Runs the case `first` (and the ones after it) with the recorder hanging at `hang`.
async fn interrupted_run(
    hang: Hang,
    first: usize,
) -> (super::Report, Arc<Mutex<State>>, tempfile::TempDir) {
    let dir = tempfile::Builder::new()
        .prefix("sanity-interruption-")
        .tempdir()
        .unwrap();
    let (interrupt, mut interrupts) = mpsc::channel(4);
    let recorder = Recorder {
        state: Arc::new(Mutex::new(State {
            hang: Some(hang),
            ..State::default()
        })),
        interrupt,
        how: "SIGINT",
    };
    let (_server, config) = serve(dir.path(), &recorder).await;
    let report = run_interruptible(config, &cases()[first..], |_| {}, &mut interrupts)
        .await
        .unwrap();
    (report, recorder.state, dir)
}

#[tokio::test]
async fn a_create_cut_off_by_an_interrupt_is_repeated_and_its_volume_deleted() {
    let (report, state, dir) = interrupted_run(Hang::CreateVolume, 0).await;
    let state = state.lock().unwrap();
    assert!(
        state.volumes.is_empty(),
        "volumes left: {:?}",
        state.volumes
    );
    assert!(
        !state.asked.contains("must-not-run"),
        "a case ran after the interruption"
    );
    assert_eq!(report.cases.len(), 1, "{}", report.summary());
    assert_eq!(
        report.cases[0].outcome,
        Outcome::Failed("interrupted by SIGINT".into())
    );
    assert_eq!(
        report.interrupted,
        Some(Interruption {
            signal: "SIGINT".into(),
            case: Some("Interruption creates a volume".into()),
            left: Vec::new(),
        })
    );
    assert!(!report.success());
    assert!(
        report.summary().contains("were removed"),
        "{}",
        report.summary()
    );
    for created in ["mnt", "staging"] {
        assert!(!dir.path().join(created).exists(), "{created} is left");
    }
}

#[tokio::test]
async fn a_publish_cut_off_by_an_interrupt_is_unpublished_before_the_volume_goes() {
    let (report, state, dir) = interrupted_run(Hang::NodePublish, 1).await;
    let state = state.lock().unwrap();
    assert!(state.volumes.is_empty(), "{:?}", state.volumes);
    assert!(state.published.is_empty(), "{:?}", state.published);
    assert!(!state.asked.contains("must-not-run"));
    let interruption = report.interrupted.unwrap();
    assert!(interruption.left.is_empty(), "{:?}", interruption.left);
    assert!(
        !dir.path().join("mnt").exists(),
        "the mount directory is left"
    );
}

#[tokio::test]
async fn a_second_interrupt_abandons_the_cleanup_and_the_report_lists_what_is_left() {
    let dir = tempfile::Builder::new()
        .prefix("sanity-interruption-")
        .tempdir()
        .unwrap();
    let (interrupt, mut interrupts) = mpsc::channel(4);
    let recorder = Recorder {
        state: Arc::new(Mutex::new(State {
            hang: Some(Hang::NodePublishAndUnpublish),
            ..State::default()
        })),
        interrupt,
        how: "SIGTERM",
    };
    let (_server, config) = serve(dir.path(), &recorder).await;
    let report = run_interruptible(config, &cases()[1..], |_| {}, &mut interrupts)
        .await
        .unwrap();
    let interruption = report.interrupted.clone().unwrap();
    assert_eq!(interruption.signal, "SIGTERM");
    let left = interruption.left.join("\n");
    assert!(
        left.contains("maybe volume vol-1 published at") && left.contains("volume vol-1"),
        "{left}"
    );
    assert!(
        report.summary().contains("cleanup left:"),
        "{}",
        report.summary()
    );
    match &report.cases[0].outcome {
        Outcome::Failed(reason) => {
            assert!(reason.contains("cleanup abandoned on SIGTERM"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // What the test itself must tidy: the target the recorder made.
    let _ = std::fs::remove_dir_all(dir.path().join("mnt"));
}

#[tokio::test]
async fn the_command_line_cleans_up_on_a_real_sigint() {
    let dir = tempfile::Builder::new()
        .prefix("sanity-interruption-")
        .tempdir()
        .unwrap();
    // The recorder raises SIGINT at this process when CreateVolume hangs; its channel
    // goes nowhere.
    let (interrupt, _unused) = mpsc::channel(4);
    let recorder = Recorder {
        state: Arc::new(Mutex::new(State {
            hang: Some(Hang::CreateVolume),
            ..State::default()
        })),
        interrupt,
        how: "SIGINT",
    };
    let recorder = RaisingRecorder(recorder);
    let endpoint = Endpoint::Unix(dir.path().join("recorder.sock"));
    let listener = Listener::bind(&endpoint).await.unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(TestIdentity::with_controller("recorder.example.com").service())
        .add_service(ControllerServer::new(recorder.clone()))
        .add_service(NodeServer::new(recorder.0.clone()));
    let _server = InProcess::spawn(|stopped| csi_proto::serve(router, listener, stopped));
    let args = [
        "csi-sanity".to_string(),
        format!("--csi.endpoint={endpoint}"),
        format!("--csi.mountdir={}", dir.path().join("mnt").display()),
        format!("--csi.stagingdir={}", dir.path().join("staging").display()),
        "--ginkgo.focus=CreateVolume should return appropriate values SingleNodeWriter NoCapacity"
            .to_string(),
    ];
    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        args: super::cli::Args,
    }
    let command = <Command as clap::Parser>::parse_from(super::cli::go_style_args(args));
    let success = super::cli::run(command.args).await.unwrap();
    assert!(!success, "an interrupted run is not a success");
    let state = recorder.0.state.lock().unwrap();
    assert_eq!(state.created, 1, "the case created its volume");
    assert!(state.volumes.is_empty(), "{:?}", state.volumes);
    for created in ["mnt", "staging"] {
        assert!(!dir.path().join(created).exists(), "{created} is left");
    }
}

/// The recorder's controller, raising a real SIGINT where the recorder would hang.
#[derive(Clone)]
struct RaisingRecorder(Recorder);

#[tonic::async_trait]
impl Controller for RaisingRecorder {
    async fn controller_get_capabilities(
        &self,
        request: Request<v1::ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<v1::ControllerGetCapabilitiesResponse>, Status> {
        self.0.controller_get_capabilities(request).await
    }

    async fn create_volume(
        &self,
        request: Request<v1::CreateVolumeRequest>,
    ) -> Result<Response<v1::CreateVolumeResponse>, Status> {
        let hang = self.0.state.lock().unwrap().hang == Some(Hang::CreateVolume);
        if hang {
            // Record the volume without answering, then signal as Ctrl-C does.
            self.0.state.lock().unwrap().hang = None;
            let name = request.into_inner().name;
            {
                let mut state = self.0.state.lock().unwrap();
                state.created += 1;
                let id = format!("vol-{}", state.created);
                state.volumes.insert(name, id);
            }
            nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT).unwrap();
            return std::future::pending().await;
        }
        self.0.create_volume(request).await
    }

    async fn delete_volume(
        &self,
        request: Request<v1::DeleteVolumeRequest>,
    ) -> Result<Response<v1::DeleteVolumeResponse>, Status> {
        self.0.delete_volume(request).await
    }
}
