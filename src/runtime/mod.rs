//! Compiling, loading, running and timing generated kernels.
