//! TCP Hybla for the satellite leg: the kernel's own `hybla` when present, otherwise Perigee's
//! BPF struct_ops implementation registered under the same name, so `ip route ... congctl
//! hybla` and setsockopt(TCP_CONGESTION, "hybla") work identically either way.
use serde::Serialize;

mod bpf_loader;
pub mod fixed;
mod libbpf;
pub mod model;
mod sys;

pub use bpf_loader::{OPS_PIN, PARAMS_PIN, PIN_DIR};

pub const DEFAULT_RTT0_MS: u32 = 25;
/// Upper bounds accepted by `set_params` (beyond them rho is capped anyway).
pub const MAX_RTT0_MS: u32 = 10_000;
pub const MAX_BASE_RTT_MS: u32 = 60_000;
/// Largest operator cwnd ceiling, segments: the BPF CC's built-in clamp.
pub const MAX_CWND_CEILING: u32 = fixed::CWND_CEILING;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HyblaParams {
    /// Hybla's reference RTT (RTT0), milliseconds.
    pub rtt0_ms: u32,
    /// Operator-set base RTT used for rho instead of the measured one; 0 = measured min RTT.
    pub base_rtt_ms: u32,
}

impl Default for HyblaParams {
    fn default() -> Self {
        HyblaParams {
            rtt0_ms: DEFAULT_RTT0_MS,
            base_rtt_ms: 0,
        }
    }
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
    /// `hybla` is registered (usable by routes and sockets).
    pub loaded: bool,
    pub rtt0_ms: u32,
    pub base_rtt_ms: u32,
    /// Operator cwnd ceiling, segments; 0 = only the built-in 65536 (and the socket's clamp).
    pub cwnd_max: u32,
    pub available: Vec<String>,
    pub problem: Option<String>,
    /// The registration is Perigee's own BPF one (so `unload` would remove it).
    pub owned: bool,
    /// Where Perigee pins its maps.
    pub pin_dir: String,
}

