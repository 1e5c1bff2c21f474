//! Something run in-process until the test stops it: a sidecar, a node agent, a controller.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long [`InProcess::stop`] waits for the task to finish.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// The stop signal [`InProcess::spawn`] hands its task: completes when the test calls
/// [`InProcess::stop`]. `Sync` as well as `Send`, so that runners requiring it (e.g.
/// `snapshot_controller::controller::run`) take it as it is.
pub type Stopped = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// A task spawned with a stop signal; aborted when dropped without [`InProcess::stop`]
/// (e.g. when the test panics).
#[derive(Debug)]
pub struct InProcess<T> {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> InProcess<T> {
    /// Spawns `run(stopped)`, where `stopped` completes when the test calls
    /// [`InProcess::stop`]; e.g. `InProcess::spawn(|stopped| provisioner.run(stopped))`.
    pub fn spawn<F, Fut>(run: F) -> InProcess<T>
    where
        F: FnOnce(Stopped) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel::<()>();
        let stopped: Stopped = Box::pin(async move {
            let _ = stopped.await;
        });
        InProcess {
            stop: Some(stop),
            task: Some(tokio::spawn(run(stopped))),
        }
    }

    /// Signals the task to stop and returns what it returned; fails the test if it does not
    /// finish within 30 s or panicked.
    pub async fn stop(mut self) -> T {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("stop is called once");
        match tokio::time::timeout(STOP_TIMEOUT, task).await {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => panic!("the task failed: {e}"),
            Err(_) => panic!("the task did not stop within {STOP_TIMEOUT:?}"),
        }
    }

    /// Whether the task has finished by itself.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl<T> Drop for InProcess<T> {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_signals_the_task_and_returns_its_result() {
        let running = InProcess::spawn(|stopped| async move {
            stopped.await;
            42
        });
        assert!(!running.is_finished());
        assert_eq!(running.stop().await, 42);
    }

    #[tokio::test]
    async fn dropping_aborts_the_task() {
        let (tx, rx) = oneshot::channel::<()>();
        let running = InProcess::spawn(|_stopped| async move {
            let _keep = tx;
            std::future::pending::<()>().await;
        });
        drop(running);
        // The sender is dropped with the aborted task.
        assert!(rx.await.is_err());
    }
}
