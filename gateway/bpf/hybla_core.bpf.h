/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What Perigee's two BPF congestion controls share (hybla.bpf.c: "hybla", hybla_ld.bpf.c:
 * "hybla_ld"): the parameter maps, the per-connection state and the bodies of the callbacks
 * that are the same in both. Each object defines the maps; the loader pins them once and the
 * second object reuses the pinned ones, so both read the same operator parameters.
 */
#ifndef PERIGEE_HYBLA_CORE_BPF_H
#define PERIGEE_HYBLA_CORE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "hybla_math.h"
#include "hybla_params.h"

/* How a flow's rho follows from its RTT and RTT0: Hybla's own unless the includer (hybla_ld)
 * names another. For an RTT not yet measured (0) Hybla's is 1, hybla_ld's its floor. */
#ifndef HYBLA_RHO_OF
#define HYBLA_RHO_OF hybla_rho_q16
#endif

/* Host-wide run-time parameters (RTT0, base RTT, cwnd ceiling), pinned by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hybla_params);
} hybla_params SEC(".maps");

/* Per-network-namespace parameters, keyed by the namespace cookie (SO_NETNS_COOKIE). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HYBLA_NETNS_MAX);
	__type(key, __u64);
	__type(value, struct hybla_params);
} hybla_ns_params SEC(".maps");

/* Per-connection state, lives in icsk_ca_priv (104 bytes on 6.1+; this uses all of it). */
struct hybla_state {
	__u64 netns_cookie; /* the socket's namespace (fixed for its life): hybla_ns_params key */
	__u32 rho_q16;      /* current rho, Q16 */
	__u32 min_rtt_us;   /* minimum RTT sample seen, 0 = none yet */
	__u32 frac;         /* Q32 cwnd remainder carried between ACKs */
	__u32 ca_state;     /* last TCP_CA_* state from set_state */
	__u32 cwnd_max;     /* operator cwnd ceiling in force, 0 = none */
	__u32 rtt0_us;      /* the RTT0 and base RTT rho was derived from */
	__u32 base_rtt_us;
	/* hybla_ld only (hybla leaves these zero): */
	struct hybla_ld_round round; /* rounds: delivery rate, standing queue */
	__u32 acked_delivered;       /* tp->delivered at the last cong_control */
	__u32 episode_delivered;     /* tp->delivered when the Recovery/CWR episode began */
	__u32 loss_random;           /* the last loss was taken as a bit error */
	struct hybla_ld_streak streak; /* rounds of a standing queue its cuts did not drain */
};

_Static_assert(sizeof(struct hybla_state) <= 104, "icsk_ca_priv is 104 bytes on 6.1");

