//! Fault tests with the fake cloud: every failure has a precise gRPC code, a message naming
//! the culprit, and leaves no share behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;

use fakes::{CloudConfig, Delays, FaultAction, FaultRule, Operation, Times};
use rstest::rstest;
use support::{ControllerEnv, GIB, create_request};
use tonic::Code;

#[tokio::test]
async fn keystone_down_is_unavailable_naming_keystone() {
    let mut env = ControllerEnv::start(&[]).await;
    // A port nothing listens on: bind, note the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut secrets = env.secrets.clone();
    let dead_url = format!("http://127.0.0.1:{port}/identity/v3");
    secrets.insert("os-authURL".into(), dead_url.clone());
    let error = env
        .client
        .create_volume(create_request("pvc-down", GIB, &secrets, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unavailable, "{error:?}");
    assert!(
        error.message().contains("Keystone") && error.message().contains(&dead_url),
        "{}",
        error.message()
    );
    env.assert_no_leftovers();
}

#[tokio::test]
async fn keystone_rejecting_the_password_is_unauthenticated() {
    let mut env = ControllerEnv::start(&[]).await;
    let mut secrets = env.secrets.clone();
    secrets.insert("os-password".into(), "wrong-password".into());
    let error = env
        .client
        .create_volume(create_request("pvc-auth", GIB, &secrets, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unauthenticated, "{error:?}");
    assert!(error.message().contains("Keystone"), "{}", error.message());
    assert!(
        !error.message().contains("wrong-password"),
        "the secret leaked: {}",
        error.message()
    );
    env.assert_no_leftovers();
}

#[tokio::test]
async fn an_expired_token_is_renewed_after_a_401() {
    let mut env = ControllerEnv::start(&[]).await;
    let first = env.create("pvc-token-1", GIB).await.unwrap();
    env.cloud.clear_journal();
    env.cloud.expire_tokens();
    let second = env.create("pvc-token-2", GIB).await.unwrap();
    let journal = env.cloud.journal();
    let saw_401 = journal.iter().any(|e| e.status == 401);
    let reauth = journal
        .iter()
        .filter(|e| e.method == "POST" && e.path.ends_with("/auth/tokens"))
        .count();
    assert!(
        saw_401,
        "the fake should have rejected the expired token: {journal:#?}"
    );
    assert_eq!(reauth, 1, "exactly one re-authentication: {journal:#?}");
    env.delete(&first.volume_id).await.unwrap();
    env.delete(&second.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn a_share_stuck_in_creating_is_deadline_exceeded_and_cleanable() {
    let mut env = ControllerEnv::start(&["--share-wait-timeout=300ms"]).await;
    env.cloud.set_delays(Delays {
        share_create_ms: 1500,
        ..Delays::none()
    });
    let error = env.create("pvc-stuck", GIB).await.unwrap_err();
    assert_eq!(error.code(), Code::DeadlineExceeded, "{error:?}");
    assert!(
        error.message().contains("pvc-stuck") && error.message().contains("status creating"),
        "{}",
        error.message()
    );
    // Manila refuses to delete a share while it is creating: a precise code naming it.
    let id = env.cloud.leftovers().shares[0].id.clone();
    let error = env.delete(&id).await.unwrap_err();
    assert_eq!(error.code(), Code::FailedPrecondition, "{error:?}");
    assert!(error.message().contains(&id), "{}", error.message());
    // The CO retries CreateVolume: the same share is returned once available, then deleted.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let volume = loop {
        match env.create("pvc-stuck", GIB).await {
            Ok(volume) => break volume,
            Err(e)
                if e.code() == Code::DeadlineExceeded && tokio::time::Instant::now() < deadline => {
            }
            Err(e) => panic!("the share never became available: {e:?}"),
        }
    };
    assert_eq!(volume.volume_id, id);
    env.delete(&id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn a_share_that_never_leaves_creating_keeps_reporting_deadline_exceeded() {
    let mut env = ControllerEnv::start(&["--share-wait-timeout=200ms"]).await;
    env.cloud
        .add_fault(
            FaultRule::new(Operation::ShareCreate, FaultAction::Stuck { status: None })
                .for_resource("pvc-hung"),
        )
        .unwrap();
    for _ in 0..2 {
        let error = env.create("pvc-hung", GIB).await.unwrap_err();
        assert_eq!(error.code(), Code::DeadlineExceeded, "{error:?}");
        assert!(
            error.message().contains("the share is kept"),
            "{}",
            error.message()
        );
    }
    assert_eq!(
        env.cloud.leftovers().shares.len(),
        1,
        "a retry must not create a second share"
    );
}

#[rstest]
#[case("002", Code::OutOfRange)]
#[case("009", Code::OutOfRange)]
#[case("003", Code::InvalidArgument)]
#[case("007", Code::ResourceExhausted)]
#[case("001", Code::Internal)]
#[tokio::test]
async fn a_share_ending_in_error_is_rolled_back_with_the_mapped_code(
    #[case] detail: &str,
    #[case] code: Code,
) {
    let mut env = ControllerEnv::start(&[]).await;
    env.cloud
        .add_fault(FaultRule::new(
            Operation::ShareCreate,
            FaultAction::Error {
                detail_id: detail.into(),
                message: None,
            },
        ))
        .unwrap();
    let error = env.create("pvc-broken", GIB).await.unwrap_err();
    assert_eq!(error.code(), code, "{error:?}");
    let message = error.message();
    assert!(
        message.contains("pvc-broken") && message.contains("status error"),
        "{message}"
    );
    assert!(
        message.contains(&format!("detail_id {detail}")),
        "{message}"
    );
    assert!(message.contains("rollback"), "{message}");
    env.assert_no_leftovers();
}

#[tokio::test]
async fn quota_exceeded_is_resource_exhausted() {
    let mut config = CloudConfig::default();
    config.manila.quotas.gigabytes = 1;
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    let error = env.create("pvc-big", 2 * GIB).await.unwrap_err();
    assert_eq!(error.code(), Code::ResourceExhausted, "{error:?}");
    assert!(error.message().contains("quota"), "{}", error.message());
    env.assert_no_leftovers();
}

#[tokio::test]
async fn missing_secrets_are_invalid_argument() {
    let mut env = ControllerEnv::start(&[]).await;
    let error = env
        .client
        .create_volume(create_request("pvc-nosecret", GIB, &HashMap::new(), &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("secrets are required"),
        "{}",
        error.message()
    );
    let mut partial = env.secrets.clone();
    partial.remove("os-password");
    let error = env
        .client
        .create_volume(create_request("pvc-nosecret", GIB, &partial, &[]))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("os-password"),
        "{}",
        error.message()
    );
    let error = env
        .client
        .delete_volume(csi_proto::v1::DeleteVolumeRequest {
            volume_id: "x".into(),
            secrets: HashMap::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    env.assert_no_leftovers();
}

#[rstest]
#[case("appendShareMetadata", "not-json")]
#[case("autoTopology", "maybe")]
#[case("cephfs-mounter", "nfs")]
#[case("shareNetworkId", "typo-of-shareNetworkID")]
#[case("nfs-shareClient", "not-an-ip")]
#[case("nfs-shareClient", "10.0.0.1/8")]
#[case("nfs-shareClient", "10.0.0.0/8,192.168.0.300")]
#[tokio::test]
async fn malformed_parameters_are_invalid_argument_naming_them(
    #[case] key: &str,
    #[case] value: &str,
) {
    let mut env = ControllerEnv::start(&[]).await;
    let request = create_request("pvc-params", GIB, &env.secrets, &[(key, value)]);
    let error = env.client.create_volume(request).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains(&format!("parameter {key}")),
        "{}",
        error.message()
    );
    let posted = env.cloud.journal().iter().any(|e| e.method == "POST");
    assert!(
        !posted,
        "nothing may reach the cloud for a malformed request"
    );
    env.assert_no_leftovers();
}

#[tokio::test]
async fn a_transient_manila_500_surfaces_as_internal_and_a_retry_succeeds() {
    let mut env = ControllerEnv::start(&[]).await;
    env.cloud
        .add_fault(
            FaultRule::new(
                Operation::ShareCreate,
                FaultAction::HttpError {
                    status: 500,
                    message: Some("backend hiccup".into()),
                },
            )
            .times(Times::Count(1)),
        )
        .unwrap();
    let error = env.create("pvc-retry", GIB).await.unwrap_err();
    assert_eq!(error.code(), Code::Internal, "{error:?}");
    assert!(
        error.message().contains("backend hiccup"),
        "{}",
        error.message()
    );
    let volume = env.create("pvc-retry", GIB).await.unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[rstest]
#[case::not_an_address("not-an-ip", "\"not-an-ip\" is not an IP address")]
#[case::host_bits("10.0.0.1/8", "\"10.0.0.1/8\" has host bits set")]
#[case::one_of_several("10.0.0.0/8, 192.168.0.300", "\"192.168.0.300\" is not an IP address")]
#[tokio::test]
async fn an_invalid_share_client_is_refused_before_any_share_is_created(
    #[case] value: &str,
    #[case] why: &str,
) {
    let mut env = ControllerEnv::start(&[]).await;
    let request = create_request(
        "pvc-client",
        GIB,
        &env.secrets,
        &[("nfs-shareClient", value)],
    );
    let error = env.client.create_volume(request).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().starts_with("parameter nfs-shareClient:") && error.message().contains(why),
        "{}",
        error.message()
    );
    let reached = env.cloud.journal();
    assert!(
        reached.is_empty(),
        "a malformed parameter must be refused before the cloud is asked anything: {reached:#?}"
    );
    env.assert_no_leftovers();
}

#[rstest]
#[case::bad_request(Operation::AccessAllow, 400, Code::InvalidArgument)]
#[case::server_error(Operation::AccessAllow, 500, Code::Internal)]
#[case::unavailable(Operation::AccessAllow, 503, Code::Unavailable)]
#[case::listing_rules(Operation::AccessList, 500, Code::Internal)]
#[tokio::test]
async fn an_http_error_while_granting_access_rolls_the_share_back(
    #[case] operation: Operation,
    #[case] status: u16,
    #[case] code: Code,
) {
    let mut env = ControllerEnv::start(&[]).await;
    env.cloud
        .add_fault(FaultRule::new(
            operation,
            FaultAction::HttpError {
                status,
                message: Some("the access API hiccuped".into()),
            },
        ))
        .unwrap();
    let error = env.create("pvc-grant", GIB).await.unwrap_err();
    assert_eq!(error.code(), code, "{error:?}");
    let message = error.message();
    assert!(
        message.contains("pvc-grant")
            && message.contains("the access API hiccuped")
            && message.contains("was deleted (rollback)"),
        "{message}"
    );
    env.assert_no_leftovers();
    // The retry starts afresh and succeeds.
    let volume = env.create("pvc-grant", GIB).await.unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn an_access_rule_past_the_deadline_keeps_the_share_for_the_retry() {
    let mut env = ControllerEnv::start(&["--share-wait-timeout=200ms"]).await;
    env.cloud
        .add_fault(FaultRule::new(
            Operation::AccessAllow,
            FaultAction::Stuck { status: None },
        ))
        .unwrap();
    let error = env.create("pvc-slow-rule", GIB).await.unwrap_err();
    assert_eq!(error.code(), Code::DeadlineExceeded, "{error:?}");
    assert!(
        error.message().contains("the share is kept"),
        "{}",
        error.message()
    );
    let leftovers = env.cloud.leftovers();
    assert_eq!(leftovers.shares.len(), 1, "{leftovers:#?}");
    let id = leftovers.shares[0].id.clone();
    env.delete(&id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn ipv6_share_clients_need_a_cloud_at_microversion_2_38() {
    let mut config = CloudConfig::default();
    config.manila.max_microversion = "2.37".into();
    let mut env = ControllerEnv::with_cloud(config, &[]).await;
    let request = create_request(
        "pvc-v6",
        GIB,
        &env.secrets,
        &[("nfs-shareClient", "fd00::/8")],
    );
    let error = env.client.create_volume(request).await.unwrap_err();
    assert_eq!(error.code(), Code::InvalidArgument, "{error:?}");
    assert!(
        error.message().contains("\"fd00::/8\" is IPv6") && error.message().contains("2.38"),
        "{}",
        error.message()
    );
    let posted = env
        .cloud
        .journal()
        .iter()
        .any(|e| e.method == "POST" && e.path.ends_with("/shares"));
    assert!(!posted, "no share may be created");
    env.assert_no_leftovers();
}

#[tokio::test]
async fn ipv6_share_clients_are_granted_at_microversion_2_38() {
    let mut env = ControllerEnv::start(&[]).await;
    let request = create_request(
        "pvc-v6",
        GIB,
        &env.secrets,
        &[("nfs-shareClient", "fd00::/8,10.0.0.0/8")],
    );
    let volume = env
        .client
        .create_volume(request)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let rules = env.cloud.leftovers().access_rules;
    assert_eq!(rules.len(), 2, "{rules:#?}");
    assert!(rules.iter().all(|r| r.status == "active"), "{rules:#?}");
    let v6_grant = env.cloud.journal().into_iter().find(|e| {
        e.method == "POST"
            && e.path.ends_with("/action")
            && e.microversion.as_deref() == Some("2.38")
    });
    assert!(v6_grant.is_some(), "the IPv6 rule is granted at 2.38");
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[rstest]
#[case::max(i64::MAX, 0)]
#[case::max_with_limit(i64::MAX - 1, i64::MAX)]
#[case::beyond_manila(1 << 62, 0)]
#[tokio::test]
async fn huge_capacity_ranges_are_out_of_range_and_the_driver_keeps_serving(
    #[case] required_bytes: i64,
    #[case] limit_bytes: i64,
) {
    let mut env = ControllerEnv::start(&[]).await;
    let mut request = create_request("pvc-huge", 0, &env.secrets, &[]);
    request.capacity_range = Some(csi_proto::v1::CapacityRange {
        required_bytes,
        limit_bytes,
    });
    let error = env.client.create_volume(request).await.unwrap_err();
    assert_eq!(error.code(), Code::OutOfRange, "{error:?}");
    assert!(
        error.message().contains("capacity_range"),
        "{}",
        error.message()
    );
    let volume = env.create("pvc-normal", GIB).await.unwrap();
    let error = env
        .client
        .controller_expand_volume(csi_proto::v1::ControllerExpandVolumeRequest {
            volume_id: volume.volume_id.clone(),
            capacity_range: Some(csi_proto::v1::CapacityRange {
                required_bytes,
                limit_bytes,
            }),
            secrets: env.secrets.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::OutOfRange, "{error:?}");
    let extends = env
        .cloud
        .journal()
        .into_iter()
        .filter(|e| e.method == "POST" && e.path.ends_with("/action"))
        .count();
    assert_eq!(extends, 1, "only the access grant: no extend was sent");
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn concurrent_calls_share_one_authentication_against_a_hanging_keystone() {
    const CALLS: usize = 6;
    let timeout = std::time::Duration::from_millis(400);
    let env = ControllerEnv::start(&["--auth-timeout=400ms"]).await;
    // Keystone answers long after the driver's authentication timeout.
    env.cloud
        .add_fault(
            FaultRule::new(Operation::Auth, FaultAction::Latency { ms: 5_000 })
                .times(Times::ALWAYS),
        )
        .unwrap();
    let started = tokio::time::Instant::now();
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let mut client = env.client.clone();
            let request = create_request(&format!("pvc-auth-{i}"), GIB, &env.secrets, &[]);
            tokio::spawn(async move { client.create_volume(request).await })
        })
        .collect();
    for call in calls {
        let error = call.await.unwrap().unwrap_err();
        assert_eq!(error.code(), Code::Unavailable, "{error:?}");
        assert!(error.message().contains("Keystone"), "{}", error.message());
    }
    let elapsed = started.elapsed();
    let authentications = env
        .cloud
        .journal()
        .iter()
        .filter(|e| e.method == "POST" && e.path.ends_with("/auth/tokens"))
        .count();
    assert_eq!(
        authentications, 1,
        "{CALLS} concurrent calls with one set of credentials must share one authentication"
    );
    // One timeout for all of them (queued one after another they took CALLS timeouts).
    assert!(
        elapsed < timeout * 3,
        "{CALLS} calls took {elapsed:?} with an authentication timeout of {timeout:?}"
    );
    // The failure is not remembered: once Keystone answers, the next call authenticates.
    env.cloud.clear_faults();
    let mut env = env;
    let volume = env.create("pvc-auth-after", GIB).await.unwrap();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}

#[tokio::test]
async fn concurrent_token_renewals_share_one_authentication() {
    const CALLS: usize = 6;
    let timeout = std::time::Duration::from_millis(400);
    let mut env = ControllerEnv::start(&["--auth-timeout=400ms"]).await;
    // A first call authenticates and reads Manila's versions.
    let volume = env.create("pvc-renew", GIB).await.unwrap();
    // Every token is revoked: each call gets a 401 and needs a new token from a Keystone
    // that now hangs.
    env.cloud.expire_tokens();
    env.cloud
        .add_fault(
            FaultRule::new(Operation::Auth, FaultAction::Latency { ms: 5_000 })
                .times(Times::ALWAYS),
        )
        .unwrap();
    env.cloud.clear_journal();
    let started = tokio::time::Instant::now();
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let mut client = env.client.clone();
            let request = create_request(&format!("pvc-renew-{i}"), GIB, &env.secrets, &[]);
            tokio::spawn(async move { client.create_volume(request).await })
        })
        .collect();
    for call in calls {
        let error = call.await.unwrap().unwrap_err();
        assert_eq!(error.code(), Code::Unavailable, "{error:?}");
    }
    let elapsed = started.elapsed();
    let authentications = env
        .cloud
        .journal()
        .iter()
        .filter(|e| e.method == "POST" && e.path.ends_with("/auth/tokens"))
        .count();
    assert_eq!(authentications, 1, "one renewal shared by {CALLS} calls");
    assert!(
        elapsed < timeout * 3,
        "{CALLS} calls took {elapsed:?} with an authentication timeout of {timeout:?}"
    );
    env.cloud.clear_faults();
    env.delete(&volume.volume_id).await.unwrap();
    env.assert_no_leftovers();
}
