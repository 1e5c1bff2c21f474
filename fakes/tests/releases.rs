//! The emulated OpenStack release: every service announces and accepts up to the release's
//! highest microversion (a seed's explicit maximum wins), the version headers are read as
//! each service reads them over real HTTP, and Nova's attachment answers take the shape of
//! the microversion asked (2.89: `attachment_id`/`bdm_uuid`; 2.101: 202 without a body).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::block::{Block, require_loop_devices};
use common::resp;
use fakes::{CloudConfig, OpenStackRelease};
use reqwest::Method;
use rstest::rstest;
use serde_json::{Value, json};

fn block_cloud(release: OpenStackRelease) -> CloudConfig {
    let mut config = CloudConfig {
        release,
        ..CloudConfig::default()
    };
    config.cinder.present = true;
    config
}

/// The `version` of a service's v2/v3 version document.
async fn announced(http: &reqwest::Client, url: String) -> String {
    let body: Value = http.get(url).send().await.unwrap().json().await.unwrap();
    body["version"]["version"]
        .as_str()
        .or(body["versions"][0]["version"].as_str())
        .unwrap_or_else(|| panic!("no version in {body}"))
        .to_owned()
}

/// `minor + 1` of `M.N`.
fn next(version: &str) -> String {
    let (major, minor) = version.split_once('.').unwrap();
    format!("{major}.{}", minor.parse::<u32>().unwrap() + 1)
}

#[rstest]
#[case::epoxy(OpenStackRelease::V2025_1, "2.89", "3.71", "2.100")]
#[case::flamingo(OpenStackRelease::V2025_2, "2.91", "3.71", "2.100")]
#[case::gazpacho(OpenStackRelease::V2026_1, "2.95", "3.71", "2.103")]
#[tokio::test]
async fn each_service_announces_and_accepts_the_releases_maximum(
    #[case] release: OpenStackRelease,
    #[case] manila: &str,
    #[case] cinder: &str,
    #[case] nova: &str,
) {
    let b = Block::with(block_cloud(release)).await;
    assert_eq!(b.cloud.release(), release);
    let base = b.cloud.base_url().to_owned();
    assert_eq!(
        announced(&b.http, format!("{base}/share/v2/")).await,
        manila
    );
    assert_eq!(
        announced(&b.http, format!("{base}/volume/v3/")).await,
        cinder
    );
    assert_eq!(
        announced(&b.http, format!("{base}/compute/v2.1")).await,
        nova
    );

    let manila_at = |v: String| {
        b.http
            .get(format!("{}/shares", b.cloud.manila_url()))
            .header("X-Auth-Token", &b.token)
            .header("X-OpenStack-Manila-API-Version", v)
            .send()
    };
    let ok = resp(manila_at(manila.into()).await.unwrap()).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    assert_eq!(ok.headers["x-openstack-manila-api-version"], manila);
    let above = resp(manila_at(next(manila)).await.unwrap()).await;
    assert_eq!(above.status, 406, "{:?}", above.body);

    let ok = b.cinder(Method::GET, "/volumes", Some(cinder), None).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    assert_eq!(
        ok.headers["openstack-api-version"],
        format!("volume {cinder}")
    );
    let above = b
        .cinder(Method::GET, "/volumes", Some(&next(cinder)), None)
        .await;
    assert_eq!(above.status, 406, "{:?}", above.body);

    let ok = b.nova(Method::GET, "/servers", nova, None).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
    assert_eq!(
        ok.headers["openstack-api-version"],
        format!("compute {nova}")
    );
    assert_eq!(ok.headers["x-openstack-nova-api-version"], nova);
    let above = b.nova(Method::GET, "/servers", &next(nova), None).await;
    assert_eq!(above.status, 406, "{:?}", above.body);
    assert_eq!(
        above.body["computeFault"]["message"],
        format!(
            "Version {} is not supported by the API. Minimum is 2.1 and maximum is {nova}.",
            next(nova)
        )
    );
}

