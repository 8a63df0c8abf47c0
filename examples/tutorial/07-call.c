// test: -D N=64
// Lesson 07 (docs/tutorial/07-export.md): calling an exported kernel from C.
//   teml export examples/tutorial/02-transformations.teml -D N=64 --kernel ikj_par_vec --name mm --out tutorial-out/mm_lib
//   cc examples/tutorial/07-call.c $(pkg-config --cflags --libs tutorial-out/mm_lib/mm.pc) -o tutorial-out/call
//   ./tutorial-out/call 100
#include <stdio.h>
#include <stdlib.h>
#include "mm.h"

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 100;       /* any size: the header says 1 <= N <= ... */
    double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n),
           *C = malloc(sizeof(double) * n * n);
    for (int64_t i = 0; i < n * n; i++) { A[i] = 1.0; B[i] = 2.0; }   /* row-major, contiguous */
    int rc = mm(n, A, B, C);                            /* sizes first, then one pointer per tensor */
    if (rc != TEML_OK) { fprintf(stderr, "mm refused the call: %d\n", rc); return 1; }
    printf("C[0][0] = %g (expected %g)\n", C[0], 2.0 * (double)n);
    printf("mm(0, ...) returns %d (TEML_ERR_SIZE)\n", mm(0, A, B, C));
    free(A); free(B); free(C);
    return 0;
}
