#![allow(clippy::unwrap_used, clippy::expect_used)]
use rstest::rstest;

use super::*;

const CA: &str = include_str!("../../tests/data/test-ca.pem");

fn sources() -> Sources {
    Sources::from(&OperatorConfig::new("openshift-cluster-csi-drivers"))
}

fn clouds_yaml(auth: &str) -> String {
    format!(
        "clouds:\n  openstack:\n    auth:\n      auth_url: https://keystone.example:5000/v3\n{auth}    region_name: RegionOne\n"
    )
}

fn password_cloud() -> String {
    clouds_yaml(
        "      username: csi\n      password: \"p;w#d \\\"q\\\" \\\\ end\"\n      project_name: demo\n      user_domain_name: Default\n      project_domain_name: Default\n",
    )
}

fn inputs<'a>(clouds: &'a str, user: Option<&'a str>, ca: Option<&'a str>) -> Inputs<'a> {
    Inputs {
        clouds_yaml: clouds,
        user_config: user,
        ca_bundle: ca,
        topology: true,
    }
}

#[test]
fn a_password_cloud_becomes_global_keys_in_the_drivers_names() {
    let clouds = password_cloud();
    let out = translate(&inputs(&clouds, None, None), &sources()).unwrap();
    assert_eq!(
        out.cloud_conf,
        "[Global]\n\
         auth-url = \"https://keystone.example:5000/v3\"\n\
         username = \"csi\"\n\
         user-domain-name = \"Default\"\n\
         password = \"p;w#d \\\"q\\\" \\\\ end\"\n\
         tenant-name = \"demo\"\n\
         tenant-domain-name = \"Default\"\n\
         region = \"RegionOne\"\n\
         \n\
         [BlockStorage]\n\
         ignore-volume-az = \"false\"\n"
    );
    assert_eq!(out.ca_bundle, None);
    assert_eq!(out.secret_data().keys().collect::<Vec<_>>(), ["cloud.conf"]);
}

#[test]
fn an_application_credential_cloud_keeps_its_secret_and_interface() {
    let clouds = "clouds:\n  openstack:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: https://k/v3\n      application_credential_id: ac-1\n      application_credential_secret: s3cret\n    interface: internal\n";
    let out = translate(&inputs(clouds, None, None), &sources()).unwrap();
    assert!(
        out.cloud_conf
            .contains("application-credential-id = \"ac-1\"\n"),
        "{}",
        out.cloud_conf
    );
    assert!(
        out.cloud_conf
            .contains("application-credential-secret = \"s3cret\"\n")
    );
    assert!(out.cloud_conf.contains("interface = \"internal\"\n"));
    assert!(!out.cloud_conf.contains("password"));
}

#[test]
fn the_user_config_is_merged_filtered_and_clouds_yaml_wins() {
    let clouds = password_cloud();
    let user = "[Global]\nregion = OtherRegion\ninterface = internal\nca-file = /etc/kubernetes/static-pod-resources/ca.pem\n\
                [BlockStorage]\ntrust-device-path = false\nnode-volume-attach-limit = 25\n\
                [Metadata]\nsearch-order = metadataService\n";
    let out = translate(&inputs(&clouds, Some(user), None), &sources()).unwrap();
    let conf = &out.cloud_conf;
    assert!(conf.contains("region = \"RegionOne\"\n"), "{conf}");
    assert!(!conf.contains("OtherRegion"), "{conf}");
    // clouds.yaml names no interface: the user's stays.
    assert!(conf.contains("interface = \"internal\"\n"), "{conf}");
    assert!(!conf.contains("ca-file"), "{conf}");
    assert!(!conf.contains("trust-device-path"), "{conf}");
    assert!(
        conf.contains(
            "[BlockStorage]\nnode-volume-attach-limit = \"25\"\nignore-volume-az = \"false\"\n"
        ),
        "{conf}"
    );
    assert!(
        conf.ends_with("[Metadata]\nsearch-order = \"metadataService\"\n"),
        "{conf}"
    );
}

#[rstest]
#[case(true, None, "false")]
#[case(false, None, "true")]
#[case(false, Some("[BlockStorage]\nignore-volume-az = false\n"), "false")]
#[case(true, Some("[BlockStorage]\nignore-volume-az = yes\n"), "yes")]
fn ignore_volume_az_follows_the_zones_unless_the_user_set_it(
    #[case] topology: bool,
    #[case] user: Option<&str>,
    #[case] want: &str,
) {
    let clouds = password_cloud();
    let mut inputs = inputs(&clouds, user, None);
    inputs.topology = topology;
    let out = translate(&inputs, &sources()).unwrap();
    assert!(
        out.cloud_conf
            .contains(&format!("ignore-volume-az = \"{want}\"\n")),
        "{}",
        out.cloud_conf
    );
}

