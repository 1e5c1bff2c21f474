//! ConfigMaps and Secrets a pod refers to, read once per use (the Node authorizer lets a node
//! read exactly those its pods reference).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;

use crate::error::{Error, Result};

/// Reads ConfigMaps and Secrets of one namespace, caching what it read.
pub struct Sources {
    config_maps: Api<ConfigMap>,
    secrets: Api<Secret>,
    namespace: String,
    config_map_cache: HashMap<String, Option<BTreeMap<String, Vec<u8>>>>,
    secret_cache: HashMap<String, Option<BTreeMap<String, Vec<u8>>>>,
}

impl Sources {
    /// Sources in `namespace`.
    pub fn new(client: &Client, namespace: &str) -> Self {
        Sources {
            config_maps: Api::namespaced(client.clone(), namespace),
            secrets: Api::namespaced(client.clone(), namespace),
            namespace: namespace.into(),
            config_map_cache: HashMap::new(),
            secret_cache: HashMap::new(),
        }
    }

    /// A ConfigMap's data and binaryData as bytes; `None` when it does not exist.
    pub async fn config_map(&mut self, name: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
        if let Some(cached) = self.config_map_cache.get(name) {
            return Ok(cached.clone());
        }
        let found = self
            .config_maps
            .get_opt(name)
            .await
            .map_err(Error::api(format!(
                "reading ConfigMap {}/{name}",
                self.namespace
            )))?;
        let data = found.map(|cm| {
            let mut data: BTreeMap<String, Vec<u8>> = cm
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect();
            data.extend(
                cm.binary_data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0)),
            );
            data
        });
        self.config_map_cache.insert(name.into(), data.clone());
        Ok(data)
    }

    /// A Secret's data as bytes; `None` when it does not exist.
    pub async fn secret(&mut self, name: &str) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
        if let Some(cached) = self.secret_cache.get(name) {
            return Ok(cached.clone());
        }
        let found = self
            .secrets
            .get_opt(name)
            .await
            .map_err(Error::api(format!(
                "reading Secret {}/{name}",
                self.namespace
            )))?;
        let data = found.map(|s| {
            let mut data: BTreeMap<String, Vec<u8>> = s
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            data.extend(
                s.string_data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.into_bytes())),
            );
            data
        });
        self.secret_cache.insert(name.into(), data.clone());
        Ok(data)
    }
}
