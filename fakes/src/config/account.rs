//! Who the cloud knows (`account:`): the user and project, its roles, its application
//! credential, the trustee of its trust and the cloud's administrator; and [`Secret`], the
//! string type their passwords are kept in.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A string that never prints: passwords and application-credential secrets.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The secret value, for the few places that must compare or hand it out.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The account: a user in a domain, a project, roles and an application credential.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Account {
    /// Domain ID of the user and the project.
    pub domain_id: String,
    /// Domain name of the user and the project.
    pub domain_name: String,
    /// User ID.
    pub user_id: String,
    /// User name.
    pub user_name: String,
    /// The user's password.
    pub password: Secret,
    /// Project ID.
    pub project_id: String,
    /// Project name.
    pub project_name: String,
    /// Role names in the user's tokens; `admin` among them makes the user a Manila admin
    /// (admin-only calls and fields). By default a member, as a cloud's users are: use
    /// [`admin`](Self::admin) for what only an administrator may do.
    pub roles: Vec<String>,
    /// An application credential of the user, scoped to the project.
    pub application_credential: Option<ApplicationCredential>,
    /// A second user, in the same domain, to whom the user delegated its roles on the
    /// project through a trust: it gets trust-scoped tokens (`OS-TRUST:trust`).
    pub trustee: Option<Trustee>,
    /// The cloud's administrator: another user in the same domain with the `admin` role on
    /// the project (password auth only), for what a cloud operator does (reset-state,
    /// force-delete, extra specs, admin export locations).
    pub admin: Option<AdminUser>,
}

/// The cloud administrator's user (see [`Account::admin`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminUser {
    /// User ID.
    pub user_id: String,
    /// User name.
    pub user_name: String,
    /// Password.
    pub password: Secret,
}

impl Default for AdminUser {
    fn default() -> Self {
        Self {
            user_id: "a1d2m3i4n5e6f7a8b9c0d1e2f3a4b5c6".into(),
            user_name: "admin".into(),
            password: Secret::new("fake-admin-password"),
        }
    }
}

/// The roles of [`Account::admin`]'s tokens.
pub const ADMIN_ROLES: [&str; 3] = ["admin", "member", "reader"];

/// The trustee of a trust the account's user made on its project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Trustee {
    /// The trust's ID (what `os-trustID` names).
    pub trust_id: String,
    /// The trustee user's ID.
    pub user_id: String,
    /// The trustee user's name.
    pub user_name: String,
    /// The trustee user's password.
    pub password: Secret,
}

impl Default for Trustee {
    fn default() -> Self {
        Self {
            trust_id: "7d6c5b4a39284f1e8d7c6b5a49382716".into(),
            user_id: "2b3c4d5e6f708192a3b4c5d6e7f80912".into(),
            user_name: "csi-trustee".into(),
            password: Secret::new("fake-trustee-password"),
        }
    }
}

impl Default for Account {
    fn default() -> Self {
        Self {
            domain_id: "default".into(),
            domain_name: "Default".into(),
            user_id: "4f1b2c3d5e6f47a8b9c0d1e2f3a4b5c6".into(),
            user_name: "demo".into(),
            password: Secret::new("fake-password"),
            project_id: "9a8b7c6d5e4f43a2b1c0d9e8f7a6b5c4".into(),
            project_name: "demo".into(),
            roles: vec!["member".into(), "reader".into()],
            application_credential: Some(ApplicationCredential::default()),
            trustee: Some(Trustee::default()),
            admin: Some(AdminUser::default()),
        }
    }
}

impl Account {
    /// Whether the roles make the user an administrator.
    pub fn is_admin(&self) -> bool {
        self.roles.iter().any(|r| r == "admin")
    }

    /// The same project as the administrator (password auth as [`Account::admin`], the
    /// `admin` role), for a client that does what only a cloud operator may; `None` when
    /// the seed has no administrator.
    pub fn as_admin(&self) -> Option<Account> {
        let admin = self.admin.as_ref()?;
        Some(Account {
            user_id: admin.user_id.clone(),
            user_name: admin.user_name.clone(),
            password: admin.password.clone(),
            roles: ADMIN_ROLES.iter().map(|r| r.to_string()).collect(),
            application_credential: None,
            trustee: None,
            admin: None,
            ..self.clone()
        })
    }
}

/// An application credential (id + secret, or name + user + secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApplicationCredential {
    /// Credential ID.
    pub id: String,
    /// Credential name (unique per user).
    pub name: String,
    /// Credential secret.
    pub secret: Secret,
}

impl Default for ApplicationCredential {
    fn default() -> Self {
        Self {
            id: "0e1d2c3b4a5948e7a6b5c4d3e2f1a0b9".into(),
            name: "csi".into(),
            secret: Secret::new("fake-app-cred-secret"),
        }
    }
}
