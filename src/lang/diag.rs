//! Located diagnostics: an error message with the file, line and column it points at, shown
//! the way rustc and Rhai show theirs.

use crate::error::Error;
use std::fmt;

/// An error with the place in the source it points at.
///
/// Its `Display` is
///
/// ```text
/// error: eq: argument 1 (tensor): unknown identifier `Q`
///  --> prog.teml:3:8
///   |
/// 3 | B = eq(Q, [i1, i2] -> [i2, i1])
///   |        ^
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    /// The file name given to the parser (`<repl>`, `prog.teml`, ...).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// The text of the line, without its line break.
    pub line_text: String,
    /// What went wrong.
    pub message: String,
    /// How many characters the marker underlines (at least 1).
    pub width: usize,
    /// The core error, when the failure came from a builtin (`None` for syntax errors).
    pub error: Option<Error>,
}

impl Located {
    /// A diagnostic pointing at byte offset `pos` of `src`, underlining `len` bytes (at least
    /// one character, at most to the end of the line). Offsets past the end point at the end;
    /// an offset inside a character points at that character.
    pub fn at(file: &str, src: &str, pos: usize, len: usize, message: impl Into<String>) -> Located {
        let mut pos = pos.min(src.len());
        while !src.is_char_boundary(pos) {
            pos -= 1;
        }
        let line_start = src[..pos].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[pos..].find('\n').map_or(src.len(), |i| pos + i);
        let line = src[..pos].matches('\n').count() + 1;
        let col = src[line_start..pos].chars().count() + 1;
        let mut end = pos.saturating_add(len).min(line_end);
        while !src.is_char_boundary(end) {
            end -= 1;
        }
        let width = src[pos..end].trim_end_matches('\r').chars().count().max(1);
        let line_text = src[line_start..line_end].trim_end_matches('\r').to_string();
        Located { file: file.to_string(), line, col, line_text, message: message.into(), width, error: None }
    }

    /// The same diagnostic, carrying the core error it reports.
    pub fn with_error(mut self, error: Error) -> Located {
        self.error = Some(error);
        self
    }
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let num = self.line.to_string();
        let pad = " ".repeat(num.len());
        // Tabs before the column stay tabs so that the marker lines up in a terminal.
        let lead: String = self
            .line_text
            .chars()
            .take(self.col.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        writeln!(f, "error: {}", self.message)?;
        writeln!(f, "{pad}--> {}:{}:{}", self.file, self.line, self.col)?;
        writeln!(f, "{pad} |")?;
        writeln!(f, "{num} | {}", self.line_text)?;
        write!(f, "{pad} | {lead}{}", "^".repeat(self.width.max(1)))
    }
}

impl std::error::Error for Located {}

impl From<Located> for crate::error::ProgramError {
    fn from(e: Located) -> Self {
        crate::error::ProgramError { message: e.to_string(), error: e.error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_and_width() {
        let src = "ab\r\ncd é f\nlast";
        let d = Located::at("f", src, 7, 3, "m");
        // Three bytes from `é`: `é` and a space.
        assert_eq!((d.line, d.col, d.width, d.line_text.as_str()), (2, 4, 2, "cd é f"));
        // Inside a character: that character. Past the end: the end.
        let d = Located::at("f", src, 8, 1, "m");
        assert_eq!((d.line, d.col), (2, 4));
        let d = Located::at("f", src, 999, 5, "m");
        assert_eq!((d.line, d.col, d.width, d.line_text.as_str()), (3, 5, 1, "last"));
        // The marker stops at the end of the line; the line break is not shown.
        let d = Located::at("f", src, 0, 100, "m");
        assert_eq!((d.line, d.col, d.width, d.line_text.as_str()), (1, 1, 2, "ab"));
        let d = Located::at("f", "", 0, 0, "m");
        assert_eq!(d.to_string(), "error: m\n --> f:1:1\n  |\n1 | \n  | ^");
    }
}