static __always_inline struct tcp_sock *hybla_tp(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct hybla_state *hybla_ca(struct sock *sk)
{
	return (struct hybla_state *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* The namespace's own parameters if its gateway wrote some, else the host-wide ones. */
static __always_inline struct hybla_params *hybla_params_of(struct hybla_state *ca)
{
	__u64 cookie = ca->netns_cookie;
	__u32 key = 0;
	struct hybla_params *p = bpf_map_lookup_elem(&hybla_ns_params, &cookie);

	return p ? p : bpf_map_lookup_elem(&hybla_params, &key);
}

/*
 * Re-read the params on every ACK (one hash lookup): operators retune while flows run, and a
 * namespace entry that appears or goes away must reach open connections too. rho is derived
 * again only when forced (new min RTT, init) or when RTT0 / the base RTT in force changed.
 * Comparing the values, not a generation counter, also covers a switch between two entries.
 */
static __always_inline void hybla_refresh_params(struct hybla_state *ca, int force)
{
	__u32 rtt0 = 0, base = 0, cwnd_max = 0, rtt;
	struct hybla_params *p = hybla_params_of(ca);

	if (p) {
		rtt0 = p->rtt0_us;
		base = p->base_rtt_us;
		cwnd_max = p->cwnd_max;
	}
	ca->cwnd_max = cwnd_max;
	if (!force && rtt0 == ca->rtt0_us && base == ca->base_rtt_us)
		return;
	ca->rtt0_us = rtt0;
	ca->base_rtt_us = base;
	/* A BoD allocation delay inflates measured RTTs; an operator base RTT keeps rho honest. */
	rtt = base ? base : ca->min_rtt_us;
	ca->rho_q16 = HYBLA_RHO_OF(rtt, rtt0);
}

/* Standard TCP only grows cwnd while the sender actually uses it. */
static __always_inline int hybla_cwnd_limited(struct tcp_sock *tp)
{
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

static __always_inline __u32 hybla_ceiling(struct tcp_sock *tp, struct hybla_state *ca)
{
	return hybla_effective_ceiling(tp->snd_cwnd_clamp, ca->cwnd_max);
}

/* ld: start hybla_ld's first round (hybla leaves the round state zero). */
static __always_inline void hybla_do_init(struct sock *sk, int ld)
{
	struct tcp_sock *tp = hybla_tp(sk);
	struct hybla_state *ca = hybla_ca(sk);

	/* Read through BTF (struct_ops args are trusted pointers); same value as SO_NETNS_COOKIE. */
	ca->netns_cookie = sk->__sk_common.skc_net.net->net_cookie;
	ca->frac = 0;
	ca->ca_state = TCP_CA_Open;
	ca->min_rtt_us = tp->srtt_us >> 3; /* SYN/SYN-ACK RTT, 0 if unknown */
	__builtin_memset(&ca->round, 0, sizeof(ca->round));
	ca->acked_delivered = tp->delivered;
	ca->episode_delivered = tp->delivered;
	ca->loss_random = 0;
	if (ld)
		hybla_ld_round_start(&ca->round, tp->tcp_mstamp, tp->delivered + tp->lost);
	hybla_refresh_params(ca, 1);
	/* Scale the initial window only for a fresh connection, not on a CC switch mid-flow. */
	if (tp->data_segs_out == 0)
		tp->snd_cwnd = hybla_initial_cwnd(tp->snd_cwnd, ca->rho_q16, hybla_ceiling(tp, ca));
	/* Pace at >= cwnd/srtt so Hybla's large windows leave as a stream, not a burst. */
	sk->sk_pacing_status = SK_PACING_NEEDED;
}

/* Hybla's growth for `acked` segments; with_rho = 0 grows like Reno (rho 1). */
static __always_inline void hybla_do_cong_avoid(struct sock *sk, __u32 acked, int with_rho)
{
	struct tcp_sock *tp = hybla_tp(sk);
	struct hybla_state *ca = hybla_ca(sk);
	struct hybla_window w;
	__u32 rho, ceiling;

	hybla_refresh_params(ca, 0);
	ceiling = hybla_ceiling(tp, ca);
	/* A ceiling lowered at run time applies at once, even to an application-limited flow. */
	if (tp->snd_cwnd > ceiling) {
		tp->snd_cwnd = ceiling;
		ca->frac = 0;
	}
	if (!hybla_cwnd_limited(tp))
		return;
	rho = with_rho ? ca->rho_q16 : HYBLA_RHO_ONE;
	w.cwnd = tp->snd_cwnd;
	w.frac = ca->frac;
	hybla_on_ack(&w, tp->snd_ssthresh, rho, acked, ceiling);
	tp->snd_cwnd = w.cwnd;
	ca->frac = w.frac;
}

static __always_inline void hybla_do_pkts_acked(struct sock *sk, const struct ack_sample *sample)
{
	struct hybla_state *ca = hybla_ca(sk);
	__s32 rtt = sample->rtt_us;

	if (rtt <= 0)
		return;
	if (ca->min_rtt_us == 0 || (__u32)rtt < ca->min_rtt_us) {
		ca->min_rtt_us = (__u32)rtt;
		hybla_refresh_params(ca, 1);
	}
}

static __always_inline void hybla_do_set_state(struct sock *sk, __u8 new_state)
{
	struct hybla_state *ca = hybla_ca(sk);

	ca->ca_state = new_state;
	if (new_state == TCP_CA_Loss)
		ca->frac = 0;
}

static __always_inline __u32 hybla_do_undo_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = hybla_tp(sk);

	return hybla_undo(tp->snd_cwnd, tp->prior_cwnd, hybla_ceiling(tp, hybla_ca(sk)));
}

#endif /* PERIGEE_HYBLA_CORE_BPF_H */
