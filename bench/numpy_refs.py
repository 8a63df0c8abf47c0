"""numpy references of the bench kernels with several contractions, shared by
bench/tvm_kernels.py and bench/halide_mullapudi.py (each checks its tool's result against
them): the einsum chains of examples/interp.teml and examples/helm.teml."""

import numpy as np


def three_contractions(m, u):
    """"ad,edbc->eabc", then "bd,eadc->eabc", then "cd,eabd->eabc" with the matrix m."""
    t = np.einsum("ad,edbc->eabc", m, u, optimize=True)
    t = np.einsum("bd,eadc->eabc", m, t, optimize=True)
    return np.einsum("cd,eabd->eabc", m, t, optimize=True)


def interp(a, u):
    """examples/interp.teml: the three contractions with A."""
    return three_contractions(a, u)


def helm(s, d, u):
    """examples/helm.teml: the three contractions with S, times L = 1 / (d[a] + d[b] + d[c]),
    then the three contractions with S transposed."""
    L = 1.0 / (d[:, None, None] + d[None, :, None] + d[None, None, :])
    return three_contractions(s.T, L * three_contractions(s, u))
