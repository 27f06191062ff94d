/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * TCP Hybla fixed-point math (Caini & Firrincieli, 2004), shared verbatim by the BPF
 * congestion control (hybla.bpf.c) and the native test shim (hybla_math_native.c), so the
 * code the verifier loads is the code the Rust tests check against the f64 model.
 *
 * Units:
 *   rho      Q16   (1 << 16 == 1.0), rho = max(RTT / RTT0, 1), capped at HYBLA_RHO_MAX
 *   cwnd     whole segments (u32), as the kernel keeps it
 *   frac     Q32   fraction of a segment carried between ACKs (0 <= frac < 1 segment)
 *   inc      Q32   per-ACKed-segment increment, u64
 *
 * No loops, no tables, no division by values that can be zero: the verifier accepts it
 * and the native build behaves identically.
 *
 * Requires __u32/__u64 and __always_inline from the includer.
 */
#ifndef PERIGEE_HYBLA_MATH_H
#define PERIGEE_HYBLA_MATH_H

#define HYBLA_RHO_SHIFT 16
#define HYBLA_RHO_ONE (1U << HYBLA_RHO_SHIFT)
/* rho ceiling: 256 x RTT0 (6.4 s at 25 ms); keeps rho^2 in Q32 below 2^48. */
#define HYBLA_RHO_MAX_INT 256U
#define HYBLA_FRAC_SHIFT 32
/* Explicit cwnd ceiling, segments (the socket's snd_cwnd_clamp also applies). */
#define HYBLA_CWND_CEILING 65536U
/* At most this many segments per ACK are credited (stretch ACKs); keeps products < 2^63. */
#define HYBLA_ACKED_MAX 16384U
#define HYBLA_RTT0_DEFAULT_US 25000U

/* 2^f - 1 for f in [0,1) (Q16 in), Q30 out: degree-4 least-squares polynomial, rel. error
 * below 5e-6 over [0,1). Coefficients are c_k * 2^30. */
#define HYBLA_EXP2_C1 744123089ULL
#define HYBLA_EXP2_C2 259206396ULL
#define HYBLA_EXP2_C3 55913963ULL
#define HYBLA_EXP2_C4 14488509ULL

/* rho in Q16 from an RTT and RTT0, both in microseconds. rtt0_us == 0 means the default. */
static __always_inline __u32 hybla_rho_q16(__u32 rtt_us, __u32 rtt0_us)
{
	__u64 rho;

	if (rtt0_us == 0)
		rtt0_us = HYBLA_RTT0_DEFAULT_US;
	if (rtt_us <= rtt0_us)
		return HYBLA_RHO_ONE;
	rho = ((__u64)rtt_us << HYBLA_RHO_SHIFT) / rtt0_us;
	if (rho > ((__u64)HYBLA_RHO_MAX_INT << HYBLA_RHO_SHIFT))
		rho = (__u64)HYBLA_RHO_MAX_INT << HYBLA_RHO_SHIFT;
	return (__u32)rho;
}

/* 2^f for the fractional part f (Q16), result Q30 in [2^30, 2^31). Horner in 64 bits. */
static __always_inline __u64 hybla_exp2_frac_q30(__u32 f_q16)
{
	__u64 f = f_q16 & 0xffffU;
	__u64 acc = HYBLA_EXP2_C4;

	acc = HYBLA_EXP2_C3 + ((acc * f) >> 16);
	acc = HYBLA_EXP2_C2 + ((acc * f) >> 16);
	acc = HYBLA_EXP2_C1 + ((acc * f) >> 16);
	acc = (acc * f) >> 16;
	return (1ULL << 30) + acc;
}

/*
 * Slow-start increment per ACKed segment, 2^rho - 1, in Q32. Returns 0 when the value would
 * reach the cwnd ceiling anyway (integer part of rho >= 16): callers treat 0 as "saturate".
 */
static __always_inline __u64 hybla_ss_inc_q32(__u32 rho_q16)
{
	__u32 ip = rho_q16 >> HYBLA_RHO_SHIFT;
	__u64 pow_q30;

	if (ip >= 16)
		return 0;
	pow_q30 = hybla_exp2_frac_q30(rho_q16) << ip; /* < 2^47 */
	return (pow_q30 << 2) - (1ULL << HYBLA_FRAC_SHIFT);
}

/*
 * Congestion-avoidance increment per ACKed segment, rho^2 / cwnd, in Q32, rounded up so a
 * full window of ACKs adds at least rho^2 (rho = 1: exactly Reno's +1 per window).
 */
