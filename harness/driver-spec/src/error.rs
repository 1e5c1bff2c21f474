//! The one error of this module: a spec (or class) file that cannot be read, or a mistake in
//! it, with the file, line, column and key path.

use std::path::{Path, PathBuf};

use super::locate::{Position, locate};
use super::reader::Issue;

/// Why a driver spec file, or a class file it names, was refused.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{}: cannot read the file", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML or JSON, or holds something upstream's decoder would refuse
    /// or silently ignore: `file:line:column: Key.Path: message`.
    #[error("{}:{line}:{column}: {}{message}", file.display(), prefix(key_path))]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The column, from 1.
        column: usize,
        /// The dotted key path (`DriverInfo.Capabilities.block`, `InlineVolumes[0]`); empty
        /// for the document as a whole.
        key_path: String,
        /// What is wrong.
        message: String,
    },
}

fn prefix(key_path: &str) -> String {
    if key_path.is_empty() {
        String::new()
    } else {
        format!("{key_path}: ")
    }
}

impl SpecError {
    /// The file at fault.
    pub fn file(&self) -> &Path {
        match self {
            SpecError::Read { file, .. } | SpecError::Invalid { file, .. } => file,
        }
    }

    /// The error for `issue`, located in `text`, the content of `file`.
    pub(super) fn at(issue: Issue, text: &str, file: &Path) -> Self {
        let Position { line, column } = locate(text, &issue.at, issue.target);
        SpecError::Invalid {
            file: file.to_owned(),
            line,
            column,
            key_path: issue.shown,
            message: issue.message,
        }
    }

    /// An error of the whole file, at its start.
    pub(super) fn whole_file(file: &Path, message: impl Into<String>) -> Self {
        SpecError::Invalid {
            file: file.to_owned(),
            line: Position::START.line,
            column: Position::START.column,
            key_path: String::new(),
            message: message.into(),
        }
    }

    /// An error serde_yaml reported for `file`, with its location taken out of its message.
    pub(super) fn from_yaml(file: &Path, text: &str, error: &serde_yaml::Error) -> Self {
        let mut message = error.to_string();
        let Position { line, column } = match error.location() {
            Some(location) => {
                let at = format!(" at line {} column {}", location.line(), location.column());
                message = message.replacen(&at, "", 1);
                Position {
                    line: location.line(),
                    column: location.column(),
                }
            }
            None if message.contains("more than one document") => {
                message = "the file holds more than one YAML document; it must hold one".into();
                second_document(text).unwrap_or(Position::START)
            }
            None => Position::START,
        };
        SpecError::Invalid {
            file: file.to_owned(),
            line,
            column,
            key_path: String::new(),
            message,
        }
    }
}

/// The `---` that starts a second document, which serde_yaml does not locate.
fn second_document(text: &str) -> Option<Position> {
    let mut content = false;
    for (index, line) in text.lines().enumerate() {
        let marker = line
            .strip_prefix("---")
            .filter(|rest| rest.is_empty() || rest.starts_with([' ', '\t']));
        match marker {
            Some(_) if content => {
                return Some(Position {
                    line: index + 1,
                    column: 1,
                });
            }
            Some(rest) => content = !rest.trim().is_empty() && !rest.trim().starts_with('#'),
            None => {
                let line = line.trim();
                if !(line.is_empty()
                    || line.starts_with('#')
                    || line.starts_with('%')
                    || line == "...")
                {
                    content = true;
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn messages_read_file_line_column_key_path() {
        let error = SpecError::Invalid {
            file: "testdriver.yaml".into(),
            line: 12,
            column: 5,
            key_path: "DriverInfo.Capabilities.persistance".into(),
            message: r#"unknown capability; did you mean "persistence"?"#.into(),
        };
        assert_eq!(
            error.to_string(),
            r#"testdriver.yaml:12:5: DriverInfo.Capabilities.persistance: unknown capability; did you mean "persistence"?"#
        );
        let whole = SpecError::whole_file(Path::new("x.json"), "the file is empty");
        assert_eq!(whole.to_string(), "x.json:1:1: the file is empty");
    }

    #[test]
    fn the_second_document_is_found() {
        let at = |text| second_document(text).map(|p| p.line);
        assert_eq!(at("---\na: 1\n---\nb: 2\n"), Some(3));
        assert_eq!(at("# c\n--- # first\na: 1\n...\n---\n"), Some(5));
        assert_eq!(at("--- {a: 1}\n--- {b: 2}\n"), Some(2));
        assert_eq!(at("a: 1\n"), None);
    }
}
