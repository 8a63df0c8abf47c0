//! C code generation from loop nests.
