//! csi-proto
