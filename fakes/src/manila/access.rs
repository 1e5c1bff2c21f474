//! Access rules: the `allow_access`, `deny_access` and `access_list` actions, and
//! `GET /share-access-rules` (≥ 2.45).

use std::net::IpAddr;

use chrono::Utc;
use serde_json::{Value, json};

use super::model::{AccessOutcome, AccessRule, Failure, MessageAction, Share};
use super::{Ctx, ManilaState, pending_outcome, share_not_found};
use crate::faults::Operation;
use crate::lifecycle::{Lifecycle, api_time, new_id};
use crate::reply::{Reply, bad_request, not_found};

const TYPES: [&str; 4] = ["ip", "user", "cert", "cephx"];

fn view(ctx: &Ctx<'_>, share: &Share, r: &AccessRule, full: bool) -> Value {
    let state = if r.state == "queued_to_apply" && !ctx.at_least(28) {
        "new"
    } else {
        r.state.as_str()
    };
    let mut v = json!({
        "id": r.id,
        "access_type": r.access_type,
        "access_to": r.access_to,
        "access_level": r.access_level,
        "state": state,
    });
    if ctx.at_least(21) {
        v["access_key"] = json!(r.access_key);
    }
    if ctx.at_least(33) {
        v["created_at"] = json!(api_time(&r.created_at));
        v["updated_at"] = json!(r.updated_at.as_ref().map(api_time));
    }
    if full {
        v["share_id"] = json!(share.id);
    }
    if ctx.at_least(45) {
        v["metadata"] = json!(r.metadata);
    }
    v
}

/// Whether `text` is an address or a network as Manila's `ipaddress.ip_network(strict=True)`
/// takes it: a prefix within the family's width and no host bits set below it. IPv6 only
/// when `ipv6` (from 2.38).
fn valid_ip_or_cidr(text: &str, ipv6: bool) -> bool {
    let (addr, prefix) = match text.split_once('/') {
        None => (text, None),
        Some((addr, prefix)) => {
            if prefix.is_empty() || !prefix.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            match prefix.parse::<u8>() {
                Ok(p) => (addr, Some(p)),
                Err(_) => return false,
            }
        }
    };
    match addr.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => {
            let bits = u32::from(a);
            match prefix {
                None => true,
                Some(p) if p > 32 => false,
                Some(p) => bits.checked_shl(u32::from(p)).unwrap_or(0) == 0,
            }
        }
        Ok(IpAddr::V6(a)) if ipv6 => {
            let bits = u128::from(a);
            match prefix {
                None => true,
                Some(p) if p > 128 => false,
                Some(p) => bits.checked_shl(u32::from(p)).unwrap_or(0) == 0,
            }
        }
        _ => false,
    }
}

/// Manila's user (or group) names: 4 to 255 characters, not only periods, spaces and `|`,
/// and after the first none of `"/\[]:;|=,+*?<>`.
fn valid_user_name(text: &str) -> bool {
    const FORBIDDEN: &str = "\"/\\[]:;|=,+*?<>";
    let mut chars = text.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (4..=255).contains(&text.chars().count())
        && first != '\n'
        && !text
            .chars()
            .all(|c| c.is_whitespace() || c == '.' || c == '|')
        && chars.all(|c| c != '\n' && !FORBIDDEN.contains(c))
}

/// Manila's cephx ids: not empty, printable ASCII, no periods (`client.` is implied).
fn valid_cephx_id(text: &str) -> bool {
    !text.is_empty()
        && !text.contains('.')
        && text
            .chars()
            .all(|c| c.is_ascii_graphic() || c.is_ascii_whitespace() || c == '\x0b')
}

fn cephx_key() -> String {
    // The shape of a Ceph secret (base64 of 40 bytes); the value only needs to be unique.
    let a = uuid::Uuid::new_v4().simple().to_string();
    let b = uuid::Uuid::new_v4().simple().to_string();
    format!("AQ{}{}==", &a[..26], &b[..26])
}

/// How a rule's change ends when it fails: `error`, with a message about updating rules.
fn access_failure(detail_id: String, message: Option<String>) -> AccessOutcome {
    AccessOutcome::Failed(Failure {
        status: "error".into(),
        action: MessageAction::UpdateAccessRules,
        detail_id,
        message,
    })
}

