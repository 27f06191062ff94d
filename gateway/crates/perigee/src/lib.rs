//! The gateway daemon as a library: the `perigee` binary (src/main.rs) and the fuzz targets
//! (gateway/fuzz) use the same control-protocol parser, config parser and renderers.
pub mod gateway;
