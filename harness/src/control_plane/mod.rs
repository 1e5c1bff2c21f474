//! A real Kubernetes control plane run as local processes.
