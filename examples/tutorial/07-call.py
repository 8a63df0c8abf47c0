# test: -D N=64
# Lesson 07 (docs/tutorial/07-export.md): calling an exported kernel from Python with numpy.
#   teml export examples/tutorial/02-transformations.teml -D N=64 --kernel ikj_par_vec --name mm --out tutorial-out/mm_lib
#   python3 examples/tutorial/07-call.py tutorial-out/mm_lib [SIZE]
import sys

import numpy as np

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "tutorial-out/mm_lib")
import mm  # the module teml export wrote: ctypes over libmm.so, nothing to compile

n = int(sys.argv[2]) if len(sys.argv) > 2 else 100   # the sizes come from the arrays' shapes
A = mm.aligned_zeros((n, n))              # aligned arrays: full speed for wide vectors
B = mm.aligned_zeros((n, n))
A[:] = np.random.default_rng(0).random((n, n))
B[:] = np.random.default_rng(1).random((n, n))
C = mm.mm(A, B, mm.aligned_zeros((n, n)))  # returns the arrays the kernel writes: C
print("max |C - A @ B| =", np.abs(C - A @ B).max())
try:
    mm.mm(A, B[:, :50], mm.aligned_zeros((n, n)))   # a shape the sizes do not give
except ValueError as e:
    print("refused:", e)