#[tokio::test]
async fn an_explicit_maximum_in_the_seed_overrides_the_release() {
    let mut config = block_cloud(OpenStackRelease::V2026_1);
    config.manila.max_microversion = "2.64".into();
    config.cinder.max_microversion = "3.60".into();
    config.nova.max_microversion = "2.88".into();
    let b = Block::with(config).await;
    let base = b.cloud.base_url().to_owned();
    assert_eq!(
        announced(&b.http, format!("{base}/share/v2/")).await,
        "2.64"
    );
    assert_eq!(
        announced(&b.http, format!("{base}/volume/v3/")).await,
        "3.60"
    );
    assert_eq!(
        announced(&b.http, format!("{base}/compute/v2.1")).await,
        "2.88"
    );
    let latest = b
        .cinder(Method::GET, "/volumes", Some("latest"), None)
        .await;
    assert_eq!(latest.headers["openstack-api-version"], "volume 3.60");
    let above = b.nova(Method::GET, "/servers", "2.89", None).await;
    assert_eq!(above.status, 406, "{:?}", above.body);
}

/// A raw request to Cinder with the given `OpenStack-API-Version` value (or none).
async fn cinder_with(b: &Block, method: Method, path: &str, header: Option<&str>) -> common::Resp {
    let mut req = b
        .http
        .request(method, format!("{}{path}", b.cloud.cinder_url()))
        .header("X-Auth-Token", &b.token);
    if let Some(value) = header {
        req = req.header("OpenStack-API-Version", value);
    }
    resp(req.send().await.unwrap()).await
}

#[rstest]
#[case::old_gophercloud(Some("volumev3 3.42"), 200, Some("volume 3.42"))]
#[case::among_services(Some("compute 2.60, volume 3.50"), 200, Some("volume 3.50"))]
#[case::none(None, 200, Some("volume 3.0"))]
#[case::no_volume_part(Some("block-storage 3.42"), 400, None)]
#[case::capitalised(Some("Volume 3.42"), 400, None)]
#[case::three_words(Some("volume 3.42 please"), 500, None)]
#[case::malformed(Some("volume 3.x"), 400, None)]
#[tokio::test]
async fn cinder_reads_the_generic_header_as_cinder_does(
    #[case] header: Option<&str>,
    #[case] status: u16,
    #[case] answered: Option<&str>,
) {
    let b = Block::with(block_cloud(OpenStackRelease::default())).await;
    let r = cinder_with(&b, Method::GET, "/volumes", header).await;
    assert_eq!(r.status, status, "{:?}", r.body);
    assert_eq!(
        r.headers
            .get("openstack-api-version")
            .map(|v| v.to_str().unwrap()),
        answered
    );
}

#[tokio::test]
async fn cinder_ignores_a_legacy_volume_header() {
    let b = Block::with(block_cloud(OpenStackRelease::default())).await;
    let r = resp(
        b.http
            .get(format!("{}/volumes", b.cloud.cinder_url()))
            .header("X-Auth-Token", &b.token)
            .header("X-OpenStack-Volume-API-Version", "3.42")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.headers["openstack-api-version"], "volume 3.0");
}

