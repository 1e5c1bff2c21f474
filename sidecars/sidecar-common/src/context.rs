//! What every controller sidecar's reconcile gets: [`SidecarContext`], built once at start
//! by [`crate::sidecar::Sidecar::new`] and shared (in an `Arc`) by all its controllers.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use csi_proto::v1::controller_client::ControllerClient;
use kube::Client;
use kube_support::backoff::KeyedBackoff;
use kube_support::events::EventRecorder;
use tonic::transport::Channel;

use crate::driver::{self, Driver};
use crate::error::CsiCallError;
use crate::flags::{CommonFlags, RetryFlags};
use crate::http::Metrics;

/// What the context needs from a sidecar's flags: the shared ones.
pub trait SidecarConfig {
    /// `--csi-address`, `--timeout`, leader election, `--http-endpoint`, `-v`.
    fn common(&self) -> &CommonFlags;
    /// `--retry-interval-start` and `--retry-interval-max`.
    fn retry(&self) -> &RetryFlags;
}

/// Everything a controller sidecar's reconcile needs, `C` being the sidecar's flags.
pub struct SidecarContext<C> {
    /// Kubernetes client.
    pub client: Client,
    /// The driver: its channel, name and capabilities.
    pub driver: Driver,
    /// The sidecar's flags.
    pub config: C,
    /// This replica's name (see [`kube_support::instance::name`]), the events' `source.host`.
    pub host: String,
    /// When this replica connected to its driver.
    pub started: SystemTime,
    /// Events on the objects the sidecar works on.
    pub recorder: EventRecorder,
    /// Retry delays per object, from `--retry-interval-start`/`-max`.
    pub backoff: KeyedBackoff,
    /// CSI call counts and durations, served on `/metrics`.
    pub metrics: Arc<Metrics>,
}

impl<C> std::fmt::Debug for SidecarContext<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SidecarContext")
            .field("driver", &self.driver.info.name)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl<C: SidecarConfig> SidecarContext<C> {
    /// The context of a sidecar connected to `driver`, recording events as `component`
    /// from `host`.
    pub fn new(client: Client, driver: Driver, config: C, host: String, component: String) -> Self {
        SidecarContext {
            recorder: EventRecorder::new(client.clone(), component, host.clone()),
            backoff: config.retry().backoff(),
            metrics: Arc::new(Metrics::default()),
            started: SystemTime::now(),
            client,
            driver,
            config,
            host,
        }
    }

    /// The driver's name (GetPluginInfo).
    pub fn driver_name(&self) -> &str {
        &self.driver.info.name
    }

    /// A client of the driver's Controller service (cheap: it shares the channel).
    pub fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(self.driver.channel.clone())
    }

    /// Runs one Controller-service call (`method`, e.g. `CreateVolume`) with `--timeout`,
    /// counting it in the metrics as `/csi.v1.Controller/<method>` with its gRPC code.
    pub async fn call<T>(
        &self,
        method: &'static str,
        future: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, CsiCallError> {
        let started = Instant::now();
        let outcome = driver::timed(method, self.config.common().timeout, future).await;
        let code = outcome
            .as_ref()
            .map_or_else(|error| error.status.code(), |_| tonic::Code::Ok);
        self.metrics.observe(
            &format!("/csi.v1.Controller/{method}"),
            code,
            started.elapsed(),
        );
        outcome
    }
}
