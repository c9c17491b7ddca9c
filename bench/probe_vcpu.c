/* How much of a second vCPU there is right now (bench/NOTES.md): before trusting a 2-thread figure on a
   shared VM. Each thread runs a latency-bound integer multiply chain (one instruction in flight: two free cores, or
   two SMT siblings, run it in one thread's time); the seconds per thread are printed. Equal times for 1 and 2 threads:
   two CPUs free; 2 threads at about twice the 1-thread time: one CPU's worth (another job holds the other).

       gcc -O2 -pthread -o /tmp/probe_vcpu bench/probe_vcpu.c
       /tmp/probe_vcpu 1; /tmp/probe_vcpu 2
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STEPS 200000000L

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile unsigned long sink;

static void* chain(void* arg) {
    unsigned long y = (unsigned long)(size_t)arg + 1;
    double t0 = now();
    for (long k = 0; k < STEPS; k++)
        y = y * 6364136223846793005UL + 1442695040888963407UL;
    sink = y;
    printf("%.3f s\n", now() - t0);
    return NULL;
}

int main(int argc, char** argv) {
    int nt = argc > 1 ? atoi(argv[1]) : 2;
    pthread_t th[64];
    if (nt < 1 || nt > 64) {
        fprintf(stderr, "threads: 1 to 64\n");
        return 1;
    }
    for (int i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, chain, (void*)(size_t)i);
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    return 0;
}
