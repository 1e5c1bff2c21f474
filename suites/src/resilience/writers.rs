//! Writer pods: the application that must not notice. Each appends a wall-clock timestamp
//! (nanoseconds since the epoch) to `/data/<pod>.log` on its claim every 100 ms; a failed
//! write goes to `/tmp/write-errors` in the container instead. Reading the files back gives,
//! per writer, the **writer stall** (the longest gap between consecutive lines, or between
//! the last line and the moment the file was read) and proves that what was written before
//! is still there.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kube_support::wait;

use crate::e2e::timeline::Timeline;
use crate::e2e::workload::{PodBuilder, Workload};
use crate::registry::{TestError, TestResult};

/// How often a writer writes.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// Where a writer's claim is mounted in its pod.
const MOUNT: &str = "/data";

/// A writer to start: a pod `pod` writing to claim `claim`, on `node` when given.
#[derive(Debug, Clone)]
pub struct WriterSpec {
    /// The pod's name (and its file's: `/data/<pod>.log`).
    pub pod: String,
    /// The claim it writes to.
    pub claim: String,
    /// The node to run on.
    pub node: Option<String>,
}

impl WriterSpec {
    /// A writer `pod` on claim `claim`, wherever the scheduler puts it.
    pub fn new(pod: &str, claim: &str) -> Self {
        WriterSpec {
            pod: pod.into(),
            claim: claim.into(),
            node: None,
        }
    }

    /// On node `node`.
    pub fn on(mut self, node: &str) -> Self {
        self.node = Some(node.into());
        self
    }
}

/// The script of a writer writing to `file`: in the foreground, so that nothing of it outlives
/// the container (a background loop would keep the volume busy after the pod is deleted).
fn script(file: &str) -> String {
    format!(
        "trap 'exit 0' TERM\n\
         while true; do \
           date +%s%N >> {file} 2>/dev/null || echo \"$(date +%s%N) write failed\" >> /tmp/write-errors; \
           sleep 0.1; \
         done"
    )
}

/// What one writer's file showed when read.
#[derive(Debug, Clone)]
pub struct WriterFile {
    /// The writer's pod.
    pub pod: String,
    /// The timestamps, in file order.
    pub lines: Vec<SystemTime>,
    /// When the file was read.
    pub read_at: SystemTime,
    /// The writer's failed writes (the lines of `/tmp/write-errors`).
    pub write_errors: Vec<String>,
}

/// The longest gap a writer saw, and when it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// Its length.
    pub length: Duration,
    /// When it began (the line before it).
    pub from: SystemTime,
}

impl WriterFile {
    /// The writer stall: the longest gap between consecutive lines written at or after
    /// `since`, including the gap from the last line to when the file was read. `None`
    /// without lines after `since`.
    pub fn stall_since(&self, since: SystemTime) -> Option<Stall> {
        let mut times: Vec<SystemTime> =
            self.lines.iter().copied().filter(|t| *t >= since).collect();
        if times.is_empty() {
            return None;
        }
        times.push(self.read_at.max(*times.last()?));
        times
            .windows(2)
            .map(|pair| Stall {
                length: pair[1].duration_since(pair[0]).unwrap_or_default(),
                from: pair[0],
            })
            .max_by_key(|s| s.length)
    }

    /// How many lines were written at or after `since`.
    pub fn lines_since(&self, since: SystemTime) -> usize {
        self.lines.iter().filter(|t| **t >= since).count()
    }
}

/// Writer pods in a test's namespace (see the module docs).
pub struct Writers<'w, 'a> {
    workload: &'w Workload<'a>,
    timeline: Timeline,
    specs: Vec<WriterSpec>,
}

impl std::fmt::Debug for Writers<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writers")
            .field("namespace", &self.workload.namespace())
            .field("writers", &self.specs)
            .finish_non_exhaustive()
    }
}

impl<'w, 'a> Writers<'w, 'a> {
    /// Starts the writers `specs` (their claims must exist), waits until every one is ready
    /// and has written, and records that on `timeline`.
    pub async fn start(
        workload: &'w Workload<'a>,
        timeline: &Timeline,
        specs: Vec<WriterSpec>,
    ) -> TestResult<Self> {
        for spec in &specs {
            let mut pod = PodBuilder::new(&spec.pod, &script(&Self::file(&spec.pod)))
                .claim(&spec.claim, MOUNT);
            if let Some(node) = &spec.node {
                pod = pod.node(node);
            }
            workload.create_pod(&pod.build()).await?;
        }
        for spec in &specs {
            workload.wait_ready(&spec.pod).await?;
        }
        let writers = Writers {
            workload,
            timeline: timeline.clone(),
            specs,
        };
        let started = SystemTime::now();
        writers.wait_written_since(started).await?;
        for spec in &writers.specs {
            timeline.record(
                &format!("writer {}", spec.pod),
                format!(
                    "writing to claim {} every {} ms",
                    spec.claim,
                    INTERVAL.as_millis()
                ),
            );
        }
        Ok(writers)
    }

    fn file(pod: &str) -> String {
        format!("{MOUNT}/{pod}.log")
    }

    /// The writers' pod names.
    pub fn pods(&self) -> Vec<&str> {
        self.specs.iter().map(|s| s.pod.as_str()).collect()
    }

    /// Reads every writer's file (through its own pod).
    pub async fn read(&self) -> TestResult<Vec<WriterFile>> {
        let mut files = Vec::new();
        for spec in &self.specs {
            files.push(self.read_one(&spec.pod).await?);
        }
        Ok(files)
    }

