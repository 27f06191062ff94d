//! TCP Hybla for the satellite leg: the kernel's own `hybla` when present, otherwise Perigee's
//! BPF struct_ops implementation registered under the same name. (Skeleton: issue 3 fills it.)
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HyblaParams {
    /// Hybla's reference RTT (RTT0), milliseconds.
    pub rtt0_ms: u32,
    /// Operator-set base RTT used for rho instead of the measured one; 0 = measured min RTT.
    pub base_rtt_ms: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Implementation {
    Kernel,
    Bpf,
    None,
}

#[derive(Debug, Clone, Serialize)]
pub struct HyblaStatus {
    pub implementation: Implementation,
    pub loaded: bool,
    pub rtt0_ms: u32,
    pub base_rtt_ms: u32,
    pub available: Vec<String>,
    pub problem: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum HyblaError {
    #[error("not implemented yet")]
    NotImplemented,
}

pub fn status() -> HyblaStatus {
    HyblaStatus {
        implementation: Implementation::None,
        loaded: false,
        rtt0_ms: 25,
        base_rtt_ms: 0,
        available: Vec::new(),
        problem: Some("not implemented yet".into()),
    }
}

pub fn load() -> Result<HyblaStatus, HyblaError> {
    Err(HyblaError::NotImplemented)
}

pub fn unload() -> Result<(), HyblaError> {
    Err(HyblaError::NotImplemented)
}

pub fn set_params(_params: HyblaParams) -> Result<(), HyblaError> {
    Err(HyblaError::NotImplemented)
}