static __always_inline __u64 hybla_ca_inc_q32(__u32 rho_q16, __u32 cwnd)
{
	__u64 rho2_q32 = (__u64)rho_q16 * rho_q16; /* <= 2^48 */

	if (cwnd == 0)
		cwnd = 1;
	return (rho2_q32 + cwnd - 1) / cwnd;
}

/*
 * The ceiling every cwnd update respects: the built-in HYBLA_CWND_CEILING, the socket's
 * snd_cwnd_clamp (route `cwnd lock`, TCP_WINDOW_CLAMP) and the operator's cwnd_max (0 = none).
 * At GEO rho ~ 24 one slow-start ACK reaches it, so the operator's value is what bounds the
 * first burst. Never below 1.
 */
static __always_inline __u32 hybla_effective_ceiling(__u32 snd_cwnd_clamp, __u32 cwnd_max)
{
	__u32 c = HYBLA_CWND_CEILING;

	if (snd_cwnd_clamp < c)
		c = snd_cwnd_clamp;
	if (cwnd_max != 0 && cwnd_max < c)
		c = cwnd_max;
	return c ? c : 1;
}

/* Initial window: the stack's initial window scaled by rho, within [iw, ceiling]. */
static __always_inline __u32 hybla_initial_cwnd(__u32 iw, __u32 rho_q16, __u32 ceiling)
{
	__u64 w = ((__u64)iw * rho_q16) >> HYBLA_RHO_SHIFT;

	if (w < iw)
		w = iw;
	if (w > ceiling)
		w = ceiling;
	return (__u32)w;
}

struct hybla_window {
	__u32 cwnd;
	__u32 frac; /* Q32 fraction of a segment */
};

/*
 * One ACK crediting `acked` segments. Below ssthresh: slow start (2^rho - 1 per segment,
 * capped at ssthresh). At or above: congestion avoidance (rho^2 / cwnd per segment). The
 * sub-segment remainder is carried in w->frac. cwnd never exceeds `ceiling` (>= 1).
 */
static __always_inline void hybla_on_ack(struct hybla_window *w, __u32 ssthresh,
					  __u32 rho_q16, __u32 acked, __u32 ceiling)
{
	__u64 inc, total, cwnd = w->cwnd;
	int slow_start = w->cwnd < ssthresh;

	if (ceiling > HYBLA_CWND_CEILING)
		ceiling = HYBLA_CWND_CEILING;
	if (ceiling == 0)
		ceiling = 1;
	if (acked > HYBLA_ACKED_MAX)
		acked = HYBLA_ACKED_MAX;
	if (cwnd == 0)
		cwnd = 1;

	if (slow_start) {
		inc = hybla_ss_inc_q32(rho_q16);
		if (inc == 0 || (inc >> HYBLA_FRAC_SHIFT) >= ceiling) {
			cwnd = ceiling; /* 2^rho alone reaches the ceiling */
			total = 0;
		} else {
			total = (__u64)w->frac + inc * acked; /* < 2^32 + 2^48 * 2^14 */
			cwnd += total >> HYBLA_FRAC_SHIFT;
		}
		if (cwnd >= ssthresh) {
			cwnd = ssthresh; /* leave slow start exactly at ssthresh */
			total = 0;
		}
	} else {
		inc = hybla_ca_inc_q32(rho_q16, (__u32)cwnd);
		total = (__u64)w->frac + inc * acked;
		cwnd += total >> HYBLA_FRAC_SHIFT;
	}
	if (cwnd >= ceiling) {
		cwnd = ceiling;
		total = 0;
	}
	w->cwnd = (__u32)cwnd;
	w->frac = (__u32)(total & 0xffffffffULL);
}

/* Undo after a spurious loss: back to the larger of now and before, within the ceiling. */
static __always_inline __u32 hybla_undo(__u32 cwnd, __u32 prior_cwnd, __u32 ceiling)
{
	__u32 w = cwnd > prior_cwnd ? cwnd : prior_cwnd;

	return w > ceiling ? ceiling : w;
}

/* Reno's multiplicative decrease: ssthresh = max(cwnd / 2, 2). */
static __always_inline __u32 hybla_ssthresh(__u32 cwnd)
{
	__u32 half = cwnd >> 1;

	return half > 2 ? half : 2;
}

#endif /* PERIGEE_HYBLA_MATH_H */
