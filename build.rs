//! Records the target triple so that the runtime can ask the `cc` crate for the C compiler
//! of the machine teml runs on.
fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "x86_64-unknown-linux-gnu".into());
    println!("cargo:rustc-env=TEML_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
