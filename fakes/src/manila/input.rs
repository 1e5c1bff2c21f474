//! Reading Manila request bodies and queries as Manila's API reads them: optional strings,
//! string maps (metadata), sizes, numbers and booleans, each refused with Manila's 400.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::config::MAX_SHARE_SIZE_GIB;
use crate::reply::{Reply, bad_request};

/// A string field that may be absent or null.
pub(crate) fn optional_string(
    body: &Map<String, Value>,
    key: &str,
) -> Result<Option<String>, Reply> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad_request(format!(
            "Invalid input for {key}: {other} is not a string."
        ))),
    }
}

/// A map of strings (metadata) that may be absent or null: keys of 1 to 255 characters,
/// values of at most 1023.
pub(crate) fn string_map(
    value: Option<&Value>,
    what: &str,
) -> Result<BTreeMap<String, String>, Reply> {
    let mut out = BTreeMap::new();
    match value {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (k, v) in map {
                if k.is_empty() || k.len() > 255 {
                    return Err(bad_request(format!(
                        "Invalid {what} key {k:?}: keys must be 1 to 255 characters long."
                    )));
                }
                let Some(v) = v.as_str() else {
                    return Err(bad_request(format!(
                        "Invalid {what}: value of {k:?} is not a string."
                    )));
                };
                if v.len() > 1023 {
                    return Err(bad_request(format!(
                        "Invalid {what}: value of {k:?} is longer than 1023 characters."
                    )));
                }
                out.insert(k.clone(), v.to_owned());
            }
        }
        Some(_) => {
            return Err(bad_request(format!(
                "Invalid {what}: it must be an object of strings."
            )));
        }
    }
    Ok(out)
}

/// A positive integer size (numbers or numeric strings, as Manila accepts), at most
/// [`MAX_SHARE_SIZE_GIB`].
pub(crate) fn parse_size(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
    .filter(|n| (1..=MAX_SHARE_SIZE_GIB).contains(n))
}

/// A non-negative integer query parameter `key` (`None` when absent).
pub(crate) fn query_number(value: Option<&str>, key: &str) -> Result<Option<usize>, Reply> {
    match value {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            bad_request(format!(
                "Invalid {key} {v:?}: it must be a non-negative integer."
            ))
        }),
    }
}
