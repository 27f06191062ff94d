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

/*
 * Value of hybla_ld's one-entry info map (/sys/fs/bpf/perigee-hybla-ld/info), for the loader
 * only: which build registered hybla_ld and the IDs of the parameter maps it reads, so that a
 * build replaces the registration only when it is strictly newer, or when the pinned maps it
 * should share with hybla were replaced. Mirrored by `LdInfo` in crates/hybla/src/bpf_loader.rs.
 */
struct hybla_ld_info {
	__u32 version;       /* HYBLA_BPF_VERSION of the build that registered it */
	__u32 params_map_id; /* kernel IDs of the hybla_params / hybla_ns_params maps it uses */
	__u32 netns_map_id;
	__u32 reserved;
};

/* 1: host-wide parameters, 2: per-namespace parameters, 3: hybla_ld, 4: hybla_ld re-learns a
 * minimum RTT that a delay step made stale, 5: hybla_ld's rounds on a grid the flows of a path
 * share, 6: hybla_ld's rho at least HYBLA_LD_RHO_MIN. BPF_VERSION in the loader. */
#define HYBLA_BPF_VERSION 6

/* Capacity of the per-namespace map; NETNS_MAX in crates/hybla/src/bpf_loader.rs. */
#define HYBLA_NETNS_MAX 256

#endif /* PERIGEE_HYBLA_PARAMS_H */
