//! What a client needs to reach the fake: a `clouds.yaml`, the flat `os-*` secret map
//! the Manila CSI driver reads, and the cloud config INI of the Cinder CSI driver.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::auth_url;
use crate::config::Account;

/// Which credential the flat secret carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretKind {
    /// User name, password, project name, domains.
    #[default]
    Password,
    /// Application credential id and secret.
    ApplicationCredential,
    /// The trustee's id and password and the trust (`os-trustID`, `os-trusteeID`,
    /// `os-trusteePassword`, `os-domainName`); the password's keys when the seed has no trustee.
    Trustee,
}

/// A `clouds.yaml` document with one cloud named `cloud`, using the password.
/// With `ca_file`, the cloud's `cacert` names it.
pub(crate) fn clouds_yaml(
    account: &Account,
    region: &str,
    base_url: &str,
    cloud: &str,
    ca_file: Option<&std::path::Path>,
) -> String {
    let auth = serde_json::json!({
        "auth_url": auth_url(base_url),
        "username": account.user_name,
        "password": account.password.expose(),
        "project_name": account.project_name,
        "user_domain_name": account.domain_name,
        "project_domain_name": account.domain_name,
    });
    let mut doc = serde_json::json!({
        "clouds": {
            cloud: {
                "auth": auth,
                "auth_type": "password",
                "region_name": region,
                "interface": "public",
                "identity_api_version": 3,
            }
        }
    });
    if let Some(ca_file) = ca_file {
        doc["clouds"][cloud]["cacert"] = serde_json::json!(ca_file.display().to_string());
    }
    // Serialising a JSON value to YAML cannot fail.
    serde_yaml::to_string(&doc).unwrap_or_default()
}

/// The Cinder CSI driver's cloud config (`cloud.conf`, INI) for the password: `[Global]`
/// credentials (with `ca-file` when given), `[Metadata] search-order = metadataService` (the
/// fake serves no config drive) and the `[BlockStorage]` lines of `block_storage` verbatim.
pub(crate) fn cinder_cloud_conf(
    account: &Account,
    region: &str,
    base_url: &str,
    ca_file: Option<&std::path::Path>,
    block_storage: &[(&str, String)],
) -> String {
    // Values are quoted (the driver unquotes them), so a `;` or `#` in a password is not
    // read as a comment.
    let mut conf = format!(
        "[Global]\nauth-url = \"{}\"\nusername = \"{}\"\npassword = \"{}\"\n\
         tenant-name = \"{}\"\ndomain-name = \"{}\"\nregion = \"{}\"\n",
        auth_url(base_url),
        account.user_name,
        account.password.expose(),
        account.project_name,
        account.domain_name,
        region,
    );
    if let Some(ca_file) = ca_file {
        conf.push_str(&format!("ca-file = \"{}\"\n", ca_file.display()));
    }
    conf.push_str("\n[BlockStorage]\n");
    for (key, value) in block_storage {
        conf.push_str(&format!("{key} = {value}\n"));
    }
    conf.push_str("\n[Metadata]\nsearch-order = metadataService\n");
    conf
}

/// The flat `os-*` keys of the CSI driver's secret.
pub(crate) fn secret(
    account: &Account,
    region: &str,
    base_url: &str,
    kind: SecretKind,
) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    map.insert("os-authURL".into(), auth_url(base_url));
    map.insert("os-region".into(), region.to_owned());
    match (kind, &account.application_credential, &account.trustee) {
        (SecretKind::ApplicationCredential, Some(cred), _) => {
            map.insert("os-applicationCredentialID".into(), cred.id.clone());
            map.insert(
                "os-applicationCredentialSecret".into(),
                cred.secret.expose().to_owned(),
            );
        }
        (SecretKind::Trustee, _, Some(trustee)) => {
            map.insert("os-trustID".into(), trustee.trust_id.clone());
            map.insert("os-trusteeID".into(), trustee.user_id.clone());
            map.insert(
                "os-trusteePassword".into(),
                trustee.password.expose().to_owned(),
            );
            map.insert("os-domainName".into(), account.domain_name.clone());
        }
        _ => {
            map.insert("os-userName".into(), account.user_name.clone());
            map.insert("os-password".into(), account.password.expose().to_owned());
            map.insert("os-projectName".into(), account.project_name.clone());
            map.insert("os-domainName".into(), account.domain_name.clone());
            map.insert("os-projectDomainName".into(), account.domain_name.clone());
        }
    }
    map
}
