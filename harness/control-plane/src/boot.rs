//! Starting the components: the files each needs (keys, certificates, kubeconfigs), then
//! etcd, kube-apiserver, and kube-controller-manager with kube-scheduler, each awaited ready.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube_support::error::IoContext;

use super::components::{self, KUBERNETES_SERVICE_IP, Layout, Ports};
use super::error::{Error, Result};
use super::pki::{self, ClientIdentity, ClusterCa};
use super::process::ComponentProcess;
use super::readiness::{HealthCheck, wait_ready};
use super::run_dir::RunDir;
use super::{Binaries, BootTimings, ControlPlaneBuilder, KubernetesVersion, kubeconfig};

/// What [`prepare`] wrote.
pub(super) struct Prepared {
    pub(super) layout: Layout,
    pub(super) ca: ClusterCa,
    pub(super) api_url: String,
    pub(super) admin_kubeconfig: PathBuf,
}

/// The admin identity of the written kubeconfig.
fn admin_identity() -> ClientIdentity {
    ClientIdentity {
        user: "kubernetes-admin".into(),
        group: Some("system:masters".into()),
    }
}

/// Writes the keys, certificates and kubeconfigs of a control plane into `dir`.
pub(super) fn prepare(
    dir: &Path,
    cluster_name: &str,
    version: KubernetesVersion,
    advertise: IpAddr,
) -> Result<Prepared> {
    let pki_dir = dir.join("pki");
    let logs = dir.join("logs");
    for d in [&pki_dir, &logs] {
        std::fs::create_dir_all(d).map_err(Error::io("creating", d))?;
    }
    let ca = ClusterCa::generate(&format!("{cluster_name}-ca"))?;
    let ca_cert = pki_dir.join("ca.crt");
    let ca_key = pki_dir.join("ca.key");
    pki::write_private(&ca_cert, ca.cert_pem())?;
    pki::write_private(&ca_key, ca.key_pem())?;
    let loopback = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let apiserver_serving = pki::write_pair(
        &pki_dir,
        "apiserver",
        &ca.serving_cert("kube-apiserver", &{
            let mut names = pki::apiserver_names(KUBERNETES_SERVICE_IP);
            if !advertise.is_loopback() {
                names.push(advertise.to_string());
            }
            names
        })?,
    )?;
    let kubelet_client = ClientIdentity {
        user: "kube-apiserver-kubelet-client".into(),
        group: Some("system:masters".into()),
    };
    let apiserver_kubelet_client = pki::write_pair(
        &pki_dir,
        "apiserver-kubelet-client",
        &ca.client_cert(&kubelet_client)?,
    )?;
    let front_proxy_ca = ClusterCa::generate(&format!("{cluster_name}-front-proxy-ca"))?;
    let front_proxy_ca_cert = pki_dir.join("front-proxy-ca.crt");
    pki::write_private(&front_proxy_ca_cert, front_proxy_ca.cert_pem())?;
    let front_proxy_client = pki::write_pair(
        &pki_dir,
        "front-proxy-client",
        &front_proxy_ca.client_cert(&ClientIdentity {
            user: "front-proxy-client".into(),
            group: None,
        })?,
    )?;
    let controller_manager_serving = pki::write_pair(
        &pki_dir,
        "controller-manager",
        &ca.serving_cert("kube-controller-manager", &loopback)?,
    )?;
    let scheduler_serving = pki::write_pair(
        &pki_dir,
        "scheduler",
        &ca.serving_cert("kube-scheduler", &loopback)?,
    )?;
    let (sa_key, sa_pub) = pki::service_account_key()?;
    let service_account_key = pki_dir.join("sa.key");
    let service_account_pub = pki_dir.join("sa.pub");
    pki::write_private(&service_account_key, &sa_key)?;
    pki::write_private(&service_account_pub, &sa_pub)?;

    let ports = Ports::pick()?;
    let api_url = format!("https://{}", SocketAddr::new(advertise, ports.apiserver));
    let kubeconfig_for = |file: &str, identity: &ClientIdentity| -> Result<PathBuf> {
        let client = pki::write_pair(&pki_dir, file, &ca.client_cert(identity)?)?;
        let path = dir.join(format!("{file}.kubeconfig"));
        kubeconfig::write(
            &path,
            cluster_name,
            &api_url,
            &ca_cert,
            &identity.user,
            &client,
        )?;
        Ok(path)
    };
    let admin_kubeconfig = kubeconfig_for("admin", &admin_identity())?;
    let controller_manager_kubeconfig = kubeconfig_for(
        "controller-manager-client",
        &ClientIdentity {
            user: "system:kube-controller-manager".into(),
            group: None,
        },
    )?;
    let scheduler_kubeconfig = kubeconfig_for(
        "scheduler-client",
        &ClientIdentity {
            user: "system:kube-scheduler".into(),
            group: None,
        },
    )?;
    let layout = Layout {
        ports,
        advertise,
        etcd_data: dir.join("etcd"),
        ca_cert,
        ca_key,
        apiserver_serving,
        apiserver_kubelet_client,
        front_proxy_ca_cert,
        front_proxy_client,
        controller_manager_serving,
        scheduler_serving,
        service_account_key,
        service_account_pub,
        controller_manager_kubeconfig,
        scheduler_kubeconfig,
        cert_dir: pki_dir,
        disable_insecure_port: version
            < KubernetesVersion {
                major: 1,
                minor: 22,
            },
    };
    Ok(Prepared {
        layout,
        ca,
        api_url,
        admin_kubeconfig,
    })
}