/// The `allow_access` action.
pub(crate) fn allow(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str, args: &Value) -> Reply {
    let Some(share) = state.shares.get(id) else {
        return share_not_found(id);
    };
    let field = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    let (access_type, access_to) = (field("access_type"), field("access_to"));
    let access_level = args
        .get("access_level")
        .and_then(Value::as_str)
        .unwrap_or("rw")
        .to_owned();
    if !TYPES.contains(&access_type.as_str()) {
        return bad_request("Only 'ip', 'user', 'cert' or 'cephx' access types are supported.");
    }
    if access_type == "cephx" && !ctx.at_least(13) {
        return bad_request("Invalid access type cephx: it is supported from microversion 2.13.");
    }
    let valid = match access_type.as_str() {
        "ip" => valid_ip_or_cidr(&access_to, ctx.at_least(38)),
        "user" => valid_user_name(&access_to),
        "cephx" => valid_cephx_id(&access_to),
        _ => (1..=64).contains(&access_to.chars().count()),
    };
    if !valid {
        let rule = match access_type.as_str() {
            "ip" if ctx.at_least(38) => {
                "an IPv4 or IPv6 address or network, without host bits set in a network"
            }
            "ip" => {
                "an IPv4 address or network, without host bits set in a network (IPv6 from 2.38)"
            }
            "user" => "4 to 255 characters, excluding \"/\\[]:;|=,+*?<>",
            "cephx" => "non-empty printable ASCII without periods",
            _ => "1 to 64 characters",
        };
        return bad_request(format!(
            "Invalid access_to {access_to:?} for access_type {access_type}: it must be {rule}."
        ));
    }
    if access_type == "cephx" && access_to == "admin" {
        return bad_request("Invalid input received: cephx access to 'admin' is not allowed.");
    }
    if !["rw", "ro"].contains(&access_level.as_str()) {
        return bad_request(format!(
            "Invalid or unsupported share access level: {access_level}."
        ));
    }
    if share.status != "available" {
        return bad_request(format!(
            "Invalid share: Share {id} status must be 'available', but it is '{}'.",
            share.status
        ));
    }
    if share
        .access_rules
        .iter()
        .any(|r| r.access_type == access_type && r.access_to == access_to)
    {
        return bad_request(format!("Share access {access_type}:{access_to} exists."));
    }
    let keys = share.keys();
    let injected = match ctx.fault(Operation::AccessAllow, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let (pending, stuck) = pending_outcome(
        ctx,
        ctx.config.manila.delays.access_ms,
        injected,
        AccessOutcome::Active,
        access_failure,
    );
    let rule = AccessRule {
        id: new_id(),
        access_key: (access_type == "cephx").then(cephx_key),
        access_type,
        access_to,
        access_level,
        state: stuck.unwrap_or_else(|| "queued_to_apply".into()),
        metadata: Default::default(),
        created_at: Utc::now(),
        updated_at: None,
        pending,
    };
    let Some(share) = state.shares.get_mut(id) else {
        return share_not_found(id);
    };
    share.access_rules.push(rule);
    let (share, rule) = (&*share, share.access_rules.last());
    match rule {
        Some(rule) => {
            let mut v = view(ctx, share, rule, true);
            v["share_id"] = json!(share.id);
            Reply::json(200, json!({"access": v}))
        }
        None => share_not_found(id),
    }
}

/// The `deny_access` action.
pub(crate) fn deny(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str, args: &Value) -> Reply {
    let Some(share) = state.shares.get(id) else {
        return share_not_found(id);
    };
    let Some(access_id) = args
        .get("access_id")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return bad_request("Invalid input received: access_id is required.");
    };
    if !share.access_rules.iter().any(|r| r.id == access_id) {
        return not_found(format!("Access rule {access_id} could not be found."));
    }
    let mut keys = share.keys();
    keys.push(access_id.clone());
    let injected = match ctx.fault(Operation::AccessDeny, &keys) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let plan = pending_outcome(
        ctx,
        ctx.config.manila.delays.access_ms,
        injected,
        AccessOutcome::Gone,
        access_failure,
    );
    if let Some(rule) = state
        .shares
        .get_mut(id)
        .and_then(|s| s.access_rules.iter_mut().find(|r| r.id == access_id))
    {
        rule.start("queued_to_deny", plan);
    }
    Reply::empty(202)
}

