//! snapshot-controller
