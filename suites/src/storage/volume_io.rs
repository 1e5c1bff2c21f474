//! `volumeIO` (upstream `volume_io.go`): files of several sizes written into a volume with a
//! known pattern, then checked — size and POSIX `cksum` against the checksum computed here —
//! by the pod that wrote them and, where the driver claims persistence, by the next pod.

use driver_spec::Capability;

use super::bind_claim;
use super::provisioning::access_mode;
use super::volumes::test_seed;
use crate::e2e::workload::{PodBuilder, Workload, claim};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::storage::data::seeded_content;
use crate::{ensure_eq, test_case};

const SUITE: &str = "volumeIO";

/// Where the pods mount the volume (as upstream's).
const MOUNT: &str = "/opt";
/// The sizes written: small, medium and large, kept fast (upstream writes 1 MiB, 100 MiB and
/// 1 GiB); the spec file's `MaxFileSize` drops the larger ones.
const FILE_SIZES: [u64; 3] = [1 << 10, 1 << 20, 16 << 20];
/// Every file repeats one block of this many bytes.
const BLOCK: usize = 1 << 10;
/// The block doubled into this many bytes, which the pod appends to build big files.
const CHUNK: u64 = 1 << 20;
/// The fsGroup upstream gives the pods when the driver claims `fsGroup`.
const FS_GROUP: i64 = 1234;

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![test_case!(
        SUITE,
        "should write files of various sizes, verify size, validate content",
        Needs::NONE,
        files_of_various_sizes
    )]
}

/// One file of the test: its path in the pods and its size.
struct TestFile {
    path: String,
    size: u64,
}

async fn files_of_various_sizes(ctx: &TestContext<'_>) -> TestResult {
    let max = ctx.spec().driver_info.max_file_size;
    let sizes: Vec<u64> = FILE_SIZES
        .into_iter()
        .filter(|s| max.is_none_or(|m| i64::try_from(*s).is_ok_and(|s| s <= m)))
        .collect();
    if sizes.is_empty() {
        return Err(TestError::skip(format!(
            "the spec file's MaxFileSize {max:?} is below the suite's smallest file ({} bytes)",
            FILE_SIZES[0]
        )));
    }
    let block = seeded_content(test_seed(ctx, 0), BLOCK);
    let files: Vec<TestFile> = sizes
        .iter()
        .map(|size| TestFile {
            path: format!("{MOUNT}/io-test-{size}"),
            size: *size,
        })
        .collect();
    let expected = {
        let block = block.clone().into_bytes();
        let sizes = sizes.clone();
        tokio::task::spawn_blocking(move || {
            sizes
                .iter()
                .map(|s| repeated_cksum(&block, *s))
                .collect::<Vec<u32>>()
        })
        .await
        .map_err(|e| TestError::failed(format!("computing the expected checksums: {e}")))?
    };

    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    bind_claim(
        ctx,
        &claim("io", Some(&class), &ctx.claim_size(), access_mode(ctx)),
        None,
    )
    .await?;
    let pod = |name: &str| {
        let pod = PodBuilder::new(name, "true").claim("io", MOUNT);
        if ctx.spec().has(Capability::FsGroup) {
            pod.fs_group(FS_GROUP)
        } else {
            pod
        }
        .build()
    };

    w.ready_pod(&pod("writer")).await?;
    w.exec("writer", &write_script(&block, &files)).await?;
    verify(w, "writer", &files, &expected).await?;
    w.delete_pods(&["writer"]).await?;

    if ctx.spec().has(Capability::Persistence) {
        w.ready_pod(&pod("verifier")).await?;
        verify(w, "verifier", &files, &expected)
            .await
            .map_err(|e| e.context("read by a new pod after the writer was deleted"))?;
        w.delete_pods(&["verifier"]).await?;
    }
    Ok(())
}

