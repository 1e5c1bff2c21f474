//! Data written and read back through pods, as upstream's `CheckWriteToPath` and
//! `CheckReadFromPath` do: content derived from a seed, so that a reader can tell the
//! writer's bytes from anyone else's, checked whole.

use crate::e2e::workload::Workload;
use crate::ensure;
use crate::registry::{TestError, TestResult};

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

/// Writes the content of `seed` to the block `slot` ([`SEEDED_LEN`] bytes each) of the raw
/// device `device` from the `app` container of `pod`, flushed to the device.
pub async fn write_seeded_block(
    w: &Workload<'_>,
    pod: &str,
    device: &str,
    slot: u64,
    seed: u64,
) -> TestResult {
    let content = seeded_content(seed, SEEDED_LEN);
    w.exec(
        pod,
        &format!(
            "printf '%s' '{content}' | dd of='{device}' bs={SEEDED_LEN} seek={slot} count=1 \
             conv=notrunc,fsync 2>/dev/null"
        ),
    )
    .await?;
    Ok(())
}

/// Fails unless the block `slot` of the raw device `device`, read from the `app` container of
/// `pod` past the page cache (`O_DIRECT`: another node's writes reach the device, not this
/// node's cache), holds the content of `seed`.
pub async fn check_seeded_block(
    w: &Workload<'_>,
    pod: &str,
    device: &str,
    slot: u64,
    seed: u64,
) -> TestResult {
    let want = seeded_content(seed, SEEDED_LEN);
    let got = w
        .exec(
            pod,
            &format!(
                "dd if='{device}' bs={SEEDED_LEN} skip={slot} count=1 iflag=direct 2>/dev/null"
            ),
        )
        .await?;
    ensure!(
        got == want,
        "block {slot} of {device} read in pod {pod} does not hold the data of seed {seed}: {} \
         bytes, starting {:?}",
        got.len(),
        got.chars().take(32).collect::<String>()
    );
    Ok(())
}

/// The size in bytes of the file system mounted at `path` in the `app` container of `pod`
/// (`statfs`: blocks times block size).
pub async fn filesystem_size(w: &Workload<'_>, pod: &str, path: &str) -> TestResult<u64> {
    let out = w.exec(pod, &format!("stat -f -c '%b %S' '{path}'")).await?;
    let numbers: Vec<u64> = out
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    match numbers[..] {
        [blocks, block_size] => Ok(blocks * block_size),
        _ => Err(TestError::failed(format!(
            "`stat -f` of {path} in {pod} printed {out:?}, not blocks and block size"
        ))),
    }
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
