// SPDX-License-Identifier: GPL-2.0-only
/* Native build of hybla_math.h so the Rust tests exercise the exact code the BPF CC runs. */
#include <stdint.h>

typedef uint16_t __u16;
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

__u32 perigee_hybla_ld_rho_q16(__u32 rtt_us, __u32 rtt0_us)
{
	return hybla_ld_rho_q16(rtt_us, rtt0_us);
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

/* hybla_ld */

__u32 perigee_hybla_ld_queue_thresh_us(__u32 min_rtt_us)
{
	return hybla_ld_queue_thresh_us(min_rtt_us);
}

__u32 perigee_hybla_ld_bw_q24(__u32 delivered, __u64 elapsed_us)
{
	return hybla_ld_bw_q24(delivered, elapsed_us);
}

__u32 perigee_hybla_ld_window(__u32 bw_q24, __u32 t_us)
{
	return hybla_ld_window(bw_q24, t_us);
}

__u64 perigee_hybla_ld_round_len(__u32 min_rtt_us)
{
	return hybla_ld_round_len(min_rtt_us);
}

int perigee_hybla_ld_standing_queue(__u32 round_min_rtt_us, __u32 min_rtt_us)
{
	return hybla_ld_standing_queue(round_min_rtt_us, min_rtt_us);
}

void perigee_hybla_ld_round_start(struct hybla_ld_round *r, __u64 now_us, __u32 carried)
{
	hybla_ld_round_start(r, now_us, carried);
}

int perigee_hybla_ld_round_update(struct hybla_ld_round *r, __u64 now_us, __u32 carried,
				  int rtt_us, __u32 min_rtt_us)
{
	return hybla_ld_round_update(r, now_us, carried, rtt_us, min_rtt_us);
}

int perigee_hybla_ld_queue_now(const struct hybla_ld_round *r, __u32 min_rtt_us)
{
	return hybla_ld_queue_now(r, min_rtt_us);
}

__u32 perigee_hybla_ld_streak_end(struct hybla_ld_streak *s, int queue, __u32 cwnd, int settled)
{
	return hybla_ld_streak_end(s, queue, cwnd, settled);
}

void perigee_hybla_ld_streak_cut(struct hybla_ld_streak *s, __u32 cwnd, __u32 bw_q24,
				 __u32 min_rtt_us)
{
	hybla_ld_streak_cut(s, cwnd, bw_q24, min_rtt_us);
}

int perigee_hybla_ld_may_cut(struct hybla_ld_round *r, __u64 now_us)
{
	return hybla_ld_may_cut(r, now_us);
}

__u32 perigee_hybla_ld_ssthresh(__u32 cwnd, int queue, __u32 bw_q24, __u32 min_rtt_us,
				__u32 rho_q16, __u32 ceiling)
{
	return hybla_ld_ssthresh(cwnd, queue, bw_q24, min_rtt_us, rho_q16, ceiling);
}

__u32 perigee_hybla_ld_queue_cut(__u32 cwnd, __u32 bw_q24, __u32 min_rtt_us)
{
	return hybla_ld_queue_cut(cwnd, bw_q24, min_rtt_us);
}

__u32 perigee_hybla_ld_in_flight(__u32 packets_out, __u32 sacked_out, __u32 lost_out,
				 __u32 retrans_out)
{
	return hybla_ld_in_flight(packets_out, sacked_out, lost_out, retrans_out);
}

__u32 perigee_hybla_ld_recovery_cwnd(__u32 in_flight, __u32 target, __u32 prior_cwnd,
				     __u32 prr_delivered, __u32 prr_out)
{
	return hybla_ld_recovery_cwnd(in_flight, target, prior_cwnd, prr_delivered, prr_out);
}

__u64 perigee_hybla_ld_pacing_rate(__u32 mss, __u32 cwnd, __u32 packets_out, __u32 ssthresh,
				   __u32 srtt_us8, __u64 max_rate)
{
	return hybla_ld_pacing_rate(mss, cwnd, packets_out, ssthresh, srtt_us8, max_rate);
}
