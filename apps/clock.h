/* Clocks for the benchmark tools. */
#ifndef ULS_APPS_CLOCK_H
#define ULS_APPS_CLOCK_H

/* Seconds on the monotonic clock, and this process's CPU seconds (user + system). */
double bench__now_s(void);
double bench__cpu_s(void);

#endif
