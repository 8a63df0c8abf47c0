/* An independent STREAM triad a = b + 3c over three arrays of `MiB` MiB each (default 256),
 * placed four ways: 0 separate mallocs, 1 back to back in one /dev/shm mapping (what teml's
 * runtime did before buffers were staggered), 2 the same staggered by 576 bytes a buffer (what
 * it does now), 3 separate 2 MiB-aligned allocations with MADV_HUGEPAGE. First touch is
 * parallel (the timed loop's schedule); best and mean of 10 runs. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
  int mode = argc > 1 ? atoi(argv[1]) : 0;
  long mib = argc > 2 ? atol(argv[2]) : 256, n = mib << 17;
  size_t bytes = n * sizeof(double);
  double *a, *b, *c;
  if (mode == 0) {
    a = malloc(bytes); b = malloc(bytes); c = malloc(bytes);
  } else if (mode == 3) {
    a = aligned_alloc(1 << 21, bytes); b = aligned_alloc(1 << 21, bytes); c = aligned_alloc(1 << 21, bytes);
    madvise(a, bytes, MADV_HUGEPAGE); madvise(b, bytes, MADV_HUGEPAGE); madvise(c, bytes, MADV_HUGEPAGE);
  } else {
    size_t step = bytes + (mode == 2 ? 576 : 0);
    char path[] = "/dev/shm/teml-triad-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || unlink(path) || ftruncate(fd, 3 * step + 4096)) { perror("shm"); return 2; }
    char *m = mmap(0, 3 * step + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { perror("mmap"); return 2; }
    a = (double *)m; b = (double *)(m + step); c = (double *)(m + 2 * step);
  }
  if (!a || !b || !c) { fputs("out of memory\n", stderr); return 2; }
  #pragma omp parallel for schedule(static)
  for (long i = 0; i < n; i++) { a[i] = 0; b[i] = 1; c[i] = 2; }
  double best = 1e30, total = 0;
  for (int r = 0; r < 10; r++) {
    double t0 = omp_get_wtime();
    #pragma omp parallel for simd schedule(static)
    for (long i = 0; i < n; i++)
      a[i] = b[i] + 3.0 * c[i];
    double t = omp_get_wtime() - t0;
    best = t < best ? t : best;
    total += t;
  }
  printf("triad, placement %d, 3 x %ld MiB: best %.1f GB/s, mean %.1f GB/s\n", mode, mib,
         24.0 * n / best / 1e9, 24.0 * n / (total / 10) / 1e9);
  return a[7] != 7.0;
}
