"""A hub cluster in satlab: N gateways between two routers that spread flows over them with kernel ECMP,
learn them over BGP with BFD (FRR), and keep both directions of a flow on one gateway (docs/cluster.md)."""
