//! What the e2e tests (and later the `conformance` command) run on an environment: a
//! [`Workload`] is one scenario's namespace with its claims, pods and snapshots, whose steps fail with the
//! driver's diagnostics. `objects` builds and reads claims, pods and PVs; `waits` waits on
//! them with timeouts that report what was last seen.
//!
//! ```no_run
//! # async fn demo() -> suites::e2e::Result<()> {
//! use suites::e2e::workload::{Workload, claim, pod_with_claim};
//! use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment};
//! let env = ManilaCsiEnvironment::start(EnvironmentOptions::default()).await?;
//! let workload = Workload::create(&env, "demo").await?;
//! let data = workload.bound_claim(&claim("data", None, "1Gi", "ReadWriteMany")).await?;
//! workload.ready_pod(&pod_with_claim("writer", "data", None, "echo hi > /data/f")).await?;
//! assert_eq!(workload.exec("writer", "cat /data/f").await?, "hi\n");
//! workload.delete_pods(&["writer"]).await?;
//! workload.cleanup().await?;
//! env.teardown().await?;
//! # Ok(()) }
//! ```

mod objects;
mod pods;
mod waits;

use std::collections::BTreeMap;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use cluster::{Cluster, TestNamespace};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube_support::wait;

use super::error::{Error, Result};
use super::snapshots;

pub use objects::{
    MOUNT_PATH, TEST_IMAGE, block_claim, claim, claim_capacity, claim_from_snapshot, describe_pod,
    pod_is_ready, pod_with_claim, volume_capacity, volume_handle,
};
pub use pods::{PodBuilder, TEST_POD_LABEL};
pub use waits::{bound_volume, events_about, wait_pod_ready};

/// How long a [`Workload`]'s waits take at most, unless its [`WorkloadTimeouts`] say
/// otherwise.
pub const WAIT: Duration = Duration::from_secs(120);

/// How long a [`Workload`] waits for each kind of thing (the driver spec file's `Timeouts`
/// in a conformance run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadTimeouts {
    /// A claim to be Bound (upstream's `ClaimProvision`).
    pub claim_bound: Duration,
    /// A pod to be Ready (`PodStart`).
    pub pod_ready: Duration,
    /// A pod to be gone (`PodDelete`).
    pub pod_deleted: Duration,
    /// A VolumeSnapshot to be ready (`SnapshotCreate`).
    pub snapshot_ready: Duration,
    /// An event to be recorded.
    pub event: Duration,
}

impl Default for WorkloadTimeouts {
    fn default() -> Self {
        WorkloadTimeouts {
            claim_bound: WAIT,
            pod_ready: WAIT,
            pod_deleted: WAIT,
            snapshot_ready: WAIT,
            event: WAIT,
        }
    }
}

/// A claim Bound to its PV, and the Manila share behind it.
#[derive(Debug, Clone)]
pub struct BoundClaim {
    /// The claim, as Bound.
    pub claim: PersistentVolumeClaim,
    /// Its PV.
    pub volume: PersistentVolume,
    /// The PV's CSI volume handle: the Manila share id.
    pub share_id: String,
}

impl BoundClaim {
    /// The PV's name.
    pub fn volume_name(&self) -> &str {
        self.volume.metadata.name.as_deref().unwrap_or_default()
    }
}

/// What a [`Workload`] runs on: a cluster, and a driver whose state explains a failed step.
pub trait WorkloadHost: Send + Sync {
    /// The cluster.
    fn cluster(&self) -> &Cluster;
    /// The driver's pods and the tail of each container's log, for failure messages.
    fn diagnostics(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>>;
}

/// One scenario's namespace on an environment's cluster, with its claims and pods (see the
/// module docs). Pods are the [`pod_with_claim`] kind: one container, `app`.
pub struct Workload<'a> {
    host: &'a dyn WorkloadHost,
    namespace: TestNamespace,
    timeouts: WorkloadTimeouts,
    bound_volumes: std::sync::Mutex<Vec<String>>,
    /// The claims of the namespace.
    pub claims: Api<PersistentVolumeClaim>,
    /// The pods of the namespace.
    pub pods: Api<Pod>,
}

