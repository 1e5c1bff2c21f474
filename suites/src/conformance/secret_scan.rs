//! Proof that no secret of a run reached a log, an Event or the run's output: the cloud's
//! password, application-credential secret, token and trustee password as the driver's
//! Secret holds them, and every Keystone token the fake cloud issued, looked for in every
//! `*.log` below the cluster's run directory (control plane, node agents, every container
//! attempt), every file of the run's output so far (evidence, timelines), every Event of the
//! cluster and every test outcome's message. A finding names what leaked and where (file
//! and line, or Event), never the value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::bytes::{Regex, RegexBuilder};

pub use crate::registry::EventLog;

/// The keys of the driver's Secret (`os-*`) whose values are secrets.
pub const SECRET_KEYS: &[&str] = &[
    "os-password",
    "os-applicationCredentialSecret",
    "os-token",
    "os-trusteePassword",
];

/// Values shorter than this are not looked for (they would match by chance).
const SHORTEST: usize = 6;

/// A value that must not appear anywhere, with what it is.
#[derive(Clone)]
pub struct SecretValue {
    /// What it is (`os-password of the driver's Secret`, `a Keystone token`).
    pub what: String,
    value: String,
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretValue({}, {} bytes)", self.what, self.value.len())
    }
}

impl SecretValue {
    /// `value`, described as `what`.
    pub fn new(what: impl Into<String>, value: impl Into<String>) -> Self {
        SecretValue {
            what: what.into(),
            value: value.into(),
        }
    }
}

/// The secret values of the driver's Secret (see [`SECRET_KEYS`]) and `tokens`.
pub fn secret_values(secret: &BTreeMap<String, String>, tokens: Vec<String>) -> Vec<SecretValue> {
    let mut values: Vec<SecretValue> = SECRET_KEYS
        .iter()
        .filter_map(|key| {
            secret
                .get(*key)
                .map(|value| SecretValue::new(format!("{key} of the driver's Secret"), value))
        })
        .collect();
    values.extend(
        tokens
            .into_iter()
            .map(|token| SecretValue::new("a Keystone token of the run", token)),
    );
    values
}

/// Where a secret was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What leaked.
    pub what: String,
    /// Where: `<file>:<line>`, `Event <namespace>/<name>`, `the outcome of <test>`.
    pub place: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} in {}", self.what, self.place)
    }
}

/// Looks for [`SecretValue`]s in text and files.
pub struct Scanner {
    values: Vec<SecretValue>,
    pattern: Option<Regex>,
}

impl std::fmt::Debug for Scanner {
    // Not derived: the pattern spells every value out.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scanner")
            .field("values", &self.values)
            .finish_non_exhaustive()
    }
}

impl Scanner {
    /// A scanner for `values` (those shorter than a few bytes are left out).
    pub fn new(values: Vec<SecretValue>) -> Self {
        let values: Vec<SecretValue> = values
            .into_iter()
            .filter(|v| v.value.len() >= SHORTEST)
            .collect();
        let alternatives: Vec<String> = values.iter().map(|v| regex::escape(&v.value)).collect();
        // Many literals compile to one automaton; a literal set too big for the default size
        // limit gets a larger one rather than no scan.
        let pattern = (!alternatives.is_empty())
            .then(|| {
                RegexBuilder::new(&alternatives.join("|"))
                    .size_limit(1 << 28)
                    .build()
                    .ok()
            })
            .flatten();
        Scanner { values, pattern }
    }

    /// How many values it looks for.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether it looks for nothing.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The findings in `bytes`, from `source` (a file's path): one per value and line.
    pub fn scan_bytes(&self, source: &str, bytes: &[u8]) -> Vec<Finding> {
        let Some(pattern) = &self.pattern else {
            return Vec::new();
        };
        let mut findings: Vec<Finding> = Vec::new();
        for found in pattern.find_iter(bytes) {
            let Some(value) = self
                .values
                .iter()
                .find(|v| v.value.as_bytes() == found.as_bytes())
            else {
                continue;
            };
            let line = bytes[..found.start()]
                .iter()
                .filter(|b| **b == b'\n')
                .count()
                + 1;
            let finding = Finding {
                what: value.what.clone(),
                place: format!("{source}:{line}"),
            };
            if !findings.contains(&finding) {
                findings.push(finding);
            }
        }
        findings
    }

    /// The findings in every file below `root` that `wanted` accepts (by path), and how many
    /// files were read. Files that cannot be read (gone meanwhile, a socket) are skipped.
    pub fn scan_tree(&self, root: &Path, wanted: impl Fn(&Path) -> bool) -> (Vec<Finding>, usize) {
        let mut findings = Vec::new();
        let mut read = 0;
        for path in files_below(root) {
            if !wanted(&path) {
                continue;
            }
            if let Ok(bytes) = std::fs::read(&path) {
                read += 1;
                findings.extend(self.scan_bytes(&path.display().to_string(), &bytes));
            }
        }
        (findings, read)
    }
}