    async fn read_one(&self, pod: &str) -> TestResult<WriterFile> {
        let text = self
            .workload
            .exec(
                pod,
                &format!(
                    "cat {}; echo '--'; cat /tmp/write-errors 2>/dev/null || true",
                    Self::file(pod)
                ),
            )
            .await?;
        let read_at = SystemTime::now();
        let (log, errors) = text.split_once("--\n").unwrap_or((&text, ""));
        let mut lines = Vec::new();
        for (number, line) in log.lines().enumerate() {
            let nanos: u64 = line.trim().parse().map_err(|_| {
                TestError::failed(format!(
                    "line {} of {} in pod {pod} is not a timestamp: {line:?} (the file was damaged)",
                    number + 1,
                    Self::file(pod)
                ))
            })?;
            lines.push(UNIX_EPOCH + Duration::from_nanos(nanos));
        }
        Ok(WriterFile {
            pod: pod.into(),
            lines,
            read_at,
            write_errors: errors.lines().map(str::to_string).collect(),
        })
    }

    /// Waits until every writer has written a line at or after `since` (writes go on).
    pub async fn wait_written_since(&self, since: SystemTime) -> TestResult {
        for spec in &self.specs {
            let pod = spec.pod.as_str();
            wait::wait_until(
                format!("writer {pod} to write after {}", wall(since)),
                self.workload.timeouts().pod_ready,
                || async move {
                    match self.read_one(pod).await {
                        Ok(file) if file.lines_since(since) > 0 => Ok(Some(())),
                        Ok(file) => Err(format!(
                            "{} lines, the last at {}",
                            file.lines.len(),
                            file.lines.last().map_or("-".into(), |t| wall(*t))
                        )),
                        Err(e) => Err(e.to_string()),
                    }
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Reads every file, checks that each writer kept every line of `before` (an earlier
    /// read) and has written since `since` without a failed write, and records each writer's
    /// stall since `since` on the timeline; the longest stall of all.
    pub async fn check_since(
        &self,
        since: SystemTime,
        before: Option<&[WriterFile]>,
    ) -> TestResult<Stall> {
        let files = self.read().await?;
        let mut longest: Option<Stall> = None;
        for file in &files {
            let source = format!("writer {}", file.pod);
            if let Some(before) = before.and_then(|b| b.iter().find(|f| f.pod == file.pod))
                && !file.lines.starts_with(&before.lines)
            {
                return Err(TestError::failed(format!(
                    "writer {}'s file lost data: it held {} lines before, now {} and they differ from the earlier ones",
                    file.pod,
                    before.lines.len(),
                    file.lines.len()
                )));
            }
            if !file.write_errors.is_empty() {
                self.timeline.record(
                    &source,
                    format!("{} failed writes", file.write_errors.len()),
                );
                return Err(TestError::failed(format!(
                    "writer {} failed to write {} times, first: {}",
                    file.pod,
                    file.write_errors.len(),
                    file.write_errors[0]
                )));
            }
            let Some(stall) = file.stall_since(since) else {
                return Err(TestError::failed(format!(
                    "writer {} wrote nothing after {} ({} lines in all, the last at {})",
                    file.pod,
                    wall(since),
                    file.lines.len(),
                    file.lines.last().map_or("-".into(), |t| wall(*t))
                )));
            };
            self.timeline.record_wall(
                stall.from,
                &source,
                format!(
                    "longest stall {:.3} s begins ({} lines since {}, file read at {})",
                    stall.length.as_secs_f64(),
                    file.lines_since(since),
                    wall(since),
                    wall(file.read_at)
                ),
            );
            if longest.is_none_or(|l| stall.length > l.length) {
                longest = Some(stall);
            }
        }
        longest.ok_or_else(|| TestError::failed("no writers"))
    }

    /// Deletes the writer pods and waits until they are gone.
    pub async fn stop(self) -> TestResult {
        let pods = self.pods();
        self.workload.delete_pods(&pods).await?;
        self.timeline
            .record("writers", format!("stopped {}", pods.join(", ")));
        Ok(())
    }
}

/// `t` as seconds since the epoch with milliseconds, for messages.
pub fn wall(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!("{}.{:03}", since.as_secs(), since.subsec_millis())
}

/// The wall-clock time now and the matching instant, to mark the start of a disruption.
pub fn now() -> (SystemTime, Instant) {
    (SystemTime::now(), Instant::now())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn at(ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn file(lines: &[u64], read_at: u64) -> WriterFile {
        WriterFile {
            pod: "w".into(),
            lines: lines.iter().map(|ms| at(*ms)).collect(),
            read_at: at(read_at),
            write_errors: Vec::new(),
        }
    }

    #[test]
    fn the_stall_is_the_longest_gap_after_the_mark() {
        let f = file(&[0, 2000, 2100, 2200, 3500, 3600], 3700);
        // The 2 s gap began before the mark.
        let stall = f.stall_since(at(1000)).unwrap();
        assert_eq!(stall.length, Duration::from_millis(1300));
        assert_eq!(stall.from, at(2200));
        assert_eq!(f.lines_since(at(1000)), 5);
    }

    #[test]
    fn a_writer_that_stopped_stalls_until_the_file_is_read() {
        let f = file(&[1000, 1100], 9100);
        let stall = f.stall_since(at(0)).unwrap();
        assert_eq!(stall.length, Duration::from_millis(8000));
        assert_eq!(stall.from, at(1100));
        assert!(f.stall_since(at(2000)).is_none());
    }

    #[test]
    fn the_writer_script_writes_its_file_and_records_failures_elsewhere() {
        let text = script("/data/w-1.log");
        assert!(text.contains("date +%s%N >> /data/w-1.log"), "{text}");
        assert!(text.contains("/tmp/write-errors"), "{text}");
        assert!(text.contains("sleep 0.1"), "{text}");
    }
}
