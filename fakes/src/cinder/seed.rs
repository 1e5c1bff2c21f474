//! The block-storage seed types under the path they had before the seed was split by section
//! ([`crate::config`] is their home; this module only re-exports them).

pub use crate::config::{
    CinderConfig, CinderDelays, CinderQuotas, NovaConfig, ServerSeed, VolumeTypeSeed,
};
