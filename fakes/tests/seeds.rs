//! The seed examples in fixtures/fake-cloud/ parse, and default.yaml is the default.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use fakes::{CloudConfig, FakeCloud};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/fake-cloud")
}

#[tokio::test]
async fn every_seed_example_parses_and_starts() {
    let mut seen = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let config = CloudConfig::from_yaml_file(&path)
                .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
            FakeCloud::start(config).await.unwrap();
            seen += 1;
        }
    }
    assert!(seen >= 3, "only {seen} seed examples");
}

#[test]
fn default_yaml_is_the_default() {
    let config = CloudConfig::from_yaml_file(&fixtures().join("default.yaml")).unwrap();
    assert_eq!(config, CloudConfig::default());
}
