//! The workspace's Kubernetes and process plumbing, one home per concept, for every binary
//! and library that talks to Kubernetes: the CSI sidecars (whose skeleton, `sidecar-common`,
//! is built on this), the operator, the node agent and cluster backends (`harness`), the
//! suites and the test kit.
//!
//! Without the default `kube` feature only the first three are built (for binaries with no
//! Kubernetes dependency, such as the fake cloud and the NFS node plugin):
//!
//! - [`telemetry`]: the logging set-up every binary shares (stderr, klog's `-v` or a default
//!   filter, `RUST_LOG` winning, plain text unless stderr is a terminal);
//! - [`klog`]: klog's command-line flags as upstream's Go plugins register them;
//! - [`go_duration`]: Go's duration syntax (`1m30s`), the one parser of the workspace.
//!
//! With it:
//!
//! - [`kube_client`]: a client from `--kubeconfig` or the in-cluster/default configuration;
//! - [`instance`]: this replica's name and its pod's namespace;
//! - [`shutdown`]: a future resolving on SIGTERM/SIGINT;
//! - [`leader`]: leader election by a `coordination.k8s.io/v1` Lease;
//! - [`events`]: a core/v1 Event recorder;
//! - [`backoff`]: per-key exponential, capped back-off for failed work items;
//! - [`finalizers`]: adding and removing finalizers guarded by the resourceVersion;
//! - [`quantity`]: storage quantities (`1Gi`, `500M`) as bytes and back;
//! - [`claims`]: a PersistentVolumeClaim's annotations for a CSI controller's
//!   `--pvc-annotations` (the client built from `--kubeconfig`/`--master`);
//! - [`crd`]: installing CustomResourceDefinitions and waiting until they are Established;
//! - [`wait`]: the one family of waits on cluster state, whose errors say what was last seen;
//! - [`error`]: an error with its causes as one line ([`error::error_chain`]) and the
//!   `(action, path)` context of a failed file-system call ([`error::IoContext`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use kube_support::{kube_client, telemetry, wait};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! telemetry::init(2);
//! let client = kube_client::client(None).await?;
//! let pods: kube::Api<Pod> = kube::Api::namespaced(client, "default");
//! let running = kube::runtime::conditions::is_pod_running();
//! wait::wait_for(&pods, "web", running, Duration::from_secs(30)).await?;
//! # Ok(()) }
//! ```

#[cfg(feature = "kube")]
pub mod backoff;
#[cfg(feature = "kube")]
pub mod claims;
#[cfg(feature = "kube")]
pub mod crd;
#[cfg(feature = "kube")]
pub mod error;
#[cfg(feature = "kube")]
pub mod events;
#[cfg(feature = "kube")]
pub mod finalizers;
pub mod go_duration;
#[cfg(feature = "kube")]
pub mod instance;
pub mod klog;
#[cfg(feature = "kube")]
pub mod kube_client;
#[cfg(feature = "kube")]
pub mod leader;
#[cfg(feature = "kube")]
pub mod quantity;
#[cfg(feature = "kube")]
pub mod shutdown;
pub mod telemetry;
#[cfg(feature = "kube")]
pub mod wait;
