//! Data written and read back through pods, as upstream's `CheckWriteToPath` and
//! `CheckReadFromPath` do: content derived from a seed, so that a reader can tell the
//! writer's bytes from anyone else's, checked whole.

use crate::e2e::workload::Workload;
use crate::ensure;
use crate::registry::TestResult;

/// How many bytes [`write_seeded`] writes.
pub const SEEDED_LEN: usize = 4096;

/// `len` printable bytes determined by `seed` (hex digits of a xorshift sequence).
pub fn seeded_content(seed: u64, len: usize) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = String::with_capacity(len);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push_str(&format!("{state:016x}"));
    }
    out.truncate(len);
    out
}

/// Writes the content of `seed` to `path` from the `app` container of `pod`, and syncs.
pub async fn write_seeded(w: &Workload<'_>, pod: &str, path: &str, seed: u64) -> TestResult {
    let content = seeded_content(seed, SEEDED_LEN);
    w.exec(pod, &format!("printf '%s' '{content}' > '{path}' && sync"))
        .await?;
    Ok(())
}

/// Fails unless `path`, read from the `app` container of `pod`, holds the content of `seed`.
pub async fn check_seeded(w: &Workload<'_>, pod: &str, path: &str, seed: u64) -> TestResult {
    let want = seeded_content(seed, SEEDED_LEN);
    let got = w.exec(pod, &format!("cat '{path}'")).await?;
    ensure!(
        got == want,
        "{path} read in pod {pod} does not hold the data of seed {seed}: {} bytes, starting {:?}",
        got.len(),
        got.chars().take(32).collect::<String>()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_determined_by_the_seed() {
        assert_eq!(seeded_content(7, 100), seeded_content(7, 100));
        assert_ne!(seeded_content(7, 100), seeded_content(8, 100));
        assert_eq!(seeded_content(1, SEEDED_LEN).len(), SEEDED_LEN);
        assert!(seeded_content(1, 64).bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
