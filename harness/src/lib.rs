//! The conformance harness: the cluster backends the suites run against.
//!
//! - [`control_plane`]: a real Kubernetes control plane (etcd, kube-apiserver,
//!   kube-controller-manager, kube-scheduler) run as local processes.
//! - [`runtime`]: the container runtime of the simulated nodes: pods as sandboxed local
//!   processes in their own namespaces.
//! - [`node`]: the node agent, a kubelet simulation running pods through [`runtime`].
//! - [`cluster`]: the `Cluster` abstraction the suites use, with the embedded backend.
//! - [`net`]: this host's own address on a network.
//!
//! Waits on cluster state, error chains and the other Kubernetes plumbing are
//! [`kube_support`]'s.

pub mod cluster;
