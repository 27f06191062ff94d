// SPDX-License-Identifier: GPL-2.0-only
/*
 * TCP Hybla (Caini & Firrincieli, 2004) as a BPF struct_ops congestion control, registered
 * under the name "hybla" when the kernel has no tcp_hybla of its own.
 *
 *   rho  = max(RTT / RTT0, 1), RTT = operator base RTT if set, else the minimum RTT seen
 *   slow start:             cwnd += 2^rho - 1   per ACKed segment
 *   congestion avoidance:   cwnd += rho^2/cwnd  per ACKed segment
 *   initial window:         IW * rho
 *   outside TCP_CA_Open:    rho = 1, i.e. plain Reno; loss: ssthresh = max(cwnd/2, 2)
 *   every cwnd it sets:     <= min(65536, snd_cwnd_clamp, operator cwnd_max if nonzero)
 *
 * The operator parameters come from the socket's network namespace's entry in hybla_ns_params
 * (keyed by the namespace cookie), else from the host-wide entry in hybla_params: two gateways
 * in two namespaces each tune their own flows.
 *
 * Uses only what BPF TCP CCs may touch since Linux 6.1: reads of tcp_sock/ack_sample (and,
 * through BTF, the socket's struct net), writes of snd_cwnd, snd_ssthresh-return, icsk_ca_priv
 * and sk_pacing_status. No kfuncs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "hybla_math.h"
#include "hybla_params.h"

char _license[] SEC("license") = "GPL";

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

/* Per-connection state, lives in icsk_ca_priv (104 bytes on 6.1+; this uses 40). */
struct hybla_state {
	__u64 netns_cookie; /* the socket's namespace (fixed for its life): hybla_ns_params key */
	__u32 rho_q16;      /* current rho, Q16 */
	__u32 min_rtt_us;   /* minimum RTT sample seen, 0 = none yet */
	__u32 frac;         /* Q32 cwnd remainder carried between ACKs */
	__u32 ca_state;     /* last TCP_CA_* state from set_state */
	__u32 cwnd_max;     /* operator cwnd ceiling in force, 0 = none */
	__u32 rtt0_us;      /* the RTT0 and base RTT rho was derived from */
	__u32 base_rtt_us;
};

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
	ca->rho_q16 = rtt ? hybla_rho_q16(rtt, rtt0) : HYBLA_RHO_ONE;
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

SEC("struct_ops/hybla_init")
void BPF_PROG(hybla_init, struct sock *sk)
{
	struct tcp_sock *tp = hybla_tp(sk);
	struct hybla_state *ca = hybla_ca(sk);

	/* Read through BTF (struct_ops args are trusted pointers); same value as SO_NETNS_COOKIE. */
	ca->netns_cookie = sk->__sk_common.skc_net.net->net_cookie;
	ca->frac = 0;
	ca->ca_state = TCP_CA_Open;
	ca->min_rtt_us = tp->srtt_us >> 3; /* SYN/SYN-ACK RTT, 0 if unknown */
	hybla_refresh_params(ca, 1);
	/* Scale the initial window only for a fresh connection, not on a CC switch mid-flow. */
	if (tp->data_segs_out == 0)
		tp->snd_cwnd = hybla_initial_cwnd(tp->snd_cwnd, ca->rho_q16, hybla_ceiling(tp, ca));
	/* Pace at >= cwnd/srtt so Hybla's large windows leave as a stream, not a burst. */
	sk->sk_pacing_status = SK_PACING_NEEDED;
}

SEC("struct_ops/hybla_cong_avoid")
void BPF_PROG(hybla_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
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
	rho = ca->ca_state == TCP_CA_Open ? ca->rho_q16 : HYBLA_RHO_ONE;
	w.cwnd = tp->snd_cwnd;
	w.frac = ca->frac;
	hybla_on_ack(&w, tp->snd_ssthresh, rho, acked, ceiling);
	tp->snd_cwnd = w.cwnd;
	ca->frac = w.frac;
}

SEC("struct_ops/hybla_pkts_acked")
void BPF_PROG(hybla_pkts_acked, struct sock *sk, const struct ack_sample *sample)
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

SEC("struct_ops/hybla_set_state")
void BPF_PROG(hybla_set_state, struct sock *sk, __u8 new_state)
{
	struct hybla_state *ca = hybla_ca(sk);

	ca->ca_state = new_state;
	if (new_state == TCP_CA_Loss)
		ca->frac = 0;
}

SEC("struct_ops/hybla_ssthresh")
__u32 BPF_PROG(hybla_ssthresh_op, struct sock *sk)
{
	hybla_ca(sk)->frac = 0;
	return hybla_ssthresh(hybla_tp(sk)->snd_cwnd);
}

SEC("struct_ops/hybla_undo_cwnd")
__u32 BPF_PROG(hybla_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = hybla_tp(sk);

	return hybla_undo(tp->snd_cwnd, tp->prior_cwnd, hybla_ceiling(tp, hybla_ca(sk)));
}

SEC(".struct_ops")
struct tcp_congestion_ops hybla = {
	.init = (void *)hybla_init,
	.cong_avoid = (void *)hybla_cong_avoid,
	.pkts_acked = (void *)hybla_pkts_acked,
	.set_state = (void *)hybla_set_state,
	.ssthresh = (void *)hybla_ssthresh_op,
	.undo_cwnd = (void *)hybla_undo_cwnd,
	.name = "hybla",
};
