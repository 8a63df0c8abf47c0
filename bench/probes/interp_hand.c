/* interp written by hand, the path the issue measured: the three contractions of one element
 * fused, the element loop on threads, the two temporaries in N x N x N arrays local to the
 * element, loops a, d, b, c (no access transposed). E = 200000, N = 7 as `teml bench`. Prints
 * the best and median of 7 runs and a checksum. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef E
#define E 200000
#endif
#define N 7

static void interp(double A[N][N], double (*u)[N][N][N], double (*v)[N][N][N])
{
  #pragma omp parallel for
  for (int e = 0; e < E; e++) {
    double t[N][N][N] = {{{0}}}, w[N][N][N] = {{{0}}};
    for (int a = 0; a < N; a++)
      for (int d = 0; d < N; d++)
        for (int b = 0; b < N; b++)
          for (int c = 0; c < N; c++)
            t[a][b][c] += A[a][d] * u[e][d][b][c];
    for (int a = 0; a < N; a++)
      for (int b = 0; b < N; b++)
        for (int d = 0; d < N; d++)
          for (int c = 0; c < N; c++)
            w[a][b][c] += A[b][d] * t[a][d][c];
    for (int a = 0; a < N; a++)
      for (int b = 0; b < N; b++)
        for (int c = 0; c < N; c++) {
          double s = 0;
          for (int d = 0; d < N; d++)
            s += A[c][d] * w[a][b][d];
          v[e][a][b][c] = s;
        }
  }
}

static int cmp(const void *x, const void *y) { double a = *(double *)x, b = *(double *)y; return (a > b) - (a < b); }

int main(void)
{
  static double A[N][N];
  double (*u)[N][N][N] = malloc(sizeof(double[E][N][N][N]));
  double (*v)[N][N][N] = malloc(sizeof(double[E][N][N][N]));
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) A[i][j] = 0.5 + (i * 7 + j) % 11 / 11.0;
  for (long k = 0; k < (long)E * N * N * N; k++) ((double *)u)[k] = 0.5 + k % 13 / 13.0;
  double ms[7];
  interp(A, u, v);
  for (int r = 0; r < 7; r++) {
    double t0 = omp_get_wtime();
    interp(A, u, v);
    ms[r] = (omp_get_wtime() - t0) * 1e3;
  }
  qsort(ms, 7, sizeof ms[0], cmp);
  double sum = 0;
  for (long k = 0; k < (long)E * N * N * N; k++) sum += ((double *)v)[k];
  printf("interp by hand (E=%d, N=%d, %d threads): best %.2f ms, median %.2f ms (checksum %.6e)\n", E, N,
         omp_get_max_threads(), ms[0], ms[3], sum);
  return 0;
}
