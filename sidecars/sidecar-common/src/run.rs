//! The run wiring every controller sidecar shares: a stop flag set when `shutdown`
//! resolves, `/healthz` and `/metrics` on `--http-endpoint`, the sidecar's work run under
//! leader election (`--leader-election`) or directly, and a controller's reconcile stream
//! driven to its end.

use std::fmt::Display;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::Client;
use kube_support::leader::LeaderElection;
use tokio::sync::watch;
use tonic::transport::Channel;

use crate::error::Result;
use crate::http::Metrics;

/// Runs `work` until `shutdown` resolves. `work` gets the stop flag (see [`stopped`]);
/// with `election` it only runs while this replica holds the Lease, and losing the Lease
/// is an error. With `http_endpoint`, `/healthz` (probing `driver`) and `/metrics` are
/// served meanwhile and stopped when this returns.
pub async fn run_sidecar<W, F>(
    client: Client,
    election: Option<&LeaderElection>,
    http_endpoint: Option<&str>,
    metrics: Arc<Metrics>,
    driver: Channel,
    shutdown: impl Future<Output = ()> + Send + 'static,
    work: W,
) -> Result<()>
where
    W: FnOnce(watch::Receiver<bool>) -> F,
    F: Future<Output = ()>,
{
    let stop = stop_flag(shutdown);
    let http = match http_endpoint {
        Some(address) => {
            Some(crate::http::serve(address, metrics, Some(driver), stopped(stop.clone())).await?)
        }
        None => None,
    };
    let work = work(stop.clone());
    let result = match election {
        Some(election) => election
            .run(
                client,
                async {
                    work.await;
                    Ok(())
                },
                stopped(stop),
            )
            .await
            .map(|_| ())
            .map_err(Into::into),
        None => {
            work.await;
            Ok(())
        }
    };
    if let Some((_, task)) = http {
        task.abort();
    }
    result
}

/// A stop flag that is set once `shutdown` resolves: one signal for several controllers
/// (hand each a clone and wait on it with [`stopped`]).
pub fn stop_flag(shutdown: impl Future<Output = ()> + Send + 'static) -> watch::Receiver<bool> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    stop_rx
}

/// Resolves once the stop flag is set (or its sender is gone).
pub async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Drives a kube-runtime controller's output to its end (the controller's graceful
/// shutdown). Failed reconciles are only logged at debug level, as `what`: the controller's
/// `error_policy` has reported them already.
pub async fn drain<T, E: Display>(outcomes: impl Stream<Item = Result<T, E>>, what: &'static str) {
    outcomes
        .for_each(|outcome| async move {
            if let Err(error) = outcome {
                tracing::debug!(%error, "{what}");
            }
        })
        .await;
}
