//! Out-of-range input never panics the fake: huge share sizes, delays, latencies and token
//! lifetimes answer 400 with a message naming the field, and the cloud keeps serving.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Client, control};
use fakes::{CloudConfig, Delays, FaultAction, FaultRule, Operation};
use reqwest::Method;
use rstest::rstest;
use serde_json::{Value, json};

/// The message of a Manila error body (`{"badRequest":{"message":…}}`).
fn manila_message(body: &Value) -> String {
    body.as_object()
        .and_then(|o| o.values().next())
        .and_then(|v| v["message"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[rstest]
#[case::u64_max(json!(u64::MAX))]
#[case::above_i32(json!(1_u64 << 31))]
#[case::numeric_string(json!("18446744073709551615"))]
#[tokio::test]
async fn a_huge_share_size_is_a_400_naming_the_size(#[case] size: Value) {
    let c = Client::start(CloudConfig::default()).await;
    // Some usage first, so that a quota sum would overflow.
    let id = c.available_share("small", 1).await;
    let r = c
        .post(
            "/shares",
            json!({"share": {"name": "huge", "size": size, "share_proto": "NFS"}}),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let message = manila_message(&r.body);
    assert!(message.contains("size"), "{message}");
    // Extending to a huge size is refused the same way.
    let r = c
        .post(
            &format!("/shares/{id}/action"),
            json!({"extend": {"new_size": size}}),
        )
        .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(manila_message(&r.body).contains("size"), "{:?}", r.body);
    // Still serving, nothing half-made.
    assert_eq!(
        c.get(&format!("/shares/{id}")).await.body["share"]["size"],
        1
    );
    assert_eq!(c.cloud.leftovers().shares.len(), 1);
}

#[rstest]
#[case::delays("/delays", json!({"share_create_ms": u64::MAX}), "share_create_ms")]
#[case::token_lifetime("/token-lifetime", json!({"seconds": u64::MAX}), "seconds")]
#[tokio::test]
async fn huge_control_values_are_a_400_naming_the_field(
    #[case] path: &str,
    #[case] body: Value,
    #[case] field: &str,
) {
    let c = Client::start(CloudConfig::default()).await;
    let r = control(&c.http, &c.cloud, Method::PUT, path, Some(body)).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    let message = r.body["error"].as_str().unwrap_or_default();
    assert!(message.contains(field), "{message}");
    // The cloud still works as before: a token, a share that becomes available.
    let mut c = c;
    c.reauth().await;
    c.available_share("after", 1).await;
}

#[tokio::test]
async fn a_huge_latency_fault_is_a_400() {
    let c = Client::start(CloudConfig::default()).await;
    let r = control(
        &c.http,
        &c.cloud,
        Method::POST,
        "/faults",
        Some(json!({"operation": "share_create", "action": {"latency": {"ms": u64::MAX}}})),
    )
    .await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.body["error"].as_str().unwrap_or_default().contains("ms"),
        "{:?}",
        r.body
    );
    let error = c
        .cloud
        .add_fault(FaultRule::new(
            Operation::Auth,
            FaultAction::Latency { ms: u64::MAX },
        ))
        .unwrap_err();
    assert!(error.to_string().contains("latency"), "{error}");
}

#[tokio::test]
async fn in_process_out_of_range_values_do_not_panic() {
    let c = Client::start(CloudConfig::default()).await;
    let error = c.cloud.set_token_lifetime(u64::MAX).unwrap_err();
    assert!(error.to_string().contains("token lifetime"), "{error}");
    // A delay beyond the maximum: the transition never comes (as if stuck), no panic.
    c.cloud.set_delays(Delays::uniform(u64::MAX));
    let id = c.create_share("slow", 1).await;
    let r = c.get(&format!("/shares/{id}")).await;
    assert_eq!(r.body["share"]["status"], "creating", "{:?}", r.body);
}

#[test]
fn seeds_with_out_of_range_values_are_refused_by_name() {
    for (yaml, field) in [
        (
            "manila:\n  delays:\n    access_ms: 18446744073709551615\n",
            "access_ms",
        ),
        (
            "token_lifetime_secs: 18446744073709551615\n",
            "token_lifetime_secs",
        ),
    ] {
        let error = CloudConfig::from_yaml(yaml, "<inline>").unwrap_err();
        assert!(error.to_string().contains(field), "{error}");
    }
}
