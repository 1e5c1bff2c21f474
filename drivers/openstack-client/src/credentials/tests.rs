//! Tests of the credentials parsing: flat keys, clouds.yaml, trusts, tokens, certificates.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn empty_secrets_are_invalid() {
    let error = Credentials::try_from(&HashMap::new()).unwrap_err();
    assert!(
        error.to_string().contains("secrets are required"),
        "{error}"
    );
}

#[test]
fn flat_keys_with_password() {
    let credentials = Credentials::try_from(&map(&[
        ("os-authURL", "http://k/v3"),
        ("os-userName", "demo"),
        ("os-password", "hunter2"),
        ("os-projectName", "demo"),
        ("os-domainName", "Default"),
        ("os-region", "RegionOne"),
    ]))
    .unwrap();
    assert_eq!(credentials.interface, "public");
    assert_eq!(
        credentials.scope.project_domain_name.as_deref(),
        Some("Default")
    );
    let printed = format!("{credentials:?}");
    assert!(!printed.contains("hunter2"), "{printed}");
}

#[test]
fn missing_auth_url_is_named() {
    let error = Credentials::try_from(&map(&[("os-password", "x")])).unwrap_err();
    assert!(error.to_string().contains("os-authURL"), "{error}");
}

#[test]
fn clouds_yaml_mode() {
    let dir = tempfile::Builder::new()
        .prefix("credentials-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("clouds.yaml");
    std::fs::write(
        &path,
        "clouds:\n  fake:\n    auth:\n      auth_url: http://k/v3\n      username: u\n      password: p\n      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    interface: internal\n",
    )
    .unwrap();
    let credentials = Credentials::try_from(&map(&[
        ("os-useClouds", "true"),
        ("os-cloudsFile", path.to_str().unwrap()),
        ("os-cloud", "fake"),
    ]))
    .unwrap();
    assert_eq!(credentials.auth_url, "http://k/v3");
    assert_eq!(credentials.interface, "internal");
    assert_eq!(credentials.region.as_deref(), Some("RegionOne"));
    let missing = Credentials::try_from(&map(&[
        ("os-useClouds", "true"),
        ("os-cloudsFile", path.to_str().unwrap()),
        ("os-cloud", "other"),
    ]))
    .unwrap_err();
    assert!(missing.to_string().contains("\"other\""), "{missing}");
}

fn no_env() -> Environment {
    Environment {
        system_dir: PathBuf::from("/nonexistent/etc/openstack"),
        ..Environment::default()
    }
}

const BASE: [(&str, &str); 2] = [("os-authURL", "http://k/v3"), ("os-region", "RegionOne")];

fn parse(extra: &[(&str, &str)]) -> Result<Credentials> {
    let mut secrets = map(&BASE);
    secrets.extend(map(extra));
    Credentials::from_secrets(&secrets, &no_env())
}

#[test]
fn trustee_keys_authenticate_the_trustee_by_id_scoped_to_the_trust() {
    let credentials = parse(&[
        ("os-trustID", "trust-1"),
        ("os-trusteeID", "trustee-1"),
        ("os-trusteePassword", "s3cret-trustee"),
        ("os-domainName", "Default"),
    ])
    .unwrap();
    assert_eq!(credentials.scope.trust_id.as_deref(), Some("trust-1"));
    match &credentials.method {
        AuthMethod::Password {
            user_id,
            user_domain_name,
            password,
            ..
        } => {
            assert_eq!(user_id.as_deref(), Some("trustee-1"));
            assert_eq!(user_domain_name.as_deref(), Some("Default"));
            assert_eq!(password.expose(), "s3cret-trustee");
        }
        other => panic!("not a password method: {other:?}"),
    }
    assert!(!format!("{credentials:?}").contains("s3cret-trustee"));
    let flat: HashMap<String, String> = credentials.to_flat_secret().into_iter().collect();
    assert_eq!(
        Credentials::from_secrets(&flat, &no_env()).unwrap(),
        credentials
    );
}

#[rstest::rstest]
#[case::password_without_id(
    &[("os-trustID", "t"), ("os-trusteePassword", "p")],
    "os-trusteeID is required with os-trusteePassword"
)]
#[case::id_without_password(
    &[("os-trustID", "t"), ("os-trusteeID", "u")],
    "os-trusteePassword is required with os-trusteeID"
)]
#[case::trustee_without_trust(
    &[("os-trusteeID", "u"), ("os-trusteePassword", "p")],
    "os-trustID is required with os-trusteeID"
)]
#[case::cert_without_key(
    &[("os-token", "t"), ("os-clientCertPath", "/c.pem")],
    "os-clientKeyPath is required with os-clientCertPath"
)]
#[case::key_without_cert(
    &[("os-token", "t"), ("os-clientKeyPath", "/k.pem")],
    "os-clientCertPath is required with os-clientKeyPath"
)]
#[case::nothing_to_authenticate_with(&[("os-projectName", "demo")], "os-token")]
fn a_missing_partner_key_is_named(#[case] extra: &[(&str, &str)], #[case] expected: &str) {
    let error = parse(extra).unwrap_err();
    assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
    assert!(error.to_string().contains(expected), "{error}");
}

