//! csi-snapshotter
