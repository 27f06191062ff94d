"""Stand-alone benchmarks of the gateway: the daemon holding many flows, BPF Hybla's start-up on a satlab path."""