#[test]
fn os_token_is_a_token_method_and_never_prints() {
    let credentials = parse(&[("os-token", "gAAAAsecret-token"), ("os-projectID", "p1")]).unwrap();
    assert_eq!(
        credentials.method,
        AuthMethod::Token {
            token: Secret::new("gAAAAsecret-token")
        }
    );
    assert_eq!(credentials.scope.project_id.as_deref(), Some("p1"));
    assert!(!format!("{credentials:?}").contains("secret-token"));
    // A password, when there is one, wins (as gophercloud does).
    let credentials = parse(&[
        ("os-token", "t"),
        ("os-userName", "demo"),
        ("os-password", "p"),
    ])
    .unwrap();
    assert!(matches!(credentials.method, AuthMethod::Password { .. }));
}

#[test]
fn client_certificate_paths_go_to_the_tls_options() {
    let credentials = parse(&[
        ("os-token", "t"),
        ("os-clientCertPath", "/etc/c.pem"),
        ("os-clientKeyPath", "/etc/k.pem"),
    ])
    .unwrap();
    assert_eq!(
        credentials.tls.client_cert,
        Some(PathBuf::from("/etc/c.pem"))
    );
    assert_eq!(
        credentials.tls.client_key,
        Some(PathBuf::from("/etc/k.pem"))
    );
    let flat = credentials.to_flat_secret();
    assert_eq!(flat["os-clientCertPath"], "/etc/c.pem");
    assert_eq!(flat["os-clientKeyPath"], "/etc/k.pem");
}

#[test]
fn a_domain_without_project_is_kept_for_a_domain_scope() {
    let credentials = parse(&[
        ("os-userName", "demo"),
        ("os-password", "p"),
        ("os-domainID", "default"),
    ])
    .unwrap();
    assert_eq!(credentials.scope.domain_id.as_deref(), Some("default"));
    assert_eq!(credentials.scope.project_id, None);
}

const CLOUDS: &str = "clouds:\n  fake:\n    auth:\n      auth_url: http://file/v3\n      username: file-user\n      password: file-password\n      project_name: file-project\n      user_domain_name: Default\n    region_name: FileRegion\n";

#[test]
fn clouds_yaml_is_found_through_the_environment_and_os_cloud_falls_back_to_os_cloud() {
    let dir = tempfile::Builder::new()
        .prefix("credentials-env-")
        .tempdir()
        .unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".config/openstack")).unwrap();
    std::fs::write(home.join(".config/openstack/clouds.yaml"), CLOUDS).unwrap();
    let env = Environment {
        home: Some(home),
        cloud: Some("fake".into()),
        current_dir: Some(dir.path().join("empty")),
        ..no_env()
    };
    let credentials = Credentials::from_secrets(&map(&[("os-useClouds", "true")]), &env).unwrap();
    assert_eq!(credentials.auth_url, "http://file/v3");
    // Without OS_CLOUD nor os-cloud, the error says so.
    let env = Environment { cloud: None, ..env };
    let error = Credentials::from_secrets(&map(&[("os-useClouds", "true")]), &env)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("os-cloud") && error.contains("OS_CLOUD"),
        "{error}"
    );
    // Nowhere to be found: the error lists where it looked.
    let error = Credentials::from_secrets(
        &map(&[("os-useClouds", "true"), ("os-cloud", "fake")]),
        &no_env(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("/nonexistent/etc/openstack/clouds.yaml"),
        "{error}"
    );
}

#[test]
fn flat_secret_keys_override_the_clouds_yaml_settings() {
    let dir = tempfile::Builder::new()
        .prefix("credentials-override-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("clouds.yaml");
    std::fs::write(&path, CLOUDS).unwrap();
    let credentials = Credentials::from_secrets(
        &map(&[
            ("os-useClouds", "true"),
            ("os-cloudsFile", path.to_str().unwrap()),
            ("os-cloud", "fake"),
            ("os-authURL", "http://secret/v3"),
            ("os-password", "secret-password"),
            ("os-projectName", "secret-project"),
            ("os-region", "SecretRegion"),
            ("os-endpointType", "internal"),
        ]),
        &no_env(),
    )
    .unwrap();
    assert_eq!(credentials.auth_url, "http://secret/v3");
    assert_eq!(credentials.region.as_deref(), Some("SecretRegion"));
    assert_eq!(credentials.interface, "internal");
    assert_eq!(
        credentials.scope.project_name.as_deref(),
        Some("secret-project")
    );
    match &credentials.method {
        AuthMethod::Password {
            user_name,
            password,
            ..
        } => {
            // What the secret does not set comes from the file.
            assert_eq!(user_name.as_deref(), Some("file-user"));
            assert_eq!(password.expose(), "secret-password");
        }
        other => panic!("not a password method: {other:?}"),
    }
    // Trustee keys in the secret turn the file's user into the trustee.
    let credentials = Credentials::from_secrets(
        &map(&[
            ("os-useClouds", "true"),
            ("os-cloudsFile", path.to_str().unwrap()),
            ("os-cloud", "fake"),
            ("os-trustID", "t1"),
            ("os-trusteeID", "trustee"),
            ("os-trusteePassword", "tp"),
        ]),
        &no_env(),
    )
    .unwrap();
    assert_eq!(credentials.scope.trust_id.as_deref(), Some("t1"));
    assert!(
        matches!(&credentials.method, AuthMethod::Password { user_id: Some(id), .. } if id == "trustee")
    );
    // A key missing from both names the file.
    std::fs::write(&path, "clouds:\n  fake:\n    auth:\n      username: u\n").unwrap();
    let error = Credentials::from_secrets(
        &map(&[
            ("os-useClouds", "true"),
            ("os-cloudsFile", path.to_str().unwrap()),
            ("os-cloud", "fake"),
        ]),
        &no_env(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("os-authURL") && error.contains(path.to_str().unwrap()),
        "{error}"
    );
}