#[tokio::test]
async fn nova_reads_its_legacy_header_and_refuses_malformed_versions() {
    let b = Block::with(block_cloud(OpenStackRelease::default())).await;
    let legacy = resp(
        b.http
            .get(format!("{}/servers", b.cloud.nova_url()))
            .header("X-Auth-Token", &b.token)
            .header("X-OpenStack-Nova-API-Version", "2.60")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(legacy.status, 200, "{:?}", legacy.body);
    assert_eq!(legacy.headers["x-openstack-nova-api-version"], "2.60");
    let malformed = b.nova(Method::GET, "/servers", "2.x", None).await;
    assert_eq!(malformed.status, 400, "{:?}", malformed.body);
    assert_eq!(
        malformed.body["badRequest"]["message"],
        "API Version String 2.x is of invalid format. Must be of format MajorNum.MinorNum."
    );
}

/// Old gophercloud's in-use extend (`OpenStack-API-Version: volumev3 3.42`, nothing else):
/// accepted, answered `volume 3.42`, the attached volume grows and stays `in-use`.
#[tokio::test]
async fn an_in_use_volume_extends_with_the_volumev3_header() {
    require_loop_devices();
    let b = Block::with(block_cloud(OpenStackRelease::V2025_1)).await;
    let dirs = tempfile::tempdir().unwrap();
    let (server, _) = b.server(dirs.path(), "node-1", "nova");
    let volume = b.volume(json!({"size": 1})).await;
    b.attach(&server, &volume).await;
    let r = resp(
        b.http
            .post(format!("{}/volumes/{volume}/action", b.cloud.cinder_url()))
            .header("X-Auth-Token", &b.token)
            .header("OpenStack-API-Version", "volumev3 3.42")
            .json(&json!({"os-extend": {"new_size": 2}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.headers["openstack-api-version"], "volume 3.42");
    let grown = b.wait_volume(&volume, "in-use").await;
    assert_eq!(grown["size"], 2, "{grown}");
    b.detach(&server, &volume, "available").await;
}

/// Nova's attach and attachment answers at 2.88, 2.89 and 2.101 (2026.1 only).
#[tokio::test]
async fn nova_attachments_take_the_shape_of_the_version_asked() {
    require_loop_devices();
    let b = Block::with(block_cloud(OpenStackRelease::V2026_1)).await;
    let dirs = tempfile::tempdir().unwrap();
    let (server, _) = b.server(dirs.path(), "node-1", "nova");
    let attach = |version: &'static str, volume: String| {
        let b = &b;
        let server = server.clone();
        async move {
            b.nova(
                Method::POST,
                &format!("/servers/{server}/os-volume_attachments"),
                version,
                Some(json!({"volumeAttachment": {"volumeId": volume}})),
            )
            .await
        }
    };

    let old = b.volume(json!({"size": 1})).await;
    let r = attach("2.88", old.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["volumeAttachment"]["id"], old.as_str());
    assert!(r.body["volumeAttachment"].get("attachment_id").is_none());

    let new = b.volume(json!({"size": 1})).await;
    let r = attach("2.89", new.clone()).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    let shown = &r.body["volumeAttachment"];
    assert!(shown.get("id").is_none(), "{shown}");
    assert!(shown["attachment_id"].is_string(), "{shown}");
    assert!(shown["bdm_uuid"].is_string(), "{shown}");
    assert_eq!(shown["device"], "/dev/vdc");
    let listed = b
        .nova(
            Method::GET,
            &format!("/servers/{server}/os-volume_attachments"),
            "2.89",
            None,
        )
        .await;
    let listed = listed.body["volumeAttachments"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 2);
    assert!(
        listed
            .iter()
            .all(|a| a.get("id").is_none() && a["attachment_id"].is_string())
    );

    let bodiless = b.volume(json!({"size": 1})).await;
    let r = attach("2.101", bodiless.clone()).await;
    assert_eq!(r.status, 202, "{:?}", r.body);
    assert_eq!(r.body, Value::Null);
    let attached = b.wait_volume(&bodiless, "in-use").await;
    assert_eq!(attached["attachments"][0]["device"], "/dev/vdd");

    for volume in [&old, &new, &bodiless] {
        b.detach(&server, volume, "available").await;
    }
}

#[tokio::test]
async fn releases_before_2026_1_refuse_the_bodiless_attach_version() {
    let b = Block::with(block_cloud(OpenStackRelease::V2025_2)).await;
    let r = b.nova(Method::GET, "/servers", "2.101", None).await;
    assert_eq!(r.status, 406, "{:?}", r.body);
}
