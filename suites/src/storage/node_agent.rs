//! Where the embedded node agent still differs from kubelet in what the storage suites check.
//!
//! A test that catches such a difference on a node run by the agent skips, naming it (the
//! gap is the agent's, not the driver's); on a node run by a kubelet the same observation
//! fails the test. Once the agent behaves as kubelet, those tests pass without a change.

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use crate::conformance::{TestContext, TestError, TestResult};

/// Whether `node` is run by the embedded node agent (its runtime is the agent's
/// `pod-sandbox://`) rather than by a kubelet.
pub async fn runs_node_agent(ctx: &TestContext<'_>, node: &str) -> TestResult<bool> {
    let nodes: Api<Node> = Api::all(ctx.client());
    let found = nodes.get(node).await?;
    let runtime = found
        .status
        .and_then(|s| s.node_info)
        .map(|i| i.container_runtime_version)
        .unwrap_or_default();
    let agent_runtime = harness::node::registration::RUNTIME_VERSION;
    let scheme = agent_runtime.split("://").next().unwrap_or(agent_runtime);
    Ok(runtime.starts_with(&format!("{scheme}://")))
}

/// The outcome of a check that found `seen` where kubelet would do `kubelet_does`: a skip
/// naming the agent's gap (`missing`, where in the agent's code) when `node` runs the node
/// agent, else a failure.
pub async fn gap_or_failure(
    ctx: &TestContext<'_>,
    node: &str,
    seen: &str,
    kubelet_does: &str,
    missing: &str,
) -> TestError {
    match runs_node_agent(ctx, node).await {
        Ok(true) => TestError::skip(format!(
            "the embedded node agent of {node} differs from kubelet here: {seen}, where kubelet \
             {kubelet_does} ({missing})"
        )),
        Ok(false) => TestError::failed(format!("{seen}; kubelet {kubelet_does}")),
        Err(e) => e.context(format!("{seen}; reading node {node}")),
    }
}
