//! csi-attacher
