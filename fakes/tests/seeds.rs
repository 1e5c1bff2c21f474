//! The seed examples in fixtures/fake-cloud/ parse, and default.yaml is the default.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use fakes::{CloudConfig, FakeCloud, MaxMicroversion};

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
    let mut config = CloudConfig::from_yaml_file(&fixtures().join("default.yaml")).unwrap();
    // default.yaml (fixtures/, outside this crate) still pins Manila's and Cinder's maxima
    // from before the seed had a release; the release is what the default leaves them to.
    for explicit in [
        &mut config.manila.max_microversion,
        &mut config.cinder.max_microversion,
    ] {
        *explicit = MaxMicroversion::from_release();
    }
    assert_eq!(config, CloudConfig::default());
}
