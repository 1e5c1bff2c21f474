//! Shared helpers of the integration tests: a small Manila client over reqwest.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod block;

use std::time::{Duration, Instant};

use fakes::{CloudConfig, FakeCloud};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// A response: status, headers and JSON body (Null when empty or not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

/// A client holding a token for one fake cloud.
pub struct Client {
    pub http: reqwest::Client,
    pub cloud: FakeCloud,
    pub token: String,
    pub version: String,
}

pub fn password_auth() -> Value {
    json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "demo", "domain": {"name": "Default"}, "password": "fake-password"}}},
        "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}
    }})
}

/// Password auth as the seed's administrator (`admin`).
pub fn admin_auth() -> Value {
    json!({"auth": {
        "identity": {"methods": ["password"], "password": {"user": {
            "name": "admin", "domain": {"name": "Default"}, "password": "fake-admin-password"}}},
        "scope": {"project": {"name": "demo", "domain": {"name": "Default"}}}
    }})
}

pub async fn token(http: &reqwest::Client, cloud: &FakeCloud) -> String {
    token_for(http, cloud, password_auth()).await
}

pub async fn token_for(http: &reqwest::Client, cloud: &FakeCloud, auth: Value) -> String {
    let r = http
        .post(format!("{}/auth/tokens", cloud.auth_url()))
        .json(&auth)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    r.headers()["x-subject-token"].to_str().unwrap().to_owned()
}

impl Client {
    pub async fn start(config: CloudConfig) -> Self {
        let cloud = FakeCloud::start(config).await.unwrap();
        Self::for_cloud(cloud).await
    }

    pub async fn for_cloud(cloud: FakeCloud) -> Self {
        let http = reqwest::Client::new();
        let token = token(&http, &cloud).await;
        Self {
            http,
            cloud,
            token,
            version: "2.84".into(),
        }
    }

    pub async fn reauth(&mut self) {
        self.token = token(&self.http, &self.cloud).await;
    }

    /// From now on, calls as the seed's administrator.
    pub async fn admin(mut self) -> Self {
        self.sign_in_as_admin().await;
        self
    }

    /// Calls as the seed's administrator until [`Client::reauth`].
    pub async fn sign_in_as_admin(&mut self) {
        self.token = token_for(&self.http, &self.cloud, admin_auth()).await;
    }

    /// A Manila request at `self.version`; `path` below `/share/v2`.
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        self.call_at(&self.version, method, path, body).await
    }

    pub async fn call_at(
        &self,
        version: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Resp {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.cloud.manila_url()))
            .header("X-Auth-Token", &self.token)
            .header("X-OpenStack-Manila-API-Version", version);
        if let Some(body) = body {
            req = req.json(&body);
        }
        resp(req.send().await.unwrap()).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.call(Method::DELETE, path, None).await
    }

    /// Creates an NFS share; its id.
    pub async fn create_share(&self, name: &str, size: u64) -> String {
        let r = self
            .post(
                "/shares",
                json!({"share": {"name": name, "size": size, "share_proto": "NFS"}}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["share"]["id"].as_str().unwrap().to_owned()
    }

    /// Polls a resource until `field` equals `want`; panics with the last value seen.
    pub async fn wait_for(&self, path: &str, key: &str, field: &str, want: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.get(path).await;
            if r.body[key][field] == want {
                return r.body[key].clone();
            }
            assert!(
                Instant::now() < deadline,
                "{path}: {field} never became {want:?}; last seen {} {:?}",
                r.status,
                r.body
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Polls until GET `path` answers 404; panics with the last answer.
    pub async fn wait_gone(&self, path: &str) -> Resp {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = self.get(path).await;
            if r.status == 404 {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "{path} never disappeared; last seen {} {:?}",
                r.status,
                r.body
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// A share created and available.
    pub async fn available_share(&self, name: &str, size: u64) -> String {
        let id = self.create_share(name, size).await;
        self.wait_for(&format!("/shares/{id}"), "share", "status", "available")
            .await;
        id
    }
}

pub async fn resp(r: reqwest::Response) -> Resp {
    let status = r.status();
    let headers = r.headers().clone();
    let bytes = r.bytes().await.unwrap();
    Resp {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// Control API call.
pub async fn control(
    http: &reqwest::Client,
    cloud: &FakeCloud,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Resp {
    let mut req = http.request(method, format!("{}{path}", cloud.control_url()));
    if let Some(body) = body {
        req = req.json(&body);
    }
    resp(req.send().await.unwrap()).await
}
