// SPDX-License-Identifier: GPL-2.0-only
/*
 * TCP Hybla (Caini & Firrincieli, 2004) as a BPF struct_ops congestion control, registered
 * under the name "hybla" when the kernel has no tcp_hybla of its own. (hybla_ld.bpf.c adds
 * "hybla_ld", the same growth with loss differentiation, for links with bit errors.)
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
#include "hybla_core.bpf.h"

char _license[] SEC("license") = "GPL";

/* "hybla": the paper's algorithm. */

SEC("struct_ops/hybla_init")
void BPF_PROG(hybla_init, struct sock *sk)
{
	hybla_do_init(sk, 0);
}

SEC("struct_ops/hybla_cong_avoid")
void BPF_PROG(hybla_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	/* Outside the Open state (Disorder, CWR, Recovery, Loss) rho is 1: plain Reno. */
	hybla_do_cong_avoid(sk, acked, hybla_ca(sk)->ca_state == TCP_CA_Open);
}

SEC("struct_ops/hybla_pkts_acked")
void BPF_PROG(hybla_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	hybla_do_pkts_acked(sk, sample);
}

SEC("struct_ops/hybla_set_state")
void BPF_PROG(hybla_set_state, struct sock *sk, __u8 new_state)
{
	hybla_do_set_state(sk, new_state);
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
	return hybla_do_undo_cwnd(sk);
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
