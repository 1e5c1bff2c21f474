//! Pods as sandboxed local processes: the container runtime of the simulated nodes.
