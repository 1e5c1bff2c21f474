//! The `Cluster` abstraction the suites use, and its embedded backend.
