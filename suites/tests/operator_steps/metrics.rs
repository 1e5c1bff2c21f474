//! The operator's Prometheus `/metrics`, scraped over HTTP as Prometheus would: the address
//! the acting replica bound (`--metrics-address` with port 0, see
//! `fixtures/manila-operator/README.md`) is read from its log, then `GET /metrics` is parsed.
//! Plus what the metrics are compared with: the share types Manila itself lists.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context as _, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube_support::wait;
use suites::e2e::{ManilaCsiEnvironment, OPERATOR_SELECTOR};

use super::WAIT;

/// The operator's leader Lease.
pub const OPERATOR_LEASE: &str = "manila-csi-driver-operator-lock";
/// Reconciles started.
pub const RECONCILES: &str = "manila_operator_reconciles_total";
/// Objects the operator created, updated or deleted.
pub const OBJECT_CHANGES: &str = "manila_operator_object_changes_total";
/// Reconciles that failed.
pub const RECONCILE_ERRORS: &str = "manila_operator_reconcile_errors_total";
/// Share types the operator last saw in Manila.
pub const SHARE_TYPES: &str = "manila_operator_share_types";

/// One scrape of the acting operator replica.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// The operator pod scraped.
    pub pod: String,
    /// Sample name (with its labels, if any) → value.
    pub values: BTreeMap<String, f64>,
    /// The exposition as served, for failure messages.
    pub text: String,
}

impl Scrape {
    /// The value of the sample `name`; an error showing what was served when it is missing.
    pub fn value(&self, name: &str) -> anyhow::Result<f64> {
        self.values.get(name).copied().with_context(|| {
            format!(
                "no sample {name} in /metrics of {}:\n{}",
                self.pod, self.text
            )
        })
    }
}

/// The samples of a Prometheus text exposition: `name[{labels}] value` lines; comments and
/// blank lines skipped, anything else is an error naming the line.
pub fn parse_exposition(text: &str) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut values = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .rsplit_once(' ')
            .with_context(|| format!("a sample line without a value: {line:?}"))?;
        let value: f64 = value
            .parse()
            .with_context(|| format!("a sample whose value is not a number: {line:?}"))?;
        values.insert(name.trim().to_string(), value);
    }
    Ok(values)
}

/// The address in the operator's last `serving /metrics bound=<address>` log line.
pub fn bound_address(log: &str) -> Option<String> {
    let line = log.lines().rfind(|l| l.contains("serving /metrics"))?;
    let (_, rest) = line.split_once("bound=")?;
    rest.split_whitespace().next().map(str::to_string)
}

/// The operator pod holding the leader Lease (its holder identity starts with the pod's
/// name): the one that reconciles and counts.
pub async fn leader_pod(env: &ManilaCsiEnvironment) -> anyhow::Result<String> {
    let namespace = env.namespace().to_string();
    let leases: Api<Lease> = Api::namespaced(env.client(), &namespace);
    let pods: Api<Pod> = Api::namespaced(env.client(), &namespace);
    let found = wait::wait_until("the operator pod holding the leader Lease", WAIT, || {
        let (leases, pods) = (leases.clone(), pods.clone());
        async move {
            let holder = leases
                .get_opt(OPERATOR_LEASE)
                .await
                .map_err(|e| e.to_string())?
                .and_then(|l| l.spec)
                .and_then(|s| s.holder_identity)
                .filter(|h| !h.is_empty())
                .ok_or("no holder of the Lease yet")?;
            let names: Vec<String> = pods
                .list(&ListParams::default().labels(OPERATOR_SELECTOR))
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.metadata.name)
                .collect();
            match names.iter().find(|n| holder.starts_with(n.as_str())) {
                Some(name) => Ok(Some(name.clone())),
                None => Err(format!("holder {holder:?} is none of {names:?}")),
            }
        }
    })
    .await?;
    Ok(found)
}

