// SPDX-License-Identifier: GPL-2.0-only
/*
 * "hybla_ld": TCP Hybla's growth (hybla_core.bpf.h, as "hybla") with loss differentiation for
 * satellite links with bit errors (formulas and reasoning in hybla_math.h and docs/hybla.md):
 *
 *   rounds of about one min RTT (rounded up to a grid the flows of a path share, aligned to
 *   the clock) measure the rate bw the path carried (segments delivered or lost) and whether
 *   a queue stood all round
 *   loss, no standing queue (a bit error):  ssthresh = clamp(bw x (min RTT + thr),
 *                                                            cwnd / 2, min(cwnd + rho^2, ceiling))
 *   loss with a standing queue (congestion): ssthresh = max(cwnd / 2, 2), as "hybla"
 *   standing queue, no loss:                 ssthresh (and in Open cwnd) = clamp(bw x (min RTT +
 *                                                            thr / 2), cwnd / 2, cwnd), at most
 *                                                            once per RTT
 *   thr = max(min RTT / 8, 5 ms)
 *   rho = max(RTT / RTT0, HYBLA_LD_RHO_MIN): a short (LEO) path grows as a GEO one does in time
 *   a queue that outlives its cuts (HYBLA_LD_RELEARN_ROUNDS rounds), or a timeout: the path's
 *                                            minimum RTT is learned again (a delay step)
 *
 * It owns the window in every state (cong_control): in Open and Disorder Hybla's growth, in
 * Recovery and CWR a window that moves to ssthresh (PRR's proportional rule above it, the
 * target itself below it: the pacer spreads the refill), after a timeout slow start back to
 * ssthresh (with rho when the loss was a bit error). It sets the pacing rate as the kernel
 * would (ratio x cwnd / srtt, capped by SO_MAX_PACING_RATE).
 *
 * cong_control reads only its first argument (the socket), so the one program fits both the
 * 6.1 prototype (sk, rs) and the 6.10+ one (sk, ack, flag, rs).
 *
 * Registered by the loader next to "hybla" (its own pins under /sys/fs/bpf/perigee-hybla-ld),
 * reading the same pinned parameter maps. Besides what "hybla" uses it reads tcp_mstamp,
 * delivered, lost, the in-flight counters, prr_out, prior_cwnd, mss_cache, srtt_us and
 * sk_max_pacing_rate and writes snd_ssthresh and sk_pacing_rate, all allowed to BPF congestion
 * controls since Linux 6.1.
 */
#define HYBLA_RHO_OF hybla_ld_rho_q16
#include "hybla_core.bpf.h"

char _license[] SEC("license") = "GPL";

/* Which Perigee build registered hybla_ld and over which parameter maps: the loader replaces a
 * registration only from a strictly newer build, or when the pinned maps were replaced. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hybla_ld_info);
} hybla_ld_info SEC(".maps");

static __always_inline __u32 hybla_ld_bw(const struct hybla_ld_round *r)
{
	return r->bw_q24 > r->bw_prev_q24 ? r->bw_q24 : r->bw_prev_q24;
}

/*
 * Every ACK feeds the round. At a round's end:
 * - a standing queue (congestion without loss) lowers ssthresh to the window that drains it
 *   (also during a repair: a flow recovering from losses is not exempt from a queue it shares),
 *   and in the Open state cuts cwnd to it, once per RTT;
 * - no standing queue during a Recovery or Loss episode lets ssthresh grow as Hybla's window
 *   would have in that RTT, within what the path carried (the ssthresh rule for a bit error):
 *   a long repair of many losses (lost retransmissions, a burst) does not hold the window at
 *   the episode's first target.
 */
static __always_inline void hybla_ld_track(struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = hybla_tp(sk);
	struct hybla_state *ca = hybla_ca(sk);
	struct hybla_ld_round *r = &ca->round;
	__u32 cwnd;

	if (!hybla_ld_round_update(r, tp->tcp_mstamp, tp->delivered + tp->lost, sample->rtt_us,
				   ca->min_rtt_us))
		return;
	cwnd = hybla_ld_streak_end(&ca->streak, r->queue, tp->snd_cwnd,
				   tp->tcp_mstamp >= r->hold_until_us);
	if (cwnd && r->last_min_rtt_us) {
		/* The path's delay rose: its new minimum, and the window the cuts took back. */
		ca->min_rtt_us = r->last_min_rtt_us;
		hybla_refresh_params(ca, 1);
		if (cwnd > hybla_ceiling(tp, ca))
			cwnd = hybla_ceiling(tp, ca);
		if (ca->ca_state <= TCP_CA_Disorder && cwnd > tp->snd_cwnd) {
			tp->snd_cwnd = cwnd;
			ca->frac = 0;
		}
		if (cwnd > tp->snd_ssthresh)
			tp->snd_ssthresh = cwnd;
		r->queue = 0;
		r->hold_until_us = 0;
		return;
	}
	if (!r->queue) {
		if (ca->ca_state >= TCP_CA_CWR) {
			/* Only ever raised here: a round the receiver's window held back carries
			 * less, and that must not shrink the target. */
			cwnd = hybla_ld_ssthresh(tp->snd_ssthresh, 0, hybla_ld_bw(r),
						 ca->min_rtt_us, ca->rho_q16, hybla_ceiling(tp, ca));
			if (cwnd > tp->snd_ssthresh)
				tp->snd_ssthresh = cwnd;
		}
		return;
	}
	if (!hybla_ld_may_cut(r, tp->tcp_mstamp))
		return;
	hybla_ld_streak_cut(&ca->streak, tp->snd_cwnd, r->bw_q24, ca->min_rtt_us);
	cwnd = hybla_ld_queue_cut(tp->snd_cwnd, r->bw_q24, ca->min_rtt_us);
	if (ca->ca_state <= TCP_CA_Disorder && cwnd < tp->snd_cwnd) {
		tp->snd_cwnd = cwnd;
		ca->frac = 0;
	}
	/* Leave slow start: at GEO rho its next ACK would jump straight back to the ceiling. */
	if (cwnd < tp->snd_ssthresh)
		tp->snd_ssthresh = cwnd > 2 ? cwnd : 2;
}