/// The findings in the Events `log` has seen so far, and how many distinct Event texts
/// there are.
pub fn scan_events(log: &EventLog, scanner: &Scanner) -> (Vec<Finding>, usize) {
    let seen = log.seen();
    let mut findings = Vec::new();
    for (place, text) in &seen {
        for finding in scanner.scan_bytes(place, text.as_bytes()) {
            let finding = Finding {
                place: place.clone(),
                ..finding
            };
            if !findings.contains(&finding) {
                findings.push(finding);
            }
        }
    }
    (findings, seen.len())
}

/// `findings` for a report: the places of each leaked value in each file or Event (lines
/// merged), at most `limit` of them and how many more there are.
pub fn summarize(findings: &[Finding], limit: usize) -> String {
    // "<source>:<line>" → source and lines, in order of appearance.
    let mut merged: Vec<(String, String, Vec<String>)> = Vec::new();
    for finding in findings {
        let (source, line) = match finding.place.rsplit_once(':') {
            Some((source, line)) if line.chars().all(|c| c.is_ascii_digit()) => {
                (source.to_string(), Some(line.to_string()))
            }
            _ => (finding.place.clone(), None),
        };
        match merged
            .iter_mut()
            .find(|(what, s, _)| *what == finding.what && *s == source)
        {
            Some((_, _, lines)) => lines.extend(line),
            None => merged.push((finding.what.clone(), source, line.into_iter().collect())),
        }
    }
    let mut parts: Vec<String> = merged
        .iter()
        .take(limit)
        .map(|(what, source, lines)| match lines.as_slice() {
            [] => format!("{what} in {source}"),
            [line] => format!("{what} in {source}:{line}"),
            [first, rest @ ..] => {
                format!("{what} in {source}:{first} (and {} more lines)", rest.len())
            }
        })
        .collect();
    if merged.len() > limit {
        parts.push(format!("and {} more places", merged.len() - limit));
    }
    parts.join("; ")
}

/// Every regular file below `root` (symbolic links not followed; unreadable directories
/// skipped).
fn files_below(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    files
}

/// Whether `path` is a log: a file named `*.log`.
pub fn is_log(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "log")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scanner() -> Scanner {
        let secret = BTreeMap::from([
            ("os-password".to_string(), "hunter2-password".to_string()),
            ("os-userName".to_string(), "demo".to_string()),
            ("os-token".to_string(), "abc".to_string()),
        ]);
        Scanner::new(secret_values(&secret, vec!["gAAAAtoken0123".into()]))
    }

    #[test]
    fn secret_keys_and_tokens_are_looked_for_but_not_names_or_short_values() {
        let scanner = scanner();
        assert_eq!(scanner.len(), 2, "{scanner:?}");
        assert!(!format!("{scanner:?}").contains("hunter2"));
        let text = b"user demo\nabc\nAuthorization: gAAAAtoken0123\npassword=hunter2-password x hunter2-password\n";
        assert_eq!(
            scanner.scan_bytes("node-1.log", text),
            [
                Finding {
                    what: "a Keystone token of the run".into(),
                    place: "node-1.log:3".into()
                },
                Finding {
                    what: "os-password of the driver's Secret".into(),
                    place: "node-1.log:4".into()
                },
            ]
        );
        assert!(scanner.scan_bytes("clean", b"nothing here").is_empty());
    }

    #[test]
    fn a_tree_is_scanned_where_wanted_and_findings_never_show_the_value() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("a/b/output.log"), "x\ny hunter2-password\n").unwrap();
        std::fs::write(dir.path().join("a/etcd.db"), "hunter2-password").unwrap();
        let (findings, read) = scanner().scan_tree(dir.path(), is_log);
        assert_eq!(read, 1);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let shown = findings[0].to_string();
        assert!(shown.ends_with("a/b/output.log:2"), "{shown}");
        assert!(
            shown.starts_with("os-password of the driver's Secret in "),
            "{shown}"
        );
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn a_summary_merges_lines_of_a_file_and_stops_at_the_limit() {
        let finding = |what: &str, place: &str| Finding {
            what: what.into(),
            place: place.into(),
        };
        let findings = [
            finding("a", "x.log:3"),
            finding("a", "x.log:4"),
            finding("a", "x.log:9"),
            finding("b", "x.log:4"),
            finding("a", "Event ns/e1"),
            finding("a", "y.log:1"),
        ];
        assert_eq!(
            summarize(&findings, 3),
            "a in x.log:3 (and 2 more lines); b in x.log:4; a in Event ns/e1; and 1 more places"
        );
        assert_eq!(summarize(&findings[..1], 3), "a in x.log:3");
    }

    #[test]
    fn nothing_to_look_for_finds_nothing() {
        let scanner = Scanner::new(Vec::new());
        assert!(scanner.is_empty());
        assert!(scanner.scan_bytes("x", b"anything").is_empty());
    }
}
