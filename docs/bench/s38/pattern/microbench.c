#include "apps/pattern.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(void){
  static unsigned char buf[65536];
  uint64_t off=0; double t0=now(); unsigned long bad=0;
  for(int i=0;i<16384;i++){ bench__pattern_fill(7,off,buf,65536); off+=65536;}
  double t1=now(); off=0;
  for(int i=0;i<16384;i++){ bench__pattern_fill(7,off,buf,65536); off+=65536;}
  double t2=now(); off=0;
  /* check only: fill once per 64 KiB outside timing is not possible; time fill+check */
  for(int i=0;i<16384;i++){ bench__pattern_fill(7,off,buf,65536); bad+= bench__pattern_check(7,off,buf,65536)!=UINT64_MAX; off+=65536;}
  double t3=now();
  printf("fill %.3f s/GB, fill+check %.3f s/GB, bad %lu\n",(t2-t1),(t3-t2),bad);
  return 0;}
