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

/*
 * hybla_ld's rho is at least HYBLA_LD_RHO_MIN. Hybla's reference RTT makes a long path grow as a
 * 25 ms Reno flow would, about one segment per 25 ms whatever the link's rate; on a short path
 * (LEO, 20-50 ms) rho is near 1 and a window cut by a path change's loss burst regrew for
 * seconds at 100 Mbit/s. At 6 a LEO leg grows 36 segments per RTT, as a GEO leg grows in time;
 * its queue cuts, not its growth, hold the window at the pipe (docs/hybla.md, *The default*).
 */
#define HYBLA_LD_RHO_MIN 6U

/* hybla_ld's rho in Q16: Hybla's, at least HYBLA_LD_RHO_MIN. */
static __always_inline __u32 hybla_ld_rho_q16(__u32 rtt_us, __u32 rtt0_us)
{
	__u32 rho = hybla_rho_q16(rtt_us, rtt0_us);

	return rho > (HYBLA_LD_RHO_MIN << HYBLA_RHO_SHIFT) ? rho : HYBLA_LD_RHO_MIN << HYBLA_RHO_SHIFT;
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


/*
 * Loss differentiation (the `hybla_ld` congestion control; `hybla` does not use any of this).
 *
 * The connection is cut into rounds of about one minimum RTT of ACK arrivals (the min RTT
 * rounded up to a coarse grid, hybla_ld_round_len), aligned to the clock (hybla_ld_round_end).
 * Each round yields
 *   bw      the rate the path carried: segments delivered (cumulatively ACKed or SACKed) or
 *           marked lost in the round, over its length, Q24 segments per microsecond (50 Mbit/s at
 *           MSS 1448 ~ 72,000). Counting the lost ones matters under heavy bit errors: a frame
 *           corrupted on the link used the link as much as one delivered (at 11% frame loss the
 *           delivered rate alone would hold the window 11% under the pipe)
 *   queue   whether the smallest RTT sample of the round exceeds the path's minimum RTT by more
 *           than the queue threshold, max(min RTT / 8, 5 ms): a queue that stood for a whole
 *           round (a transient burst does not)
 * A loss with no standing queue is taken as a bit error: the window keeps what the path
 * delivered (plus one round of Hybla's growth, within the queue threshold's headroom). A loss
 * with a standing queue, or before any round has measured the path, is congestion: Reno's
 * halving, as `hybla`. A standing queue without loss is congestion too: the window stops
 * growing while the queue stands, and at the round's end is cut to what the round carried
 * times (min RTT + threshold / 2), never below half, at most once per RTT (the RTT with the
 * queue: hybla_ld_may_cut).
 */
#define HYBLA_LD_BW_SHIFT 24
#define HYBLA_LD_QUEUE_SHIFT 3          /* queue threshold = min RTT / 8 ... */
#define HYBLA_LD_QUEUE_MIN_US 5000U     /* ... but at least 5 ms (RTT noise on short paths) */

/* The queueing delay, microseconds, above which a round's RTTs show a standing queue. */
static __always_inline __u32 hybla_ld_queue_thresh_us(__u32 min_rtt_us)
{
	__u32 t = min_rtt_us >> HYBLA_LD_QUEUE_SHIFT;

	return t > HYBLA_LD_QUEUE_MIN_US ? t : HYBLA_LD_QUEUE_MIN_US;
}

/* Rate, Q24 segments per microsecond, of `delivered` segments over `elapsed_us`; 0 for an
 * empty interval, saturated at 2^32 - 1. */
static __always_inline __u32 hybla_ld_bw_q24(__u32 delivered, __u64 elapsed_us)
{
	__u64 bw;

	if (elapsed_us == 0)
		return 0;
	bw = ((__u64)delivered << HYBLA_LD_BW_SHIFT) / elapsed_us; /* < 2^56 */
	return bw > 0xffffffffULL ? 0xffffffffU : (__u32)bw;
}

/* Segments in flight at rate bw_q24 over t_us (a window), rounded down, saturated. */
static __always_inline __u32 hybla_ld_window(__u32 bw_q24, __u32 t_us)
{
	__u64 w = ((__u64)bw_q24 * t_us) >> HYBLA_LD_BW_SHIFT; /* product < 2^64 */

	return w > 0xffffffffULL ? 0xffffffffU : (__u32)w;
}

/* a + b microseconds, saturated at 2^32 - 1 (an RTT that long is not a path). */
static __always_inline __u32 hybla_ld_sum_us(__u32 a, __u32 b)
{
	__u64 s = (__u64)a + b;

	return s > 0xffffffffULL ? 0xffffffffU : (__u32)s;
}

/* Whether a round whose smallest RTT sample was round_min_rtt_us shows a standing queue. */
static __always_inline int hybla_ld_standing_queue(__u32 round_min_rtt_us, __u32 min_rtt_us)
{
	if (round_min_rtt_us == 0 || min_rtt_us == 0)
		return 0;
	return (__u64)round_min_rtt_us > (__u64)min_rtt_us + hybla_ld_queue_thresh_us(min_rtt_us);
}

/* Round tracking state (lives in the connection's private area). */
struct hybla_ld_round {
	__u64 start_us;      /* ACK time the round started at */
	__u64 hold_until_us; /* no queue cut before this time (the last cut's effect is on its way) */
	__u32 carried;       /* tp->delivered + tp->lost when it started */
	__u32 min_rtt_us;    /* smallest RTT sample in it so far, 0 = none */
	__u32 last_min_rtt_us; /* ... and in the last completed round */
	__u32 bw_q24;        /* rate the path carried in the last completed round */
	__u32 bw_prev_q24;   /* ... and in the one before */
	__u32 queue;         /* the last completed round showed a standing queue */
};

/* Begin a round at now_us with the connection's carried count (delivered + lost). */
static __always_inline void hybla_ld_round_start(struct hybla_ld_round *r, __u64 now_us,
						 __u32 carried)
{
	r->start_us = now_us;
	r->carried = carried;
	r->min_rtt_us = 0;
}

/*
 * The rounds' period: the min RTT rounded up to a multiple of the largest power of two that is
 * at most min RTT / 8 (the queue threshold's scale), so between the min RTT and 1/8 above it
 * (601 ms -> 655.36 ms, in steps of 65.536 ms from 524 ms to 1.05 s). Two flows on one path
 * never measure the same min RTT to the microsecond (measured: 601 and 602 ms on one carrier),
 * and multiples of two different periods since the clock's epoch fall at unrelated instants:
 * their rounds would be out of phase by a random fraction of an RTT, different in every run.
 * Rounded to this grid they get the same period unless their minima straddle one of its steps.
 */
static __always_inline __u64 hybla_ld_round_len(__u32 min_rtt_us)
{
	__u32 q = min_rtt_us >> 3;

	/* The largest power of two <= q (no loops: smear the top bit down). */
	q |= q >> 1;
	q |= q >> 2;
	q |= q >> 4;
	q |= q >> 8;
	q |= q >> 16;
	q -= q >> 1;
	if (q == 0)
		q = 1;
	return ((__u64)min_rtt_us + q - 1) & ~((__u64)q - 1);
}

/*
 * The end of the round that started at start_us: the next multiple of the rounds' period
 * (hybla_ld_round_len) on the clock (tp->tcp_mstamp, the same for every socket of the host), or
 * the one after when that is less than half a period away. Aligned to the clock, the rounds of
 * all flows on one path cover the same intervals, so they see a standing queue in the same
 * rounds and cut together: synchronous multiplicative decreases are what make additive increase
 * converge to equal shares. (Rounds out of phase let the flow whose round ends first stop
 * growing first and take the deeper cuts: Jain 0.91-0.95 on two flows of one carrier.)
 */
static __always_inline __u64 hybla_ld_round_end(__u64 start_us, __u32 min_rtt_us)
{
	__u64 len = hybla_ld_round_len(min_rtt_us);
	__u64 end = (start_us / len + 1) * len;

	if (end - start_us < len / 2)
		end += len;
	return end;
}

/*
 * One ACK at now_us (the connection's carried count, delivered + lost, the ACK's RTT sample or
 * <= 0 for none, the path's minimum RTT). Returns 1 when it completed a round (hybla_ld_round_end):
 * bw_q24 / bw_prev_q24 / queue then describe it and the next round has begun.
 */
static __always_inline int hybla_ld_round_update(struct hybla_ld_round *r, __u64 now_us,
						 __u32 carried, int rtt_us, __u32 min_rtt_us)
{
	__u64 elapsed;

	if (rtt_us > 0 && (r->min_rtt_us == 0 || (__u32)rtt_us < r->min_rtt_us))
		r->min_rtt_us = (__u32)rtt_us;
	if (min_rtt_us == 0 || now_us < hybla_ld_round_end(r->start_us, min_rtt_us))
		return 0;
	elapsed = now_us - r->start_us;
	r->bw_prev_q24 = r->bw_q24;
	r->bw_q24 = hybla_ld_bw_q24(carried - r->carried, elapsed);
	r->queue = hybla_ld_standing_queue(r->min_rtt_us, min_rtt_us);
	r->last_min_rtt_us = r->min_rtt_us;
	hybla_ld_round_start(r, now_us, carried);
	return 1;
}

/*
 * Whether a round's end (at now_us) may cut for its standing queue: not while the last cut's
 * effect is still on its way. A cut reaches the RTTs one RTT later, and that RTT includes the
 * queue (a whole round's worth when the queue stood all round): cutting again every round
 * while an earlier, larger queue drains would halve the window round after round. 1 = cut,
 * and the hold then runs for the round's smallest RTT.
 */
static __always_inline int hybla_ld_may_cut(struct hybla_ld_round *r, __u64 now_us)
{
	if (now_us < r->hold_until_us)
		return 0;
	r->hold_until_us = now_us + r->last_min_rtt_us;
	return 1;
}

/* A queue right now: the last round showed one, or this round's samples already do (fewer
 * samples only overstate the minimum, so this errs toward congestion). */
static __always_inline int hybla_ld_queue_now(const struct hybla_ld_round *r, __u32 min_rtt_us)
{
	return r->queue || hybla_ld_standing_queue(r->min_rtt_us, min_rtt_us);
}

/* Hybla's congestion-avoidance growth over one RTT, rho^2, in whole segments. */
static __always_inline __u32 hybla_ld_rtt_growth(__u32 rho_q16)
{
	return (__u32)(((__u64)rho_q16 * rho_q16) >> (2 * HYBLA_RHO_SHIFT)); /* <= 65536 */
}

/*
 * ssthresh on a loss. Congestion (queue, or no delivery rate measured yet): Reno's halving.
 * Bit error: the window the path carries, bw x (min RTT + queue threshold), but no more than
 * one round of Hybla growth above cwnd, and never below half or above the ceiling.
 */
static __always_inline __u32 hybla_ld_ssthresh(__u32 cwnd, int queue, __u32 bw_q24,
					       __u32 min_rtt_us, __u32 rho_q16, __u32 ceiling)
{
	__u32 half = hybla_ssthresh(cwnd);
	__u64 grown = (__u64)cwnd + hybla_ld_rtt_growth(rho_q16);
	__u64 room, target;

	if (queue || bw_q24 == 0 || min_rtt_us == 0)
		return half;
	room = hybla_ld_window(bw_q24, hybla_ld_sum_us(min_rtt_us, hybla_ld_queue_thresh_us(min_rtt_us)));
	target = room < grown ? room : grown;
	if (target > ceiling)
		target = ceiling;
	return target > half ? (__u32)target : half;
}

/*
 * A standing queue without loss: the window that drains it, bw x (min RTT + threshold / 2)
 * (half the threshold stays queued, so the link does not idle), within [cwnd / 2, cwnd].
 */
static __always_inline __u32 hybla_ld_queue_cut(__u32 cwnd, __u32 bw_q24, __u32 min_rtt_us)
{
	__u32 half = hybla_ssthresh(cwnd);
	__u32 target;

	target = hybla_ld_window(bw_q24, hybla_ld_sum_us(min_rtt_us,
							 hybla_ld_queue_thresh_us(min_rtt_us) >> 1));
	if (target < half)
		target = half;
	return target < cwnd ? target : cwnd;
}

/*
 * A standing queue that its cuts do not drain is not this flow's queue: the path's delay rose
 * (a LEO path change, a gateway handover) or someone else holds it. A cut that reached its
 * target (not stopped at the halving floor) leaves the flow at most bw x (min RTT + thr / 2) in
 * flight, so its own queue is gone once the cut's effect is back (the hold: one RTT with the
 * queue). When HYBLA_LD_RELEARN_ROUNDS rounds that end after such a cut's effect is back still
 * show a queue, the minimum RTT is stale: the caller takes the last round's smallest RTT as the
 * path's minimum and gives back the window the streak began with (its cuts were mistaken).
 * Without this a delay step reads as a queue for the rest of the connection, and each round's
 * cut to the old pipe lowers the rate the next cut is taken from (measured on the leo-pass
 * schedule: a 300 MB download through Perigee at both ends, 160 MB in 90 s; end to end with BBR,
 * 27 s). A cut stopped at the floor (a window far above the pipe: slow start's overshoot into a
 * deep buffer) explains the queue that follows it, so those rounds do not count.
 */
#define HYBLA_LD_RELEARN_ROUNDS 2U

struct hybla_ld_streak {
	__u16 rounds;      /* queued rounds since the streak began, each after an unclamped cut's effect */
	__u16 clamped;     /* the streak's last cut stopped at the halving floor */
	__u32 cwnd_before; /* the window when the streak began, 0 = no streak */
};

/*
 * At a round's end (queue: it showed a standing queue; cwnd: the window now, before any cut of
 * this round; settled: the last cut's hold has passed). Returns the window to give back when the
 * streak outlived its cuts (re-learn the minimum RTT), else 0. The streak then starts over.
 */
static __always_inline __u32 hybla_ld_streak_end(struct hybla_ld_streak *s, int queue, __u32 cwnd,
						 int settled)
{
	__u32 back;

	if (!queue) {
		s->rounds = 0;
		s->clamped = 0;
		s->cwnd_before = 0;
		return 0;
	}
	if (s->cwnd_before == 0) {
		s->cwnd_before = cwnd ? cwnd : 1;
		return 0;
	}
	if (!settled || s->clamped)
		return 0;
	s->rounds++;
	if ((__u32)s->rounds < HYBLA_LD_RELEARN_ROUNDS)
		return 0;
	back = s->cwnd_before;
	s->rounds = 0;
	s->clamped = 0;
	s->cwnd_before = 0;
	return back;
}

/* A queue cut of a streak: whether its target was below half the window (the cut stopped at
 * the floor, so the queue that follows is still this flow's). */
static __always_inline void hybla_ld_streak_cut(struct hybla_ld_streak *s, __u32 cwnd, __u32 bw_q24,
						__u32 min_rtt_us)
{
	__u32 target = hybla_ld_window(bw_q24, hybla_ld_sum_us(min_rtt_us,
							      hybla_ld_queue_thresh_us(min_rtt_us) >> 1));

	s->clamped = target < hybla_ssthresh(cwnd) ? 1 : 0;
}

/* Segments in flight as the kernel counts them (tcp_packets_in_flight): sent, not yet SACKed
 * or marked lost, plus retransmissions out. */
static __always_inline __u32 hybla_ld_in_flight(__u32 packets_out, __u32 sacked_out,
						__u32 lost_out, __u32 retrans_out)
{
	__u64 left = (__u64)sacked_out + lost_out;
	__u64 f = packets_out > left ? packets_out - left : 0;

	f += retrans_out;
	return f > 0xffffffffULL ? 0xffffffffU : (__u32)f;
}

/*
 * hybla_ld's window in Recovery/CWR (it owns cwnd there, in place of the kernel's PRR), moving
 * toward `target` (ssthresh). Above it, PRR's proportional rule: of every segment delivered
 * since the episode began, target / prior_cwnd may be sent (the first retransmission leaves at
 * once). At or below it, the window is the target: the pacer, not the ACK clock, spreads the
 * refill, so a bit error costs no more than the segment itself.
 */
static __always_inline __u32 hybla_ld_recovery_cwnd(__u32 in_flight, __u32 target,
						    __u32 prior_cwnd, __u32 prr_delivered,
						    __u32 prr_out)
{
	__u64 allowed, sndcnt;

	if (target == 0)
		target = 1;
	if (in_flight <= target)
		return target;
	if (prior_cwnd == 0)
		prior_cwnd = 1;
	allowed = ((__u64)target * prr_delivered + prior_cwnd - 1) / prior_cwnd;
	sndcnt = allowed > prr_out ? allowed - prr_out : 0;
	if (sndcnt == 0 && prr_out == 0)
		sndcnt = 1;
	sndcnt += in_flight;
	return sndcnt > 0xffffffffULL ? 0xffffffffU : (__u32)sndcnt;
}

/* Pacing ratios (percent) of the kernel's tcp_update_pacing_rate defaults: slow start (cwnd
 * below half ssthresh) and otherwise. */
#define HYBLA_LD_PACING_SS_PCT 200ULL
#define HYBLA_LD_PACING_CA_PCT 120ULL
#define HYBLA_LD_PACING_SEGS_MAX (1U << 20) /* keeps the product below 2^64 */

/*
 * Pacing rate in bytes per second, as the kernel computes it for congestion controls without
 * cong_control: ratio x mss x max(cwnd, packets_out) / srtt (srtt_us8 = srtt in us << 3, as
 * tp->srtt_us keeps it), capped at max_rate (SO_MAX_PACING_RATE; ~0 = none). 0 srtt: max_rate.
 */
static __always_inline __u64 hybla_ld_pacing_rate(__u32 mss, __u32 cwnd, __u32 packets_out,
						  __u32 ssthresh, __u32 srtt_us8, __u64 max_rate)
{
	__u64 segs = cwnd > packets_out ? cwnd : packets_out;
	__u64 rate;

	if (srtt_us8 == 0)
		return max_rate;
	if (segs > HYBLA_LD_PACING_SEGS_MAX)
		segs = HYBLA_LD_PACING_SEGS_MAX;
	rate = (__u64)(mss & 0xffffU) * ((1000000ULL / 100) << 3);
	rate *= cwnd < (ssthresh >> 1) ? HYBLA_LD_PACING_SS_PCT : HYBLA_LD_PACING_CA_PCT;
	rate = rate * segs / srtt_us8;
	return rate < max_rate ? rate : max_rate;
}

#endif /* PERIGEE_HYBLA_MATH_H */
