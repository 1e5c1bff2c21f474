//! csi-resizer
