/* helm written by hand, the path the issue measured: the six contractions and the division of
 * one element fused, the element loop on threads, the temporaries in N x N x N arrays local to
 * the element, loops in the order that reads no tensor transposed. E = 15000, N = 13 as
 * `teml bench`. Prints the best and median of 7 runs and a checksum. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef E
#define E 15000
#endif
#define N 13

typedef double cube[N][N][N];

static void helm(double S[N][N], double d[N], cube *u, cube *v)
{
  static double L[N][N][N];
  for (int a = 0; a < N; a++)
    for (int b = 0; b < N; b++)
      for (int c = 0; c < N; c++)
        L[a][b][c] = 1.0 / (d[a] + d[b] + d[c]);
  #pragma omp parallel for
  for (int e = 0; e < E; e++) {
    double x[N][N][N] = {{{0}}}, y[N][N][N] = {{{0}}};
    for (int a = 0; a < N; a++)            /* t1 = S_a u */
      for (int k = 0; k < N; k++)
        for (int b = 0; b < N; b++)
          for (int c = 0; c < N; c++)
            x[a][b][c] += S[a][k] * u[e][k][b][c];
    for (int a = 0; a < N; a++)            /* t2 = S_b t1 */
      for (int b = 0; b < N; b++)
        for (int k = 0; k < N; k++)
          for (int c = 0; c < N; c++)
            y[a][b][c] += S[b][k] * x[a][k][c];
    for (int a = 0; a < N; a++)            /* r = L * (S_c t2) */
      for (int b = 0; b < N; b++)
        for (int c = 0; c < N; c++) {
          double s = 0;
          for (int k = 0; k < N; k++)
            s += S[c][k] * y[a][b][k];
          x[a][b][c] = L[a][b][c] * s;
        }
    for (int a = 0; a < N; a++)            /* t4 = S^T_a r */
      for (int b = 0; b < N; b++)
        for (int c = 0; c < N; c++)
          y[a][b][c] = 0;
    for (int k = 0; k < N; k++)
      for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++)
          for (int c = 0; c < N; c++)
            y[a][b][c] += S[k][a] * x[k][b][c];
    for (int a = 0; a < N; a++)            /* t5 = S^T_b t4 */
      for (int b = 0; b < N; b++)
        for (int c = 0; c < N; c++)
          x[a][b][c] = 0;
    for (int a = 0; a < N; a++)
      for (int k = 0; k < N; k++)
        for (int b = 0; b < N; b++)
          for (int c = 0; c < N; c++)
            x[a][b][c] += S[k][b] * y[a][k][c];
    for (int a = 0; a < N; a++)            /* v = S^T_c t5 */
      for (int b = 0; b < N; b++) {
        for (int c = 0; c < N; c++)
          v[e][a][b][c] = 0;
        for (int k = 0; k < N; k++)
          for (int c = 0; c < N; c++)
            v[e][a][b][c] += S[k][c] * x[a][b][k];
      }
  }
}

static int cmp(const void *p, const void *q) { double a = *(double *)p, b = *(double *)q; return (a > b) - (a < b); }

int main(void)
{
  static double S[N][N], d[N];
  cube *u = malloc(sizeof(cube) * E), *v = malloc(sizeof(cube) * E);
  for (int i = 0; i < N; i++) {
    d[i] = 0.5 + i % 5 / 5.0;
    for (int j = 0; j < N; j++) S[i][j] = 0.5 + (i * 7 + j) % 11 / 11.0;
  }
  for (long k = 0; k < (long)E * N * N * N; k++) ((double *)u)[k] = 0.5 + k % 13 / 13.0;
  double ms[7];
  helm(S, d, u, v);
  for (int r = 0; r < 7; r++) {
    double t0 = omp_get_wtime();
    helm(S, d, u, v);
    ms[r] = (omp_get_wtime() - t0) * 1e3;
  }
  qsort(ms, 7, sizeof ms[0], cmp);
  double sum = 0;
  for (long k = 0; k < (long)E * N * N * N; k++) sum += ((double *)v)[k];
  printf("helm by hand (E=%d, N=%d, %d threads): best %.2f ms, median %.2f ms (checksum %.6e)\n", E, N,
         omp_get_max_threads(), ms[0], ms[3], sum);
  return 0;
}
