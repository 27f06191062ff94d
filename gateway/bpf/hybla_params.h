/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Value layout of the pinned params maps: the host-wide entry (/sys/fs/bpf/perigee/hybla_params,
 * key 0) and the per-network-namespace entries (.../hybla_ns_params, key = namespace cookie).
 * Mirrored by `ParamsValue` in crates/hybla/src/bpf_loader.rs: keep both in sync.
 */
#ifndef PERIGEE_HYBLA_PARAMS_H
#define PERIGEE_HYBLA_PARAMS_H

struct hybla_params {
	__u32 rtt0_us;     /* Hybla's reference RTT; 0 = HYBLA_RTT0_DEFAULT_US */
	__u32 base_rtt_us; /* operator-set base RTT used for rho instead of min RTT; 0 = measured */
	__u32 generation;  /* bumped by every rewrite of the entry (for observers; the CC compares the
	                      values themselves, so an entry's removal reaches open flows too) */
	__u32 cwnd_max;    /* operator cwnd ceiling, segments; 0 = HYBLA_CWND_CEILING only */
};

/* Capacity of the per-namespace map; NETNS_MAX in crates/hybla/src/bpf_loader.rs. */
#define HYBLA_NETNS_MAX 256

#endif /* PERIGEE_HYBLA_PARAMS_H */
