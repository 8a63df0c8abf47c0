/* An independent peak FMA probe (intrinsics, not vector extensions): the target's widest FMA
 * vectors, as many independent accumulators per thread as its register file holds beside the
 * multiplier and the addend (16 zmm of 32 with AVX-512, 12 ymm of 16 with AVX2 and FMA), the best
 * of 5 runs. Compare with `teml bench`'s FMA probe (src/suite/instructions.rs);
 * bench/independent_probes.sh runs both. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>

#if defined(__AVX512F__)
typedef __m512d vec;
#define LANES 8
#define CHAINS 16
#define SET1 _mm512_set1_pd
#define FMADD _mm512_fmadd_pd
#define ADD _mm512_add_pd
#define STORE _mm512_storeu_pd
#elif defined(__FMA__)
typedef __m256d vec;
#define LANES 4
#define CHAINS 12
#define SET1 _mm256_set1_pd
#define FMADD _mm256_fmadd_pd
#define ADD _mm256_add_pd
#define STORE _mm256_storeu_pd
#else
#error "the FMA probe needs FMA instructions (AVX2 and FMA, or AVX-512)"
#endif

int main(void)
{
  long n = 20000000;
  double best = 0, sink = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = omp_get_wtime(), tot = 0;
    #pragma omp parallel reduction(+: tot)
    {
      vec x = SET1(1.0000000001), y = SET1(-1e-10), a[CHAINS];
      for (int k = 0; k < CHAINS; k++)
        a[k] = SET1(1.0 + k * 1e-8);
      for (long i = 0; i < n; i++) {
        #pragma GCC unroll 16
        for (int k = 0; k < CHAINS; k++)
          a[k] = FMADD(a[k], x, y);
      }
      vec s = a[0];
      for (int k = 1; k < CHAINS; k++)
        s = ADD(s, a[k]);
      double l[LANES];
      STORE(l, s);
      for (int k = 0; k < LANES; k++)
        tot += l[k];
    }
    double t = omp_get_wtime() - t0, gf = omp_get_max_threads() * (double)n * CHAINS * LANES * 2 / t / 1e9;
    best = gf > best ? gf : best;
    sink += tot;
  }
  printf("independent FMA probe: %.1f GFLOP/s on %d threads (%g)\n", best, omp_get_max_threads(), sink);
  return 0;
}
