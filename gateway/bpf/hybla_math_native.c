// SPDX-License-Identifier: GPL-2.0-only
/* Native build of hybla_math.h so the Rust tests exercise the exact code the BPF CC runs. */
#include <stdint.h>

typedef uint32_t __u32;
typedef uint64_t __u64;
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

#include "hybla_math.h"

__u32 perigee_hybla_rho_q16(__u32 rtt_us, __u32 rtt0_us)
{
	return hybla_rho_q16(rtt_us, rtt0_us);
}

__u64 perigee_hybla_ss_inc_q32(__u32 rho_q16)
{
	return hybla_ss_inc_q32(rho_q16);
}

__u64 perigee_hybla_ca_inc_q32(__u32 rho_q16, __u32 cwnd)
{
	return hybla_ca_inc_q32(rho_q16, cwnd);
}

__u32 perigee_hybla_initial_cwnd(__u32 iw, __u32 rho_q16, __u32 ceiling)
{
	return hybla_initial_cwnd(iw, rho_q16, ceiling);
}

void perigee_hybla_on_ack(__u32 *cwnd, __u32 *frac, __u32 ssthresh, __u32 rho_q16,
			  __u32 acked, __u32 ceiling)
{
	struct hybla_window w = { .cwnd = *cwnd, .frac = *frac };

	hybla_on_ack(&w, ssthresh, rho_q16, acked, ceiling);
	*cwnd = w.cwnd;
	*frac = w.frac;
}

__u32 perigee_hybla_effective_ceiling(__u32 snd_cwnd_clamp, __u32 cwnd_max)
{
	return hybla_effective_ceiling(snd_cwnd_clamp, cwnd_max);
}

__u32 perigee_hybla_undo(__u32 cwnd, __u32 prior_cwnd, __u32 ceiling)
{
	return hybla_undo(cwnd, prior_cwnd, ceiling);
}

__u32 perigee_hybla_ssthresh(__u32 cwnd)
{
	return hybla_ssthresh(cwnd);
}