#[derive(Debug, thiserror::Error)]
pub enum HyblaError {
    #[error("{0}")]
    NotPermitted(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("hybla is not loaded: run `perigee hybla load` first")]
    NotLoaded,
    #[error("invalid parameter: {0}")]
    InvalidParams(String),
    #[error("BPF {step}: {source}")]
    Bpf {
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

/// Which implementation provides `hybla` right now, and with which parameters.
pub fn status() -> HyblaStatus {
    let available = sys::available();
    let loaded = available.iter().any(|n| n == "hybla");
    let owned = loaded && std::path::Path::new(OPS_PIN).exists();
    let kernel = loaded && !owned && sys::kernel_hybla_present();
    let mut st = HyblaStatus {
        implementation: match (loaded, kernel) {
            (false, _) => Implementation::None,
            (true, true) => Implementation::Kernel,
            (true, false) => Implementation::Bpf,
        },
        loaded,
        rtt0_ms: DEFAULT_RTT0_MS,
        base_rtt_ms: 0,
        cwnd_max: 0,
        available,
        problem: None,
        owned,
        pin_dir: PIN_DIR.to_string(),
    };
    if owned {
        match bpf_loader::read_params() {
            Ok(p) => {
                st.rtt0_ms = if p.rtt0_us == 0 {
                    DEFAULT_RTT0_MS
                } else {
                    p.rtt0_us / 1000
                };
                st.base_rtt_ms = p.base_rtt_us / 1000;
                st.cwnd_max = p.cwnd_max;
            }
            Err(e) => st.problem = Some(format!("cannot read the params map: {e}")),
        }
    } else if kernel {
        if let Some(v) = kernel_rtt0_ms() {
            st.rtt0_ms = v;
        }
    } else if loaded {
        st.problem = Some(format!(
            "a BPF `hybla` not loaded by perigee is registered (no pin at {OPS_PIN}); perigee \
             leaves it alone and cannot set its parameters"
        ));
    } else {
        let hint = sys::bpf_load_problem(false)
            .map(|p| format!("; loading would fail: {p}"))
            .unwrap_or_default();
        st.problem = Some(format!(
            "hybla is not registered: run `perigee hybla load`{hint}"
        ));
    }
    st
}

fn kernel_rtt0_ms() -> Option<u32> {
    std::fs::read_to_string(sys::KERNEL_RTT0_PARAM)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Make `hybla` available with default parameters. Idempotent.
pub fn load() -> Result<HyblaStatus, HyblaError> {
    load_with_params(HyblaParams::default())
}

/// Make `hybla` available: the kernel's if it has one, otherwise ours with `params`.
/// Idempotent: an existing registration is kept as is (use `set_params` to change it).
pub fn load_with_params(params: HyblaParams) -> Result<HyblaStatus, HyblaError> {
    let (rtt0_us, base_rtt_us) = validate(params)?;
    if !sys::hybla_available() {
        sys::try_modprobe();
    }
    if sys::hybla_available() {
        return Ok(status());
    }
    // A pin without a registration is debris from an earlier crash or reboot-less unregister.
    bpf_loader::remove_pins();
    if let Some(problem) = sys::bpf_load_problem(true) {
        return Err(if problem.starts_with("not permitted") {
            HyblaError::NotPermitted(problem)
        } else {
            HyblaError::Unsupported(problem)
        });
    }
    let initial = bpf_loader::ParamsValue {
        rtt0_us,
        base_rtt_us,
        generation: 1,
        cwnd_max: 0,
    };
    bpf_loader::load(initial)?;
    Ok(status())
}

/// Remove Perigee's BPF `hybla`; a kernel `hybla` (or anyone else's) is never touched.
/// Idempotent.
pub fn unload() -> Result<(), HyblaError> {
    if std::path::Path::new(OPS_PIN).exists() || std::path::Path::new(PARAMS_PIN).exists() {
        if let Some(problem) =
            sys::bpf_load_problem(false).filter(|p| p.starts_with("not permitted"))
        {
            return Err(HyblaError::NotPermitted(problem));
        }
    }
    bpf_loader::unload()
}

/// Change RTT0 and the base RTT at run time. Ours: rewrites the pinned map; open connections
/// pick the new rho up on their next ACK. Kernel's: writes its rtt0 module parameter (it has
/// no base RTT, so a nonzero one is refused).
pub fn set_params(params: HyblaParams) -> Result<(), HyblaError> {
    let (rtt0_us, base_rtt_us) = validate(params)?;
    let st = status();
    if st.owned {
        // The cwnd ceiling is kept: it has its own setter.
        bpf_loader::update_params(|p| {
            p.rtt0_us = rtt0_us;
            p.base_rtt_us = base_rtt_us;
        })?;
        return Ok(());
    }
    match st.implementation {
        Implementation::Kernel => {
            if params.base_rtt_ms != 0 {
                return Err(HyblaError::Unsupported(
                    "the kernel's tcp_hybla has no base-RTT parameter; use --base-rtt-ms 0, or \
                     unload the kernel module (rmmod tcp_hybla) and `perigee hybla load` the BPF one"
                        .into(),
                ));
            }
            std::fs::write(sys::KERNEL_RTT0_PARAM, params.rtt0_ms.to_string()).map_err(|e| {
                HyblaError::Io {
                    what: format!("write {}", sys::KERNEL_RTT0_PARAM),
                    source: e,
                }
            })
        }
        Implementation::Bpf => Err(HyblaError::Unsupported(
            st.problem
                .unwrap_or_else(|| "hybla is not Perigee's".into()),
        )),
        Implementation::None => Err(HyblaError::NotLoaded),
    }
}

/// Set the operator cwnd ceiling (segments) every cwnd update of Perigee's BPF Hybla respects;
/// 0 = only the built-in 65536. Changes apply to open connections on their next ACK (a window
/// above a lowered ceiling is cut to it). Use [`cwnd_ceiling_for_link`] to derive it from the
/// granted rate. The kernel's tcp_hybla has no such parameter: a nonzero value is refused there.
pub fn set_cwnd_ceiling(segments: u32) -> Result<(), HyblaError> {
    if segments > MAX_CWND_CEILING {
        return Err(HyblaError::InvalidParams(format!(
            "cwnd_max must be 0..={MAX_CWND_CEILING} segments, got {segments}"
        )));
    }
    let st = status();
    if st.owned {
        bpf_loader::update_params(|p| p.cwnd_max = segments)?;
        return Ok(());
    }
    match st.implementation {
        Implementation::Kernel if segments == 0 => Ok(()),
        Implementation::Kernel => Err(HyblaError::Unsupported(
            "the kernel's tcp_hybla has no cwnd ceiling; cap the route instead              (ip route change ... cwnd N lock), or unload the kernel module (rmmod tcp_hybla)              and `perigee hybla load` the BPF one"
                .into(),
        )),
        Implementation::Bpf => Err(HyblaError::Unsupported(
            st.problem
                .unwrap_or_else(|| "hybla is not Perigee's".into()),
        )),
        Implementation::None => Err(HyblaError::NotLoaded),
    }
}

/// Cwnd ceiling for a satellite link, segments: two bandwidth-delay products of the granted
/// rate over the RTT the flow sees (propagation + BoD allocation delay),
/// `ceil(2 * rate * (base_rtt + alloc_delay) / (8 * mss))`, within 1..=MAX_CWND_CEILING.
/// Two BDPs leave room for slow start's overshoot and the modem queue without letting one
/// ACK at GEO rho (2^24 segments) turn into a line-rate burst. `mss` 0 is taken as 1.
pub fn cwnd_ceiling_for_link(
    rate_bit_s: u64,
    base_rtt_ms: u32,
    alloc_delay_ms: u32,
    mss: u32,
) -> u32 {
    let delay_ms = u128::from(base_rtt_ms) + u128::from(alloc_delay_ms);
    let num = 2 * u128::from(rate_bit_s) * delay_ms;
    let den = 8 * 1000 * u128::from(mss.max(1));
    let segments = num.div_ceil(den);
    segments.clamp(1, u128::from(MAX_CWND_CEILING)) as u32
}

fn validate(p: HyblaParams) -> Result<(u32, u32), HyblaError> {
    if p.rtt0_ms == 0 || p.rtt0_ms > MAX_RTT0_MS {
        return Err(HyblaError::InvalidParams(format!(
            "rtt0_ms must be 1..={MAX_RTT0_MS}, got {}",
            p.rtt0_ms
        )));
    }
    if p.base_rtt_ms > MAX_BASE_RTT_MS {
        return Err(HyblaError::InvalidParams(format!(
            "base_rtt_ms must be 0..={MAX_BASE_RTT_MS}, got {}",
            p.base_rtt_ms
        )));
    }
    Ok((p.rtt0_ms * 1000, p.base_rtt_ms * 1000))
}
