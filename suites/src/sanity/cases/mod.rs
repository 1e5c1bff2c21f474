//! The cases, grouped as csi-sanity groups them.

mod expand;
mod group_controller;
mod identity;
mod modify;
mod node;
mod publish;
mod snapshots;
mod volumes;

use super::case::Case;

/// Every case of the suite, in csi-sanity's order of groups.
pub fn all() -> Vec<Case> {
    let mut cases = identity::cases();
    cases.extend(volumes::cases());
    cases.extend(publish::cases());
    cases.extend(snapshots::cases());
    cases.extend(expand::cases());
    cases.extend(modify::cases());
    cases.extend(group_controller::cases());
    cases.extend(node::cases());
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_names_are_unique() {
        let mut names: Vec<String> = all().iter().map(Case::name).collect();
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "duplicate case names");
    }
}
