//! ListVolumes and ListSnapshots paging: the starting token is an index into the list.

use crate::error::{Error, Result};

/// One page of `items` from `starting_token` (an index) with at most `max_entries`.
pub fn page<T>(items: Vec<T>, starting_token: &str, max_entries: i32) -> Result<(Vec<T>, String)> {
    let start: usize = if starting_token.is_empty() {
        0
    } else {
        starting_token.parse().map_err(|_| {
            Error::Aborted(format!(
                "starting_token {starting_token:?} is not one this driver gave"
            ))
        })?
    };
    if start > items.len() {
        return Err(Error::Aborted(format!(
            "starting_token {starting_token:?} is past the end of the list"
        )));
    }
    let count = if max_entries > 0 {
        max_entries as usize
    } else {
        usize::MAX
    };
    let end = start.saturating_add(count).min(items.len());
    let next = if end < items.len() {
        end.to_string()
    } else {
        String::new()
    };
    Ok((
        items.into_iter().skip(start).take(end - start).collect(),
        next,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_the_token() -> Result<()> {
        let (first, next) = page(vec![1, 2, 3], "", 2)?;
        assert_eq!((first, next.as_str()), (vec![1, 2], "2"));
        let (rest, next) = page(vec![1, 2, 3], "2", 2)?;
        assert_eq!((rest, next.as_str()), (vec![3], ""));
        assert!(matches!(page(vec![1], "x", 0), Err(Error::Aborted(_))));
        assert!(matches!(page(vec![1], "5", 0), Err(Error::Aborted(_))));
        Ok(())
    }
}
