//! Fresh namespaces that isolate the tests sharing one cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Resource, ResourceExt};
use kube_support::wait::{self, summarize};
use serde::de::DeserializeOwned;

use super::Cluster;
use super::error::{Error, Result};

/// The label every test namespace carries (value: the namespace's name). Put it on the
/// cluster-scoped objects a test creates ([`TestNamespace::labels`]) so that
/// [`TestNamespace::cleanup`] can check they are gone.
pub const TEST_NAMESPACE_LABEL: &str = "conformance.openstack-csi.io/test-namespace";

/// How long the namespace's default service account may take to appear.
const SERVICE_ACCOUNT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the namespace may take to be deleted (its pods stop gracefully first).
const DELETE_TIMEOUT: Duration = Duration::from_secs(90);

/// A namespace created for one test, with its `default` service account ready (pods can be
/// created at once).
///
/// [`TestNamespace::cleanup`] deletes it, waits until it is gone and checks that nothing the
/// test labelled is left behind. Dropped without cleanup (e.g. a failed test), it is still
/// deleted, without waiting.
pub struct TestNamespace {
    name: String,
    client: kube::Client,
    kubeconfig: PathBuf,
    cleaned: bool,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TestNamespace {
    pub(crate) async fn create(cluster: &Cluster, prefix: &str) -> Result<Self> {
        let name = format!("{}-{}", prefix.trim_end_matches('-'), suffix());
        let namespaces: Api<Namespace> = Api::all(cluster.client());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(BTreeMap::from([(
                    TEST_NAMESPACE_LABEL.into(),
                    name.clone(),
                )])),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(Error::kube(format!("creating namespace {name}")))?;
        let this = Self {
            name,
            client: cluster.client(),
            kubeconfig: cluster.kubeconfig().to_path_buf(),
            cleaned: false,
        };
        this.wait_service_account("default").await?;
        Ok(this)
    }

    /// Waits until the service account `name` can run pods: it exists and, on clusters
    /// before Kubernetes 1.24 (whose admission refuses pods of an account without one), its
    /// token secret has been created.
    pub async fn wait_service_account(&self, name: &str) -> Result<()> {
        let needs_token_secret = legacy_token_secrets(&self.client).await?;
        let accounts: Api<ServiceAccount> = self.api();
        wait::wait_for(
            &accounts,
            name,
            move |sa: Option<&ServiceAccount>| {
                sa.is_some_and(|sa| {
                    !needs_token_secret || sa.secrets.as_ref().is_some_and(|s| !s.is_empty())
                })
            },
            SERVICE_ACCOUNT_TIMEOUT,
        )
        .await?;
        Ok(())
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An API for a namespaced kind in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// The labels to put on cluster-scoped objects this test creates (PersistentVolumes,
    /// StorageClasses, ClusterRoles, …), so cleanup can check they are gone.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(TEST_NAMESPACE_LABEL.into(), self.name.clone())])
    }

    /// Deletes the namespace, waits until it is gone (every pod stopped), and checks that no
    /// cluster-scoped object carrying [`TestNamespace::labels`] remains.
    pub async fn cleanup(mut self) -> Result<()> {
        self.cleaned = true;
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        // Background, as `kubectl delete namespace` does: the namespace controller deletes the
        // content itself. Foreground would add a finalizer only the garbage collector removes,
        // and a fresh, loaded cluster's garbage collector can take minutes to sync its graph.
        match namespaces
            .delete(&self.name, &DeleteParams::background())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(Error::kube(format!("deleting namespace {}", self.name))(e)),
        }
        if let Err(mut e) = wait::wait_deleted(&namespaces, &self.name, DELETE_TIMEOUT).await {
            e.last_seen = format!("{}; pods left: {}", e.last_seen, self.pods_left().await);
            return Err(e.into());
        }
        let leftovers = self.cluster_scoped_leftovers().await?;
        if leftovers.is_empty() {
            Ok(())
        } else {
            Err(Error::Leftovers {
                namespace: self.name.clone(),
                leftovers: leftovers.join(", "),
            })
        }
    }

    async fn pods_left(&self) -> String {
        let pods: Api<Pod> = self.api();
        match pods.list(&ListParams::default()).await {
            Ok(list) if list.items.is_empty() => "none".into(),
            Ok(list) => list
                .items
                .iter()
                .map(summarize)
                .collect::<Vec<_>>()
                .join("; "),
            Err(e) => format!("<listing failed: {e}>"),
        }
    }

    async fn cluster_scoped_leftovers(&self) -> Result<Vec<String>> {
        let selector = format!("{TEST_NAMESPACE_LABEL}={}", self.name);
        let mut left = Vec::new();
        left.extend(labelled::<PersistentVolume>(&self.client, &selector).await?);
        left.extend(labelled::<StorageClass>(&self.client, &selector).await?);
        left.extend(labelled::<ClusterRole>(&self.client, &selector).await?);
        left.extend(labelled::<ClusterRoleBinding>(&self.client, &selector).await?);
        Ok(left)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.cleaned {
            return;
        }
        // No async in drop, and the test's runtime may be ending: send the delete from a
        // thread of our own with a client of its own.
        let name = self.name.clone();
        let kubeconfig = self.kubeconfig.clone();
        let sent = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let client = control_plane::client_from_kubeconfig(&kubeconfig)
                    .await
                    .map_err(|e| e.to_string())?;
                Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::background())
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
        })
        .join();
        if let Ok(Err(e)) = sent {
            tracing::warn!(namespace = %self.name, "deleting the test namespace failed: {e}");
        }
    }
}

/// Whether the apiserver predates 1.24, whose token controller creates a token secret per
/// service account that pod admission waits for.
async fn legacy_token_secrets(client: &kube::Client) -> Result<bool> {
    let info = client
        .apiserver_version()
        .await
        .map_err(Error::kube("reading the apiserver version"))?;
    let number = |s: &str| -> u32 {
        s.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0)
    };
    Ok(number(&info.major) == 1 && number(&info.minor) < 24)
}

async fn labelled<K>(client: &kube::Client, selector: &str) -> Result<Vec<String>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(client.clone());
    let kind = K::kind(&Default::default()).to_string();
    let list = api
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(Error::kube(format!("listing {kind}s labelled {selector}")))?;
    Ok(list
        .items
        .iter()
        .map(|o| format!("{kind} {}", o.name_any()))
        .collect())
}

/// A short random suffix (process-random hash keys over pid, a counter and the clock).
fn suffix() -> String {
    use std::hash::{BuildHasher, Hash, Hasher};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    std::process::id().hash(&mut hasher);
    COUNTER.fetch_add(1, Ordering::Relaxed).hash(&mut hasher);
    std::time::SystemTime::now().hash(&mut hasher);
    let mut n = hasher.finish();
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut out = String::new();
    for _ in 0..6 {
        out.push(alphabet[(n % 36) as usize] as char);
        n /= 36;
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn suffixes_differ_and_are_dns_labels() {
        let a = suffix();
        let b = suffix();
        assert_ne!(a, b);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
    }
}