impl std::fmt::Debug for Workload<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workload")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl<'a> Workload<'a> {
    /// A fresh namespace `<prefix>-<random>` on `host`'s cluster.
    pub async fn create(host: &'a dyn WorkloadHost, prefix: &str) -> Result<Workload<'a>> {
        let namespace = host.cluster().namespace(prefix).await?;
        Ok(Self::in_namespace(host, namespace))
    }

    /// A workload in `namespace`, made by the caller (who may clean it up through
    /// [`Workload::cleanup`]).
    pub fn in_namespace(host: &'a dyn WorkloadHost, namespace: TestNamespace) -> Workload<'a> {
        Workload {
            claims: namespace.api(),
            pods: namespace.api(),
            host,
            namespace,
            timeouts: WorkloadTimeouts::default(),
            bound_volumes: Default::default(),
        }
    }

    /// The same workload waiting as long as `timeouts` say.
    pub fn with_timeouts(mut self, timeouts: WorkloadTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// How long its waits take at most.
    pub fn timeouts(&self) -> &WorkloadTimeouts {
        &self.timeouts
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        self.host.cluster()
    }

    /// An admin kube client.
    pub fn client(&self) -> kube::Client {
        self.host.cluster().client()
    }

    /// The namespace's name.
    pub fn namespace(&self) -> &str {
        self.namespace.name()
    }

    /// The PVs of every claim this workload saw Bound (also those deleted since), for the
    /// leftover checks after a test.
    pub fn bound_volumes(&self) -> Vec<String> {
        self.bound_volumes
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }

    /// The labels for cluster-scoped objects of this workload (e.g. a StorageClass), which
    /// [`Workload::cleanup`] checks are gone.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.namespace.labels()
    }

    /// `result`, or an [`Error::Diagnosed`] with `what` and the driver's pods and log tails.
    pub async fn check<T, E: Display>(
        &self,
        what: &str,
        result: std::result::Result<T, E>,
    ) -> Result<T> {
        match result {
            Ok(value) => Ok(value),
            Err(e) => Err(Error::Diagnosed {
                what: what.into(),
                cause: e.to_string(),
                diagnostics: self.host.diagnostics().await,
            }),
        }
    }

    /// Creates `claim` in the namespace.
    pub async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<()> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.claims
            .create(&PostParams::default(), claim)
            .await
            .map_err(Error::kube(format!(
                "creating PVC {}/{name}",
                self.namespace()
            )))?;
        Ok(())
    }

    /// Waits until the claim `name` is Bound; returns it with its PV and share.
    pub async fn wait_bound(&self, name: &str) -> Result<BoundClaim> {
        let what = format!("claim {name} Bound");
        let claim = self
            .check(
                &what,
                wait::wait_claim_bound(&self.claims, name, self.timeouts.claim_bound).await,
            )
            .await?;
        let volume = bound_volume(&self.client(), &claim).await?;
        if let (Ok(mut seen), Some(pv)) = (self.bound_volumes.lock(), &volume.metadata.name) {
            seen.push(pv.clone());
        }
        let share_id = volume_handle(&volume)
            .ok_or_else(|| Error::Unexpected(format!("PV of claim {name} has no CSI handle")))?;
        Ok(BoundClaim {
            claim,
            volume,
            share_id,
        })
    }

    /// Creates `claim` and waits until it is Bound.
    pub async fn bound_claim(&self, claim: &PersistentVolumeClaim) -> Result<BoundClaim> {
        self.create_claim(claim).await?;
        self.wait_bound(claim.metadata.name.as_deref().unwrap_or_default())
            .await
    }

    /// Creates `pod` in the namespace.
    pub async fn create_pod(&self, pod: &Pod) -> Result<()> {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.pods
            .create(&PostParams::default(), pod)
            .await
            .map_err(Error::kube(format!(
                "creating pod {}/{name}",
                self.namespace()
            )))?;
        Ok(())
    }

    /// Waits until the pod `name` is Ready.
    pub async fn wait_ready(&self, name: &str) -> Result<Pod> {
        let what = format!("pod {name} Ready");
        self.check(
            &what,
            wait_pod_ready(&self.pods, name, self.timeouts.pod_ready).await,
        )
        .await
    }

    /// Creates `pod` and waits until it is Ready.
    pub async fn ready_pod(&self, pod: &Pod) -> Result<Pod> {
        self.create_pod(pod).await?;
        self.wait_ready(pod.metadata.name.as_deref().unwrap_or_default())
            .await
    }

    /// Waits for an event about the object `name` with `reason` whose message contains
    /// `contains`.
    pub async fn wait_event(&self, name: &str, reason: &str, contains: &str) -> Result<Event> {
        let what = format!("a {reason} event about {name}");
        let client = self.client();
        let found = wait::wait_event(
            &client,
            self.namespace(),
            name,
            reason,
            contains,
            self.timeouts.event,
        )
        .await;
        self.check(&what, found).await
    }

    /// The VolumeSnapshots of the namespace.
    pub fn snapshots(&self) -> Api<DynamicObject> {
        snapshots::volume_snapshots(&self.client(), self.namespace())
    }

    /// Creates the VolumeSnapshot `name` of the claim `claim` with the VolumeSnapshotClass
    /// `class` and waits until it is ready to use.
    pub async fn ready_snapshot(
        &self,
        name: &str,
        claim: &str,
        class: &str,
    ) -> Result<DynamicObject> {
        let api = self.snapshots();
        api.create(
            &PostParams::default(),
            &snapshots::volume_snapshot(name, claim, class),
        )
        .await
        .map_err(Error::kube(format!(
            "creating VolumeSnapshot {}/{name}",
            self.namespace()
        )))?;
        let what = format!("VolumeSnapshot {name} readyToUse");
        self.check(
            &what,
            snapshots::wait_ready(&api, name, self.timeouts.snapshot_ready).await,
        )
        .await
    }

    /// Runs `script` with `sh -c` in the `app` container of `pod`; its stdout, or an error
    /// with the exit code and stderr when it fails.
    pub async fn exec(&self, pod: &str, script: &str) -> Result<String> {
        let out = self
            .host
            .cluster()
            .exec(self.namespace(), pod, "app", &["sh", "-c", script])
            .await?;
        if out.code() != 0 {
            return Err(Error::Unexpected(format!(
                "`{script}` in {pod} exited {}: {}",
                out.code(),
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Deletes the pods `names` and waits until they are gone (their volumes unpublished).
    pub async fn delete_pods(&self, names: &[&str]) -> Result<()> {
        for name in names {
            self.pods
                .delete(name, &DeleteParams::default())
                .await
                .map_err(Error::kube(format!(
                    "deleting pod {}/{name}",
                    self.namespace()
                )))?;
        }
        for name in names {
            wait::wait_deleted(&self.pods, name, self.timeouts.pod_deleted).await?;
        }
        Ok(())
    }

    /// Deletes the namespace, waits until it is gone and checks that no cluster-scoped object
    /// with [`Workload::labels`] is left.
    pub async fn cleanup(self) -> Result<()> {
        Ok(self.namespace.cleanup().await?)
    }
}
