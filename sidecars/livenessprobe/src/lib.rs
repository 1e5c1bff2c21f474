//! livenessprobe
