//! What the `conformance run` tests share: running the real binary, reading its JUnit XML.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn conformance() -> PathBuf {
    workspace_binaries::binary("suites", "conformance").expect("the conformance binary")
}

pub fn workspace(path: &str) -> PathBuf {
    workspace_binaries::root().join(path)
}

pub fn run(args: &[&str]) -> Output {
    Command::new(conformance())
        .arg("run")
        .arg("--plain")
        .args(args)
        .output()
        .expect("conformance runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `(name, outcome)` of every test case of a JUnit report, outcome `passed`, `failed` or
/// `skipped: <reason>`.
pub fn junit_cases(xml: &str) -> Vec<(String, String)> {
    let mut cases = Vec::new();
    for part in xml.split("<testcase ").skip(1) {
        let name = attribute(part, "name");
        let classname = attribute(part, "classname");
        let head = part.split("</testcase>").next().unwrap_or(part);
        let outcome = if head.contains("<failure") {
            "failed".to_string()
        } else if let Some(skip) = head.split("<skipped").nth(1) {
            format!("skipped: {}", attribute(skip, "message"))
        } else {
            "passed".to_string()
        };
        cases.push((format!("[{classname}] {name}"), outcome));
    }
    cases
}

pub fn attribute(text: &str, name: &str) -> String {
    text.split(&format!("{name}=\""))
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_default()
        .replace("&apos;", "'")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

pub fn scratch(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap()
}