SEC("struct_ops/hybla_ld_init")
void BPF_PROG(hybla_ld_init, struct sock *sk)
{
	hybla_do_init(sk, 1);
}

SEC("struct_ops/hybla_ld_pkts_acked")
void BPF_PROG(hybla_ld_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	hybla_do_pkts_acked(sk, sample);
	hybla_ld_track(sk, sample);
}

SEC("struct_ops/hybla_ld_set_state")
void BPF_PROG(hybla_ld_set_state, struct sock *sk, __u8 new_state)
{
	struct tcp_sock *tp = hybla_tp(sk);
	struct hybla_state *ca = hybla_ca(sk);

	/* The kernel reset prr_out and prior_cwnd just before; count deliveries from here. */
	if ((new_state == TCP_CA_Recovery || new_state == TCP_CA_CWR) && ca->ca_state != new_state)
		ca->episode_delivered = tp->delivered;
	/* A timeout has just marked everything in flight lost at once: that is not what the path
	 * carried in this round, so the round starts over from here. */
	if (new_state == TCP_CA_Loss && ca->ca_state != TCP_CA_Loss) {
		hybla_ld_round_start(&ca->round, tp->tcp_mstamp, tp->delivered + tp->lost);
		/* Nothing is queued after a timeout, and the path may be another one (a LEO path
		 * change loses packets as its delay steps): the minimum RTT is learned again from
		 * the next samples (ssthresh was taken with the old one, just before). */
		ca->min_rtt_us = 0;
		__builtin_memset(&ca->streak, 0, sizeof(ca->streak));
	}
	hybla_do_set_state(sk, new_state);
}

SEC("struct_ops/hybla_ld_ssthresh")
__u32 BPF_PROG(hybla_ld_ssthresh_op, struct sock *sk)
{
	struct tcp_sock *tp = hybla_tp(sk);
	struct hybla_state *ca = hybla_ca(sk);
	struct hybla_ld_round *r = &ca->round;
	int queue = hybla_ld_queue_now(r, ca->min_rtt_us);
	__u32 bw = hybla_ld_bw(r);

	ca->frac = 0;
	ca->loss_random = !queue && bw != 0;
	return hybla_ld_ssthresh(tp->snd_cwnd, queue, bw, ca->min_rtt_us, ca->rho_q16,
				 hybla_ceiling(tp, ca));
}

SEC("struct_ops/hybla_ld_cong_control")
void BPF_PROG(hybla_ld_cong_control, struct sock *sk)
{
	struct tcp_sock *tp = hybla_tp(sk);
	struct hybla_state *ca = hybla_ca(sk);
	__u32 delivered = tp->delivered;
	__u32 acked = delivered - ca->acked_delivered;
	__u32 state = ca->ca_state, cwnd, ceiling;

	ca->acked_delivered = delivered;
	if (state == TCP_CA_Recovery || state == TCP_CA_CWR) {
		hybla_refresh_params(ca, 0);
		ceiling = hybla_ceiling(tp, ca);
		cwnd = hybla_ld_recovery_cwnd(
			hybla_ld_in_flight(tp->packets_out, tp->sacked_out, tp->lost_out,
					   tp->retrans_out),
			tp->snd_ssthresh, tp->prior_cwnd, delivered - ca->episode_delivered,
			tp->prr_out);
		tp->snd_cwnd = cwnd < ceiling ? cwnd : ceiling;
	} else if (acked && !hybla_ld_queue_now(&ca->round, ca->min_rtt_us)) {
		/* Open/Disorder: Hybla's growth while no queue stands (a standing queue holds the
		 * window; the round's end cuts it). Loss (after a timeout): slow start back to
		 * ssthresh at Hybla's rate, paced. */
		hybla_do_cong_avoid(sk, acked, state != TCP_CA_Disorder);
	}
	sk->sk_pacing_rate = hybla_ld_pacing_rate(tp->mss_cache, tp->snd_cwnd, tp->packets_out,
						  tp->snd_ssthresh, tp->srtt_us,
						  sk->sk_max_pacing_rate);
}

SEC("struct_ops/hybla_ld_undo_cwnd")
__u32 BPF_PROG(hybla_ld_undo_cwnd, struct sock *sk)
{
	return hybla_do_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops hybla_ld = {
	.init = (void *)hybla_ld_init,
	.cong_control = (void *)hybla_ld_cong_control,
	.pkts_acked = (void *)hybla_ld_pkts_acked,
	.set_state = (void *)hybla_ld_set_state,
	.ssthresh = (void *)hybla_ld_ssthresh_op,
	.undo_cwnd = (void *)hybla_ld_undo_cwnd,
	.name = "hybla_ld",
};