/// The `access_list` action: Manila serves it from 2.0 to 2.44 only (then
/// `GET /share-access-rules`); above, the action is not found (404).
pub(crate) fn list_action(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    if ctx.at_least(45) {
        return not_found("The resource could not be found.");
    }
    list(state, ctx, id)
}

fn list(state: &mut ManilaState, ctx: &mut Ctx<'_>, id: &str) -> Reply {
    let Some(share) = state.shares.get(id) else {
        return share_not_found(id);
    };
    let keys = share.keys();
    if let Err(r) = ctx.fault(Operation::AccessList, &keys) {
        return r;
    }
    let Some(share) = state.shares.get(id) else {
        return share_not_found(id);
    };
    let rules: Vec<Value> = share
        .access_rules
        .iter()
        .map(|r| view(ctx, share, r, false))
        .collect();
    Reply::json(200, json!({"access_list": rules}))
}

/// `GET /share-access-rules?share_id=`.
pub(crate) fn rules(state: &mut ManilaState, ctx: &mut Ctx<'_>) -> Reply {
    let Some(id) = ctx.query("share_id").map(str::to_owned) else {
        return bad_request("The share_id query parameter is required to list access rules.");
    };
    list(state, ctx, &id)
}

/// `GET /share-access-rules/{id}`.
pub(crate) fn rule(state: &mut ManilaState, ctx: &mut Ctx<'_>, access_id: &str) -> Reply {
    let keys = vec![access_id.to_owned()];
    if let Err(r) = ctx.fault(Operation::AccessList, &keys) {
        return r;
    }
    state
        .shares
        .values()
        .find_map(|s| {
            s.access_rules
                .iter()
                .find(|r| r.id == access_id)
                .map(|r| (s, r))
        })
        .map_or_else(
            || not_found(format!("Access rule {access_id} could not be found.")),
            |(s, r)| Reply::json(200, json!({"access": view(ctx, s, r, true)})),
        )
}

#[cfg(test)]
mod tests {
    use super::{valid_ip_or_cidr, valid_user_name};
    use rstest::rstest;

    #[rstest]
    #[case("10.0.0.1", true)]
    #[case("0.0.0.0/0", true)]
    #[case("10.0.0.0/8", true)]
    #[case("10.0.0.1/32", true)]
    #[case("10.0.0.1/24", false)]
    #[case("fd00::/8", true)]
    #[case("fd00::1/64", false)]
    #[case("::1", true)]
    #[case("10.0.0.0/33", false)]
    #[case("10.0.0.0/+8", false)]
    #[case("10.0.0", false)]
    #[case("host.example", false)]
    fn ip_rules(#[case] text: &str, #[case] ok: bool) {
        assert_eq!(valid_ip_or_cidr(text, true), ok);
    }

    #[test]
    fn ipv6_only_when_allowed() {
        assert!(!valid_ip_or_cidr("fd00::1", false));
        assert!(valid_ip_or_cidr("10.0.0.1", false));
    }

    #[rstest]
    #[case("abc", false)]
    #[case("abcd", true)]
    #[case("alice.bob-1", true)]
    #[case("has space", true)]
    #[case("....", false)]
    #[case("ab/cd", false)]
    #[case("ab:cd", false)]
    fn user_names(#[case] text: &str, #[case] ok: bool) {
        assert_eq!(valid_user_name(text), ok);
        assert!(!valid_user_name(&"u".repeat(256)));
        assert!(valid_user_name(&"u".repeat(255)));
    }

    #[rstest]
    #[case("bob", true)]
    #[case("", false)]
    #[case("client.bob", false)]
    #[case("b\u{e9}b", false)]
    fn cephx_ids(#[case] text: &str, #[case] ok: bool) {
        assert_eq!(super::valid_cephx_id(text), ok);
    }
}