/// Scrapes the acting operator replica's `/metrics` once.
pub async fn scrape(env: &ManilaCsiEnvironment) -> anyhow::Result<Scrape> {
    let pod = leader_pod(env).await?;
    let log = env
        .cluster()
        .logs(env.namespace(), &pod, "operator", false)
        .await
        .with_context(|| format!("reading the log of operator pod {pod}"))?;
    let Some(address) = bound_address(&log) else {
        bail!("operator pod {pod} logged no 'serving /metrics bound=…' line:\n{log}");
    };
    let url = format!("http://{address}/metrics");
    let client = reqwest::Client::builder().no_proxy().build()?;
    let response = client
        .get(&url)
        .send()
        .await
        .with_context(|| format!("GET {url} (operator pod {pod})"))?
        .error_for_status()
        .with_context(|| format!("GET {url} (operator pod {pod})"))?;
    let text = response.text().await?;
    let values =
        parse_exposition(&text).with_context(|| format!("the answer of {url}:\n{text}"))?;
    Ok(Scrape { pod, values, text })
}

/// Scrapes until `ready` accepts the scrape (`Err` says why not; the last reason is in the
/// error).
pub async fn wait_scrape(
    env: &ManilaCsiEnvironment,
    what: &str,
    ready: impl Fn(&Scrape) -> Result<(), String>,
) -> anyhow::Result<Scrape> {
    let ready = &ready;
    let found = wait::wait_until(format!("/metrics: {what}"), WAIT, || async move {
        let scrape = scrape(env).await.map_err(|e| format!("{e:#}"))?;
        ready(&scrape).map(|()| Some(scrape))
    })
    .await?;
    Ok(found)
}

/// Waits until at least `more` reconciles have started after `since` (the scrape of the same
/// pod): with one reconcile at a time, all but the last have then finished.
pub async fn wait_reconciles(
    env: &ManilaCsiEnvironment,
    since: &Scrape,
    more: f64,
) -> anyhow::Result<Scrape> {
    let before = since.value(RECONCILES)?;
    wait_scrape(env, &format!("{more} reconcile(s) after {before}"), |now| {
        let count = now.value(RECONCILES).map_err(|e| e.to_string())?;
        if now.pod != since.pod {
            Err(format!("another replica acts now: {}", now.pod))
        } else if count >= before + more {
            Ok(())
        } else {
            Err(format!("{RECONCILES} {count}"))
        }
    })
    .await
}

/// How many share types Manila lists to the environment's credentials (asked with the
/// workspace's OpenStack client, not through the operator).
pub async fn manila_share_type_count(env: &ManilaCsiEnvironment) -> anyhow::Result<usize> {
    let secret: HashMap<String, String> = env.driver_secret().into_iter().collect();
    let client = openstack_client::Connector::new("openstack-csi-conformance-tests".into())
        .connect(&secret)
        .await
        .context("connecting to the fake cloud's Manila")?;
    Ok(client
        .share_types()
        .await
        .context("listing share types")?
        .len())
}

/// The acting replica's `/metrics` once its share-type gauge equals the count Manila lists:
/// every sample present, reconciles and object changes counted (the operator installed the
/// driver, so both are above 0).
pub async fn scrape_matching_the_cloud(env: &ManilaCsiEnvironment) -> anyhow::Result<Scrape> {
    let types = manila_share_type_count(env).await? as f64;
    let scrape = wait_scrape(
        env,
        &format!("{SHARE_TYPES} {types} as Manila lists"),
        |s| {
            let seen = s.value(SHARE_TYPES).map_err(|e| e.to_string())?;
            if seen == types {
                Ok(())
            } else {
                Err(format!("{SHARE_TYPES} {seen}"))
            }
        },
    )
    .await?;
    ensure!(
        scrape.value(RECONCILES)? > 0.0,
        "no reconcile counted:\n{}",
        scrape.text
    );
    ensure!(
        scrape.value(OBJECT_CHANGES)? > 0.0,
        "no object change counted:\n{}",
        scrape.text
    );
    scrape.value(RECONCILE_ERRORS)?;
    Ok(scrape)
}

/// Waits until the same replica as `since` counts at least `more` object changes more.
pub async fn wait_object_changes(
    env: &ManilaCsiEnvironment,
    since: &Scrape,
    more: f64,
) -> anyhow::Result<Scrape> {
    let before = since.value(OBJECT_CHANGES)?;
    wait_scrape(
        env,
        &format!("{more} object change(s) after {before}"),
        |now| {
            let count = now.value(OBJECT_CHANGES).map_err(|e| e.to_string())?;
            if now.pod != since.pod {
                Err(format!("another replica acts now: {}", now.pod))
            } else if count >= before + more {
                Ok(())
            } else {
                Err(format!("{OBJECT_CHANGES} {count}"))
            }
        },
    )
    .await
}
