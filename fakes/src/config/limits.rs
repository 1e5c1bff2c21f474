//! The ranges seeds and the control API are checked against: delays, token lifetimes and
//! share sizes.

/// The longest transition delay or injected latency, in milliseconds (one day). Longer
/// values are refused (400 on the control API, an error in seeds): use a `stuck` fault for
/// a transition that never ends.
pub const MAX_DELAY_MS: u64 = 24 * 60 * 60 * 1000;

/// The longest token lifetime, in seconds (ten years).
pub const MAX_TOKEN_LIFETIME_SECS: u64 = 10 * 365 * 24 * 60 * 60;

/// The largest share size in GiB: Manila keeps sizes in a 32-bit integer column.
pub const MAX_SHARE_SIZE_GIB: u64 = i32::MAX as u64;

/// Checks a token lifetime: 1 to [`MAX_TOKEN_LIFETIME_SECS`] seconds; the error names
/// `field`.
pub(crate) fn check_token_lifetime(field: &str, seconds: u64) -> std::result::Result<(), String> {
    if (1..=MAX_TOKEN_LIFETIME_SECS).contains(&seconds) {
        Ok(())
    } else {
        Err(format!(
            "{field} {seconds} is out of range: a token lifetime is 1 to {MAX_TOKEN_LIFETIME_SECS} seconds"
        ))
    }
}

/// Checks a delay in milliseconds: at most [`MAX_DELAY_MS`]; the error names `field`.
pub(crate) fn check_delay(field: &str, ms: u64) -> std::result::Result<(), String> {
    if ms <= MAX_DELAY_MS {
        Ok(())
    } else {
        Err(format!(
            "{field} {ms} is out of range: delays are at most {MAX_DELAY_MS} ms (one day); use a stuck fault for a transition that never ends"
        ))
    }
}
