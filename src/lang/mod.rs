//! The `.teml` front-end: the paper's syntax (pest) and its evaluation through the builtin table.
