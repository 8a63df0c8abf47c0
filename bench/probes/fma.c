/* An independent peak FMA probe (AVX-512 intrinsics, not vector extensions): 16 independent
 * accumulators per thread, the best of 5 runs. Compare with `teml bench`'s FMA probe
 * (src/suite/roofline.rs); bench/independent_probes.sh runs both. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>

int main(void)
{
  long n = 20000000;
  double best = 0, sink = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = omp_get_wtime(), tot = 0;
    #pragma omp parallel reduction(+: tot)
    {
      __m512d x = _mm512_set1_pd(1.0000000001), y = _mm512_set1_pd(-1e-10), a[16];
      for (int k = 0; k < 16; k++)
        a[k] = _mm512_set1_pd(1.0 + k * 1e-8);
      for (long i = 0; i < n; i++) {
        #pragma GCC unroll 16
        for (int k = 0; k < 16; k++)
          a[k] = _mm512_fmadd_pd(a[k], x, y);
      }
      __m512d s = a[0];
      for (int k = 1; k < 16; k++)
        s = _mm512_add_pd(s, a[k]);
      tot += _mm512_reduce_add_pd(s);
    }
    double t = omp_get_wtime() - t0, gf = omp_get_max_threads() * (double)n * 16 * 8 * 2 / t / 1e9;
    best = gf > best ? gf : best;
    sink += tot;
  }
  printf("independent FMA probe: %.1f GFLOP/s on %d threads (%g)\n", best, omp_get_max_threads(), sink);
  return 0;
}
