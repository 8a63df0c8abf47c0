/* blur (N=8192) by hand, plain stores against non-temporal stores (_mm512_stream_pd after peeling each row of B to 64-byte alignment): what a store that skips the read for ownership would give teml (issue 20, bench/RESULTS.md). Needs AVX-512F. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include <sys/mman.h>
#define N 8192
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void plain(double (*restrict A)[N], double (*restrict B)[N-2]) {
  #pragma omp parallel for
  for (int i = 0; i <= N-3; i++)
    #pragma omp simd
    for (int j = 0; j <= N-3; j++)
      B[i][j] = (A[i][j]+A[i][j+1]+A[i][j+2]+A[i+1][j]+A[i+1][j+1]+A[i+1][j+2]+A[i+2][j]+A[i+2][j+1]+A[i+2][j+2])/9.0;
}
static void nt(double (*restrict A)[N], double (*restrict B)[N-2]) {
  #pragma omp parallel for
  for (int i = 0; i <= N-3; i++) {
    int j = 0;
    double *row = &B[i][0];
    for (; j <= N-3 && ((size_t)(row + j) & 63); j++)
      B[i][j] = (A[i][j]+A[i][j+1]+A[i][j+2]+A[i+1][j]+A[i+1][j+1]+A[i+1][j+2]+A[i+2][j]+A[i+2][j+1]+A[i+2][j+2])/9.0;
    for (; j + 7 <= N-3; j += 8) {
      __m512d s = _mm512_loadu_pd(&A[i][j]);
      s += _mm512_loadu_pd(&A[i][j+1]); s += _mm512_loadu_pd(&A[i][j+2]);
      s += _mm512_loadu_pd(&A[i+1][j]); s += _mm512_loadu_pd(&A[i+1][j+1]); s += _mm512_loadu_pd(&A[i+1][j+2]);
      s += _mm512_loadu_pd(&A[i+2][j]); s += _mm512_loadu_pd(&A[i+2][j+1]); s += _mm512_loadu_pd(&A[i+2][j+2]);
      _mm512_stream_pd(&B[i][j], s / _mm512_set1_pd(9.0));
    }
    for (; j <= N-3; j++)
      B[i][j] = (A[i][j]+A[i][j+1]+A[i][j+2]+A[i+1][j]+A[i+1][j+1]+A[i+1][j+2]+A[i+2][j]+A[i+2][j+1]+A[i+2][j+2])/9.0;
  }
  _mm_sfence();
}
int main(){
  size_t na=sizeof(double[N][N]), nb=sizeof(double[N-2][N-2]);
  double (*A)[N]=mmap(0,na,3,0x22,-1,0); double (*B)[N-2]=mmap(0,nb,3,0x22,-1,0);
  madvise(A,na,MADV_HUGEPAGE); madvise(B,nb,MADV_HUGEPAGE);
  for(size_t k=0;k<(size_t)N*N;k++) ((double*)A)[k]=1.0+(k%7);
  memset(B,0,nb);
  for(int v=0; v<2; v++){
    double best=1e9, tot=0; int reps=15;
    for(int r=0;r<reps;r++){double t=now(); if(v) nt(A,B); else plain(A,B); t=now()-t; if(t<best)best=t; tot+=t;}
    printf("%s: best %.2f ms, mean %.2f ms, counted %.1f GB/s\n", v?"non-temporal":"plain", best*1e3, tot/reps*1e3, (na+nb)/best/1e9);
  }
  printf("check %f\n", B[100][100]);
}
