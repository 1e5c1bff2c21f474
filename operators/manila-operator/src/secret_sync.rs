//! The driver's Secret: the flat `os-*` keys the Manila driver reads from a CSI request's
//! secrets, translated from clouds.yaml (+ the CA bundle), as upstream's older operators
//! wrote `csi-manila-secrets`. The hash of its data
//! ([`operator_kit::templates::data_hash`]) goes into the driver pods' template, so rotated
//! credentials or a new CA restart them.
//!
//! Two layouts of the CA: the current release puts the bundle inline (`os-certAuthority`);
//! the previous one mounts the CA ConfigMap into the driver's pods and names the file
//! (`os-certAuthorityPath`, [`crate::release::ca_path`]). The hash then covers the path only, so
//! under the previous release a changed CA does not restart the driver (one reason the CA
//! moved inline).

use std::collections::BTreeMap;

use crate::cloud::CloudInputs;
use crate::release::{self, Release};

/// The flat `os-*` keys the driver reads, for `inputs`, in `release`'s layout.
pub fn driver_secret_data(inputs: &CloudInputs, release: Release) -> BTreeMap<String, String> {
    let mut data = inputs.credentials.to_flat_secret();
    if let Some(path) = release::ca_path(release)
        && data.remove("os-certAuthority").is_some()
    {
        data.insert("os-certAuthorityPath".into(), path);
    }
    data
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use openstack_client::Credentials;
    use operator_kit::templates::data_hash;

    use super::*;
    use crate::cloud::inputs_from;
    use crate::config::OperatorConfig;

    const CLOUDS: &str = "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000/v3\n      username: demo\n      password: hunter2\n      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    interface: internal\n";
    const CA: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    fn inputs(ca: Option<&str>) -> CloudInputs {
        CloudInputs {
            credentials: inputs_from(
                CLOUDS,
                "openstack",
                "s",
                ca.map(str::to_string),
                &OperatorConfig::new("ns"),
            )
            .unwrap(),
            secret_source: "ns/c".into(),
            ca_source: "ns/m key k".into(),
        }
    }

    #[test]
    fn the_driver_reads_back_the_same_credentials() {
        let inputs = inputs(Some(CA));
        let data = driver_secret_data(&inputs, Release::Current);
        assert!(!data.contains_key("os-certAuthorityPath"));
        assert_eq!(
            data.get("os-certAuthority").map(String::as_str),
            Some(CA.trim())
        );
        assert_eq!(
            data.get("os-endpointType").map(String::as_str),
            Some("internal")
        );
        let map: HashMap<String, String> = data.into_iter().collect();
        let read_back = Credentials::try_from(&map).unwrap();
        assert_eq!(read_back, inputs.credentials);
    }

    #[test]
    fn the_hash_changes_with_the_ca() {
        let data = driver_secret_data(&inputs(None), Release::Current);
        let with_ca = driver_secret_data(&inputs(Some(CA)), Release::Current);
        assert_eq!(data_hash(&data), data_hash(&data.clone()));
        assert_ne!(data_hash(&data), data_hash(&with_ca));
    }

    #[test]
    fn the_previous_release_names_the_mounted_ca_file_instead() {
        let with_ca = inputs(Some(CA));
        let previous = driver_secret_data(&with_ca, Release::Previous);
        let current = driver_secret_data(&with_ca, Release::Current);
        assert!(!previous.contains_key("os-certAuthority"));
        assert_eq!(
            previous.get("os-certAuthorityPath").map(String::as_str),
            Some("/usr/share/pki/ca-trust-source/cloud-provider-ca-bundle.pem")
        );
        // Everything else is the same.
        let strip = |mut data: BTreeMap<String, String>| {
            data.remove("os-certAuthority");
            data.remove("os-certAuthorityPath");
            data
        };
        assert_eq!(strip(previous.clone()), strip(current.clone()));
        // The driver reads the path layout too (and loads the file when it connects).
        let map: HashMap<String, String> = previous.clone().into_iter().collect();
        let read_back = Credentials::try_from(&map).unwrap();
        assert_eq!(
            read_back.tls.ca_file.as_deref(),
            Some(std::path::Path::new(
                "/usr/share/pki/ca-trust-source/cloud-provider-ca-bundle.pem"
            ))
        );
        assert_eq!(read_back.tls.ca_pem, None);
        // A different layout, a different hash: the upgrade restarts the driver's pods.
        assert_ne!(data_hash(&previous), data_hash(&current));
        // Without a CA both layouts are the same.
        assert_eq!(
            driver_secret_data(&inputs(None), Release::Previous),
            driver_secret_data(&inputs(None), Release::Current)
        );
    }
}
