//! nfs-csi-plugin
