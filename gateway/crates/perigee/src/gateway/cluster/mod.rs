//! The hub cluster's data plane as the routers' kernels see it (docs/cluster.md): their hash, the
//! bucket table their controller pushes (its routes: `cluster_control`; how it reaches the
//! terminals: `cluster_service`).
pub mod hash;
pub mod table;
