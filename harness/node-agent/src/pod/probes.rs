//! Startup, readiness and liveness probes: exec (inside the container), httpGet and
//! tcpSocket. Pods share the host's network, so a probe's port is a port on the node's
//! address (the pod IP).
//!
//! Probes know nothing of the pod worker: [`run`] sends its [`ProbeResult`]s into any
//! channel whose messages can be made from one (the worker's `WorkerEvent`).

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container as ContainerSpec, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::sync::mpsc;

use pod_runtime::Container;

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// `startupProbe`.
    Startup,
    /// `readinessProbe`.
    Readiness,
    /// `livenessProbe`.
    Liveness,
}

impl ProbeKind {
    /// As kubelet names it in events.
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Liveness => "Liveness",
        }
    }

    /// The container's probe of this kind.
    pub fn of(self, container: &ContainerSpec) -> Option<&Probe> {
        match self {
            ProbeKind::Startup => container.startup_probe.as_ref(),
            ProbeKind::Readiness => container.readiness_probe.as_ref(),
            ProbeKind::Liveness => container.liveness_probe.as_ref(),
        }
    }
}

/// One probe run's result.
#[derive(Debug, Clone)]
pub struct ProbeResult {
    /// The container name.
    pub container: String,
    /// Its attempt.
    pub attempt: u32,
    /// Which probe.
    pub kind: ProbeKind,
    /// Whether it succeeded.
    pub success: bool,
    /// Why it failed (empty on success).
    pub message: String,
}

/// Consecutive results of one probe, against its thresholds.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProbeCounter {
    successes: i32,
    failures: i32,
}

impl ProbeCounter {
    /// Records a result; returns `Some(true)` when the success threshold is reached, and
    /// `Some(false)` when the failure threshold is reached.
    pub fn record(&mut self, probe: &Probe, success: bool) -> Option<bool> {
        if success {
            self.failures = 0;
            self.successes += 1;
            (self.successes >= probe.success_threshold.unwrap_or(1).max(1)).then_some(true)
        } else {
            self.successes = 0;
            self.failures += 1;
            (self.failures >= probe.failure_threshold.unwrap_or(3).max(1)).then_some(false)
        }
    }
}

/// Runs `kind` periodically against a container attempt, sending results to `events` until
/// the task is aborted or the receiver is gone.
pub async fn run<E: From<ProbeResult>>(
    kind: ProbeKind,
    probe: Probe,
    spec: ContainerSpec,
    container: Container,
    pod_ip: IpAddr,
    http: reqwest::Client,
    events: mpsc::UnboundedSender<E>,
) {
    let initial = Duration::from_secs(probe.initial_delay_seconds.unwrap_or(0).max(0) as u64);
    let period = Duration::from_secs(probe.period_seconds.unwrap_or(10).max(1) as u64);
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    tokio::time::sleep(initial).await;
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let outcome = tokio::time::timeout(
            timeout,
            probe_once(&probe, &spec, &container, pod_ip, &http, timeout),
        )
        .await
        .unwrap_or_else(|_| Err(format!("timeout after {timeout:?}")));
        let result = ProbeResult {
            container: spec.name.clone(),
            attempt: container.attempt(),
            kind,
            success: outcome.is_ok(),
            message: outcome.err().unwrap_or_default(),
        };
        if events.send(result.into()).is_err() {
            return;
        }
    }
}

async fn probe_once(
    probe: &Probe,
    spec: &ContainerSpec,
    container: &Container,
    pod_ip: IpAddr,
    http: &reqwest::Client,
    timeout: Duration,
) -> Result<(), String> {
    if let Some(exec) = &probe.exec {
        let argv = exec.command.clone().unwrap_or_default();
        let out = container.exec(&argv).await.map_err(|e| e.to_string())?;
        let code = out.code();
        if code == 0 {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&[out.stdout, out.stderr].concat())
            .trim()
            .to_string();
        return Err(format!("command {argv:?} exited with {code}: {text}"));
    }
    if let Some(get) = &probe.http_get {
        let port = resolve_port(&get.port, spec)?;
        let host = get.host.clone().unwrap_or_else(|| pod_ip.to_string());
        let scheme = get.scheme.as_deref().unwrap_or("HTTP").to_ascii_lowercase();
        let path = get.path.as_deref().unwrap_or("/");
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        let url = format!("{scheme}://{host}:{port}{path}");
        let mut request = http.get(&url).timeout(timeout);
        for header in get.http_headers.iter().flatten() {
            request = request.header(&header.name, &header.value);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("Get {url:?}: {e}"))?;
        let code = response.status().as_u16();
        return if (200..400).contains(&code) {
            Ok(())
        } else {
            Err(format!("HTTP probe failed with statuscode: {code}"))
        };
    }
    if let Some(tcp) = &probe.tcp_socket {
        let port = resolve_port(&tcp.port, spec)?;
        let host = tcp.host.clone().unwrap_or_else(|| pod_ip.to_string());
        return tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map(drop)
            .map_err(|e| format!("dial tcp {host}:{port}: {e}"));
    }
    Err("the probe has no exec, httpGet or tcpSocket handler".into())
}

/// A probe port: a number, or the name of one of the container's ports.
fn resolve_port(port: &IntOrString, spec: &ContainerSpec) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => spec
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port)
            .ok_or_else(|| format!("no container port named {name:?}"))?,
    };
    u16::try_from(number).map_err(|_| format!("invalid port {number}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        let probe = Probe {
            success_threshold: Some(2),
            failure_threshold: Some(2),
            ..Probe::default()
        };
        let mut c = ProbeCounter::default();
        assert_eq!(c.record(&probe, true), None);
        assert_eq!(c.record(&probe, true), Some(true));
        assert_eq!(c.record(&probe, false), None);
        assert_eq!(c.record(&probe, false), Some(false));
    }
}
