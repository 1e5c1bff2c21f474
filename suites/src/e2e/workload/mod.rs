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
mod waits;

use std::collections::BTreeMap;
use std::fmt::Display;
use std::time::Duration;

use harness::cluster::{TestNamespace, wait};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};

use super::ManilaCsiEnvironment;
use super::error::{Error, Result};
use super::snapshots;

pub use objects::{
    MOUNT_PATH, TEST_IMAGE, claim, claim_capacity, claim_from_snapshot, describe_pod, pod_is_ready,
    pod_with_claim, volume_capacity, volume_handle,
};
pub use waits::{bound_volume, events_about, wait_claim_bound, wait_event, wait_pod_ready};

/// How long a [`Workload`]'s waits take at most.
pub const WAIT: Duration = Duration::from_secs(120);

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

/// One scenario's namespace on an environment's cluster, with its claims and pods (see the
/// module docs). Pods are the [`pod_with_claim`] kind: one container, `app`.
#[derive(Debug)]
pub struct Workload<'a> {
    env: &'a ManilaCsiEnvironment,
    namespace: TestNamespace,
    /// The claims of the namespace.
    pub claims: Api<PersistentVolumeClaim>,
    /// The pods of the namespace.
    pub pods: Api<Pod>,
}

impl<'a> Workload<'a> {
    /// A fresh namespace `<prefix>-<random>` on `env`'s cluster.
    pub async fn create(env: &'a ManilaCsiEnvironment, prefix: &str) -> Result<Workload<'a>> {
        let namespace = env.cluster().namespace(prefix).await?;
        Ok(Workload {
            claims: namespace.api(),
            pods: namespace.api(),
            env,
            namespace,
        })
    }

    /// The namespace's name.
    pub fn namespace(&self) -> &str {
        self.namespace.name()
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
                diagnostics: self.env.diagnostics().await,
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
            .check(&what, wait_claim_bound(&self.claims, name, WAIT).await)
            .await?;
        let volume = bound_volume(&self.env.client(), &claim).await?;
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
        self.check(&what, wait_pod_ready(&self.pods, name, WAIT).await)
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
        let client = self.env.client();
        let found = wait_event(&client, self.namespace(), name, reason, contains, WAIT).await;
        self.check(&what, found).await
    }

    /// The VolumeSnapshots of the namespace.
    pub fn snapshots(&self) -> Api<DynamicObject> {
        snapshots::volume_snapshots(&self.env.client(), self.namespace())
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
        self.check(&what, snapshots::wait_ready(&api, name, WAIT).await)
            .await
    }

    /// Runs `script` with `sh -c` in the `app` container of `pod`; its stdout, or an error
    /// with the exit code and stderr when it fails.
    pub async fn exec(&self, pod: &str, script: &str) -> Result<String> {
        let out = self
            .env
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
            wait::wait_deleted(&self.pods, name, WAIT).await?;
        }
        Ok(())
    }

    /// Deletes the namespace, waits until it is gone and checks that no cluster-scoped object
    /// with [`Workload::labels`] is left.
    pub async fn cleanup(self) -> Result<()> {
        Ok(self.namespace.cleanup().await?)
    }
}