/// A script that writes each file as the first `size` bytes of `block` repeated: the block,
/// doubled into a chunk of [`CHUNK`] bytes, appended whole as often as it fits, then its
/// beginning; then syncs and removes the block and chunk.
fn write_script(block: &str, files: &[TestFile]) -> String {
    let doublings = (CHUNK / BLOCK as u64).trailing_zeros();
    let mut script = format!(
        "set -e\ncd {MOUNT}\nprintf '%s' '{block}' > .block\ncp .block .chunk\n\
         i=0; while [ $i -lt {doublings} ]; do cat .chunk .chunk > .chunk2; mv .chunk2 .chunk; \
         i=$((i+1)); done\n"
    );
    for file in files {
        let whole = file.size / CHUNK;
        let rest = file.size % CHUNK;
        script.push_str(&format!(
            ": > '{path}'\ni=0; while [ $i -lt {whole} ]; do cat .chunk >> '{path}'; \
             i=$((i+1)); done\nhead -c {rest} .chunk >> '{path}'\n",
            path = file.path
        ));
    }
    script.push_str("rm -f .block .chunk\nsync\n");
    script
}

/// Fails unless each file, read in `pod`, has its size and expected checksum.
async fn verify(w: &Workload<'_>, pod: &str, files: &[TestFile], expected: &[u32]) -> TestResult {
    for (file, crc) in files.iter().zip(expected) {
        let size = w.exec(pod, &format!("wc -c < '{}'", file.path)).await?;
        ensure_eq!(
            size.trim().parse::<u64>().ok(),
            Some(file.size),
            "the size of {} in pod {pod} ({size:?})",
            file.path
        );
        let out = w.exec(pod, &format!("cksum < '{}'", file.path)).await?;
        let sum = out.split_whitespace().next().and_then(|s| s.parse().ok());
        ensure_eq!(
            sum,
            Some(*crc),
            "the cksum of {} ({} bytes) in pod {pod} (`cksum` printed {out:?})",
            file.path,
            file.size
        );
    }
    Ok(())
}

/// The POSIX `cksum` CRC of the first `size` bytes of `block` repeated.
fn repeated_cksum(block: &[u8], size: u64) -> u32 {
    let table = cksum_table();
    let step = |crc: u32, byte: u8| (crc << 8) ^ table[usize::from((crc >> 24) as u8 ^ byte)];
    let mut crc = 0u32;
    let mut left = size;
    while left > 0 && !block.is_empty() {
        let take = usize::try_from(left).map_or(block.len(), |l| l.min(block.len()));
        crc = block[..take].iter().fold(crc, |c, b| step(c, *b));
        left -= take as u64;
    }
    // Then the length, least significant byte first, without its leading zero bytes.
    let mut length = size;
    while length > 0 {
        crc = step(crc, (length & 0xff) as u8);
        length >>= 8;
    }
    !crc
}

/// The table of POSIX `cksum`'s CRC-32 (polynomial 0x04C11DB7, most significant bit first).
fn cksum_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    for (i, entry) in table.iter_mut().enumerate() {
        let mut c = (i as u32) << 24;
        for _ in 0..8 {
            c = if c & 0x8000_0000 != 0 {
                (c << 1) ^ 0x04C1_1DB7
            } else {
                c << 1
            };
        }
        *entry = c;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cksum_matches_posix_cksum() {
        // `printf '' | cksum`, `printf a | cksum`, `printf 123456789 | cksum`.
        assert_eq!(repeated_cksum(b"x", 0), 4_294_967_295);
        assert_eq!(repeated_cksum(b"a", 1), 1_220_704_766);
        assert_eq!(repeated_cksum(b"123456789", 9), 930_766_865);
        // A block repeated is the same as the bytes written out.
        assert_eq!(repeated_cksum(b"abc", 7), repeated_cksum(b"abcabca", 7));
    }

    #[test]
    fn the_write_script_builds_each_size_from_whole_chunks_and_a_rest() {
        let files = [TestFile {
            path: "/opt/f".into(),
            size: CHUNK * 2 + 1024,
        }];
        let script = write_script("ab", &files);
        assert!(script.contains("while [ $i -lt 10 ]"), "{script}");
        assert!(script.contains("while [ $i -lt 2 ]; do cat .chunk >> '/opt/f'"));
        assert!(script.contains("head -c 1024 .chunk >> '/opt/f'"));
    }
}
