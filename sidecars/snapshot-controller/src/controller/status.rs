//! A VolumeSnapshot's status as derived from its bound content's status (pure functions).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube_support::quantity::format_bytes;

use crate::api::{VolumeSnapshotContent, VolumeSnapshotStatus};

/// The snapshot status for a snapshot bound to `content`: the content's name, readiness
/// (false until the snapshotter says otherwise), restore size, creation time and error.
pub fn from_content(content: &VolumeSnapshotContent) -> VolumeSnapshotStatus {
    let status = content.status.clone().unwrap_or_default();
    VolumeSnapshotStatus {
        bound_volume_snapshot_content_name: content.metadata.name.clone(),
        creation_time: status.creation_time.and_then(time_from_unix_nanos),
        ready_to_use: Some(status.ready_to_use.unwrap_or(false)),
        restore_size: status.restore_size.map(quantity_from_bytes),
        error: status.error,
    }
}

/// Unix nanoseconds (as CSI reports creation_time) as a Kubernetes Time.
pub fn time_from_unix_nanos(nanos: i64) -> Option<Time> {
    Timestamp::from_nanosecond(i128::from(nanos)).ok().map(Time)
}

/// A byte count as a binary-SI quantity: the largest exact Ki/Mi/Gi/Ti/Pi/Ei unit, else bytes
/// (as [`kube_support::quantity::format_bytes`] writes PV capacities).
pub fn quantity_from_bytes(bytes: i64) -> Quantity {
    Quantity(format_bytes(bytes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rstest::rstest;

    use super::*;
    use crate::api::{VolumeSnapshotContentStatus, VolumeSnapshotError};

    #[rstest]
    #[case(0, "0")]
    #[case(1000, "1000")]
    #[case(1024, "1Ki")]
    #[case(1536, "1536")]
    #[case(1 << 30, "1Gi")]
    #[case(3 * (1 << 30), "3Gi")]
    #[case(1 << 40, "1Ti")]
    fn bytes_become_the_largest_exact_binary_unit(#[case] bytes: i64, #[case] expected: &str) {
        assert_eq!(quantity_from_bytes(bytes).0, expected);
    }

    #[test]
    fn nanoseconds_become_an_rfc3339_time() {
        let time = time_from_unix_nanos(1_700_000_000_123_456_789).unwrap();
        assert_eq!(time.0.to_string(), "2023-11-14T22:13:20.123456789Z");
    }

    #[test]
    fn content_status_is_copied_and_readiness_defaults_to_false() {
        let mut content = VolumeSnapshotContent::new("snapcontent-1", Default::default());
        let status = from_content(&content);
        assert_eq!(
            status.bound_volume_snapshot_content_name.as_deref(),
            Some("snapcontent-1")
        );
        assert_eq!(status.ready_to_use, Some(false));
        assert_eq!(status.restore_size, None);

        content.status = Some(VolumeSnapshotContentStatus {
            snapshot_handle: Some("snap-id".into()),
            creation_time: Some(1_000_000_000),
            ready_to_use: Some(true),
            restore_size: Some(1 << 30),
            error: Some(VolumeSnapshotError {
                time: None,
                message: Some("boom".into()),
            }),
        });
        let status = from_content(&content);
        assert_eq!(status.ready_to_use, Some(true));
        assert_eq!(status.restore_size, Some(Quantity("1Gi".into())));
        assert_eq!(status.creation_time.unwrap().0.as_second(), 1);
        assert_eq!(status.error.unwrap().message.as_deref(), Some("boom"));
    }
}