/// Stops `processes` in reverse start order; the first error is returned after all are
/// stopped.
pub(super) async fn stop_all(processes: &mut Vec<ComponentProcess>, grace: Duration) -> Result<()> {
    let mut first_error = None;
    while let Some(mut process) = processes.pop() {
        if let Err(e) = process.stop(grace).await {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Starts the components one phase after the other, each awaited ready; every started
/// process is pushed to `processes` (also on failure, for the caller to stop).
pub(super) async fn boot_components(
    options: &ControlPlaneBuilder,
    binaries: &Binaries,
    run_dir: &RunDir,
    prepared: &Prepared,
    processes: &mut Vec<ComponentProcess>,
    timings: &mut BootTimings,
) -> Result<()> {
    let layout = &prepared.layout;
    let logs = run_dir.path().join("logs");
    let timeout = options.ready_timeout;

    let phase = Instant::now();
    let etcd_check = HealthCheck::anonymous(
        &format!("http://127.0.0.1:{}", layout.ports.etcd_client),
        None,
        "/health",
    )?;
    let mut etcd = ComponentProcess::spawn(
        "etcd",
        &binaries.etcd,
        components::etcd_args(layout),
        run_dir,
        &logs,
    )?;
    let waited = wait_ready(&mut etcd, &etcd_check, timeout).await;
    processes.push(etcd);
    waited?;
    timings.etcd = phase.elapsed();

    let phase = Instant::now();
    let apiserver_check =
        HealthCheck::anonymous(&prepared.api_url, Some(layout.ca_cert.clone()), "/readyz")?;
    let mut apiserver = ComponentProcess::spawn(
        "kube-apiserver",
        &binaries.kube_apiserver,
        components::apiserver_args(layout, &options.apiserver_args),
        run_dir,
        &logs,
    )?;
    let waited = wait_ready(&mut apiserver, &apiserver_check, timeout).await;
    processes.push(apiserver);
    waited?;
    timings.apiserver = phase.elapsed();

    let phase = Instant::now();
    let cm_check = HealthCheck::anonymous(
        &format!("https://127.0.0.1:{}", layout.ports.controller_manager),
        Some(layout.ca_cert.clone()),
        "/healthz",
    )?;
    let scheduler_check = HealthCheck::anonymous(
        &format!("https://127.0.0.1:{}", layout.ports.scheduler),
        Some(layout.ca_cert.clone()),
        "/healthz",
    )?;
    let cm_args = components::controller_manager_args(
        layout,
        &options.cluster_name,
        &options.controller_manager_args,
    );
    let mut cm = ComponentProcess::spawn(
        "kube-controller-manager",
        &binaries.kube_controller_manager,
        cm_args,
        run_dir,
        &logs,
    )?;
    let scheduler = ComponentProcess::spawn(
        "kube-scheduler",
        &binaries.kube_scheduler,
        components::scheduler_args(layout, &options.scheduler_args),
        run_dir,
        &logs,
    );
    let mut scheduler = match scheduler {
        Ok(scheduler) => scheduler,
        Err(e) => {
            processes.push(cm);
            return Err(e);
        }
    };
    let (cm_ready, scheduler_ready) = tokio::join!(
        wait_ready(&mut cm, &cm_check, timeout),
        wait_ready(&mut scheduler, &scheduler_check, timeout)
    );
    processes.push(cm);
    processes.push(scheduler);
    cm_ready?;
    scheduler_ready?;
    timings.controllers = phase.elapsed();

    Ok(())
}
