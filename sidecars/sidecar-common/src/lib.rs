//! sidecar-common
