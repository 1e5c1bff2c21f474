//! manila-csi-plugin
