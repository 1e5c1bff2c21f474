//! The known name a misspelt key most likely meant: `persistance` → `persistence`,
//! `Capabilites` → `Capabilities`, `podstart` → `PodStart`.

/// The name in `known` closest to `word`: one differing only in case, else the nearest by
/// edit distance (a swap of two neighbours counts once) when it is close enough to be a typo.
pub(super) fn closest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    if let Some(same) = known.iter().find(|name| name.eq_ignore_ascii_case(word)) {
        return Some(same);
    }
    let length = word.chars().count();
    let allowed = if length <= 3 { 0 } else { (length / 4).max(1) };
    known
        .iter()
        .map(|name| (distance(word, name), *name))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// Edit distance between `a` and `b`, ignoring ASCII case, with transpositions (optimal
/// string alignment).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<char> = b.chars().map(|c| c.to_ascii_lowercase()).collect();
    // rows[i][j]: distance between a[..i] and b[..j].
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const KNOWN: &[&str] = &["persistence", "Capabilities", "PodStart", "RWX", "exec"];

    #[rstest]
    #[case("persistance", Some("persistence"))]
    #[case("persitsence", Some("persistence"))]
    #[case("Capabilites", Some("Capabilities"))]
    #[case("podstart", Some("PodStart"))]
    #[case("rwx", Some("RWX"))]
    #[case("exex", Some("exec"))]
    #[case("RWO", None)]
    #[case("ShortName", None)]
    fn close_names_are_suggested(#[case] word: &str, #[case] expected: Option<&str>) {
        assert_eq!(closest(word, KNOWN), expected);
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("ab", "ba"), 1);
        assert_eq!(distance("", "abc"), 3);
    }
}
