//! Ctrl-C as a request to stop the running compile or kernel, not the process.
//!
//! An interactive session calls [`catch`] once: from then on SIGINT only raises a flag. The
//! loops that wait for a child (the C compiler, the kernel worker) look at it with
//! [`requested`], stop their child and fail with [`super::RuntimeError::Interrupted`]; the
//! session clears it with [`clear`] before each command. Workers are started with the default
//! action (a handler is reset by `exec`), so the terminal's SIGINT also ends a kernel directly.
//! Processes that never call [`catch`] keep the default: Ctrl-C ends them.

use std::sync::atomic::{AtomicBool, Ordering};

static FLAG: AtomicBool = AtomicBool::new(false);
static CAUGHT: AtomicBool = AtomicBool::new(false);

/// From now on, SIGINT sets the flag instead of ending the process. Idempotent.
pub fn catch() -> std::io::Result<()> {
    if CAUGHT.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    signal_hook::flag::register(signal_hook::consts::SIGINT, &FLAG).map(|_| ())
}

/// This process catches Ctrl-C ([`catch`] was called).
pub fn caught() -> bool {
    CAUGHT.load(Ordering::SeqCst)
}

/// A Ctrl-C arrived since the last [`clear`] (only ever true after [`catch`]).
pub fn requested() -> bool {
    FLAG.load(Ordering::SeqCst)
}

/// Forgets an earlier Ctrl-C.
pub fn clear() {
    FLAG.store(false, Ordering::SeqCst);
}
