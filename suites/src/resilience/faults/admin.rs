//! Manila's admin actions: what a cloud operator does about a stuck resource.

use super::*;

/// The Manila microversion of the admin actions (`reset_status` without `os-`).
pub(super) const ADMIN_MICROVERSION: &str = "2.45";

/// A client of the fake cloud's Manila admin API with the seed account (an admin there).
pub(super) struct ManilaAdmin {
    pub(super) http: reqwest::Client,
    pub(super) auth_url: String,
    pub(super) manila_url: String,
    pub(super) account: fakes::config::Account,
}

impl ManilaAdmin {
    pub(super) fn new(cloud: &FakeCloud) -> TestResult<ManilaAdmin> {
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(30));
        if let Some(pem) = cloud.ca_pem() {
            let ca = reqwest::Certificate::from_pem(pem.as_bytes())
                .map_err(|e| TestError::failed(format!("the fake cloud's CA: {e}")))?;
            builder = builder.add_root_certificate(ca);
        }
        Ok(ManilaAdmin {
            http: builder
                .build()
                .map_err(|e| TestError::failed(format!("an HTTP client: {e}")))?,
            auth_url: cloud.auth_url(),
            manila_url: cloud.manila_url(),
            account: cloud.account(),
        })
    }

    pub(super) async fn token(&self) -> TestResult<String> {
        let account = &self.account;
        let body = serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": account.user_name,
                "domain": {"name": account.domain_name},
                "password": account.password.expose(),
            }}},
            "scope": {"project": {
                "name": account.project_name,
                "domain": {"name": account.domain_name},
            }},
        }});
        let url = format!("{}/auth/tokens", self.auth_url.trim_end_matches('/'));
        let response = self
            .http
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| TestError::failed(format!("POST {url}: {e}")))?;
        ensure!(
            response.status().is_success(),
            "POST {url} answered {}",
            response.status()
        );
        response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| TestError::failed(format!("POST {url}: no X-Subject-Token")))
    }

    /// Manila's admin `reset_status` of the share or snapshot `id` (`collection` is
    /// `shares` or `snapshots`) to `status`.
    pub(super) async fn reset_status(
        &self,
        collection: &str,
        id: &str,
        status: &str,
    ) -> TestResult {
        let token = self.token().await?;
        let url = format!(
            "{}/{collection}/{id}/action",
            self.manila_url.trim_end_matches('/')
        );
        let response = self
            .http
            .post(&url)
            .header("X-Auth-Token", token)
            .header("X-OpenStack-Manila-API-Version", ADMIN_MICROVERSION)
            .json(&serde_json::json!({"reset_status": {"status": status}}))
            .send()
            .await
            .map_err(|e| TestError::failed(format!("POST {url}: {e}")))?;
        let code = response.status();
        let text = response.text().await.unwrap_or_default();
        ensure!(
            code.is_success(),
            "reset_status of {collection} {id} to {status}: HTTP {code} {text}"
        );
        Ok(())
    }
}
