//! The hub cluster's data plane as the routers' kernels see it (docs/cluster.md): their hash, the
//! bucket table their controller pushes, and its control routes.
pub mod control;
pub mod hash;
pub mod table;
