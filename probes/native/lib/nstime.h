/* SPDX-License-Identifier: Apache-2.0 */
/*
 * nstime.h - time in u64 nanoseconds for the programs of probes/native
 *
 * Every time value these programs keep is a u64 count of ns (the ring's
 * CLOCK_MONOTONIC ticks); struct timespec appears only at the system calls.
 */
#ifndef IRQLAB_NATIVE_NSTIME_H
#define IRQLAB_NATIVE_NSTIME_H

#include <time.h>

#include "types.h"

#define NS_PER_SEC		1000000000ULL

/* ts_to_ns - @ts as ns */
static inline u64 ts_to_ns(const struct timespec *ts)
{
	return (u64)ts->tv_sec * NS_PER_SEC + (u64)ts->tv_nsec;
}

/* ns_to_ts - @ns as a timespec in @ts */
static inline void ns_to_ts(u64 ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / NS_PER_SEC);
	ts->tv_nsec = (long)(ns % NS_PER_SEC);
}

/* monotonic_ns - CLOCK_MONOTONIC now, in ns */
static inline u64 monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_to_ns(&ts);
}

/* sleep_until_ns - sleep to CLOCK_MONOTONIC @deadline_ns; 0 or -errno (-EINTR) */
static inline int sleep_until_ns(u64 deadline_ns)
{
	struct timespec ts;

	ns_to_ts(deadline_ns, &ts);
	return -clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

/*
 * period_advance - move @next_ns one @period_ns on, and when that is not after
 * @now_ns (woke a whole period late) on to the next future multiple; the
 * periods skipped (0 when on time)
 */
static inline u64 period_advance(u64 *next_ns, u64 now_ns, u64 period_ns)
{
	u64 skipped;

	*next_ns += period_ns;
	if (*next_ns > now_ns)
		return 0;
	skipped = (now_ns - *next_ns) / period_ns + 1;
	*next_ns += skipped * period_ns;
	return skipped;
}

#endif /* IRQLAB_NATIVE_NSTIME_H */