#[test]
fn a_ca_bundle_is_kept_beside_the_config_and_named_as_ca_file() {
    let clouds = password_cloud();
    let out = translate(&inputs(&clouds, None, Some(CA)), &sources()).unwrap();
    assert!(
        out.cloud_conf
            .contains("ca-file = \"/etc/cinder-csi/ca-bundle.pem\"\n"),
        "{}",
        out.cloud_conf
    );
    assert_eq!(out.ca_bundle.as_deref(), Some(CA));
    assert_eq!(
        out.secret_data().keys().collect::<Vec<_>>(),
        ["ca-bundle.pem", "cloud.conf"]
    );
}

#[test]
fn the_hash_covers_credentials_config_and_the_cas_contents() {
    let clouds = password_cloud();
    let base = translate(&inputs(&clouds, None, Some(CA)), &sources()).unwrap();
    assert_eq!(base.hash(), base.clone().hash());
    let mut other_ca = base.clone();
    other_ca.ca_bundle = Some(format!("{CA}\n"));
    let rotated = translate(
        &inputs(
            &clouds.replace("username: csi", "username: csi2"),
            None,
            Some(CA),
        ),
        &sources(),
    )
    .unwrap();
    let reconfigured = translate(
        &inputs(
            &clouds,
            Some("[BlockStorage]\nrescan-on-resize = true\n"),
            Some(CA),
        ),
        &sources(),
    )
    .unwrap();
    for changed in [other_ca, rotated, reconfigured] {
        assert_ne!(changed.hash(), base.hash());
    }
    assert_eq!(base.hash().len(), 16);
}

#[test]
fn errors_name_the_secret_or_config_map_and_key_and_no_secret() {
    let s = sources();
    let not_yaml = translate(&inputs("clouds: [", None, None), &s).unwrap_err();
    assert!(
        not_yaml.to_string().starts_with(
            "Secret openshift-cluster-csi-drivers/cloud-credentials key clouds.yaml: "
        ),
        "{not_yaml}"
    );
    let other_cloud = password_cloud().replace("  openstack:", "  elsewhere:");
    let missing = translate(&inputs(&other_cloud, None, None), &s).unwrap_err();
    assert!(missing.to_string().contains("\"openstack\""), "{missing}");
    assert!(missing.to_string().contains("elsewhere"), "{missing}");

    let clouds = password_cloud();
    let legacy = translate(
        &inputs(
            &clouds,
            Some("[Global]\nsecret-name = openstack-credentials\n"),
            None,
        ),
        &s,
    )
    .unwrap_err();
    assert_eq!(
        legacy.to_string(),
        "ConfigMap openshift-cluster-csi-drivers/cloud-provider-config key config: [Global] secret-name is a legacy key of the in-tree Cinder plugin, which this operator does not read; remove it (the credentials come from the credentials Secret's clouds.yaml)"
    );
    let bad_ca = translate(&inputs(&clouds, None, Some("not a certificate")), &s).unwrap_err();
    assert!(
        bad_ca.to_string().starts_with(
            "ConfigMap openshift-cluster-csi-drivers/cloud-provider-config key ca-bundle.pem: not a PEM certificate bundle"
        ),
        "{bad_ca}"
    );
    for err in [not_yaml, missing, legacy, bad_ca] {
        assert!(!err.to_string().contains("p;w#d"), "{err}");
    }
}

#[rstest]
#[case("      token: abc\n      project_name: demo\n", "a token")]
#[case(
    "      username: u\n      password: p\n      trust_id: t1\n",
    "a trust"
)]
fn auth_the_driver_cannot_express_is_refused(#[case] auth: &str, #[case] what: &str) {
    let clouds = clouds_yaml(auth);
    let err = translate(&inputs(&clouds, None, None), &sources()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Secret openshift-cluster-csi-drivers/cloud-credentials key clouds.yaml: cloud openstack uses {what}, which the Cinder driver's cloud.conf cannot express; use a password or an application credential"
        )
    );
}

#[test]
fn debug_output_shows_no_secret() {
    let clouds = password_cloud();
    let out = translate(&inputs(&clouds, None, Some(CA)), &sources()).unwrap();
    let shown = format!("{out:?} {:?}", inputs(&clouds, None, Some(CA)));
    assert!(!shown.contains("p;w#d"), "{shown}");
    assert!(!shown.contains("csi"), "{shown}");
}
