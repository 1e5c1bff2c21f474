//! csi-provisioner
