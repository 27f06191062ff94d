//! TCP Hybla for the satellite leg: the kernel's own `hybla` when present, otherwise Perigee's
//! BPF struct_ops implementation registered under the same name, so `ip route ... congctl
//! hybla` and setsockopt(TCP_CONGESTION, "hybla") work identically either way. Next to it,
//! always Perigee's BPF: `hybla_ld`, Hybla with loss differentiation for links with bit errors
//! (docs/hybla.md).
use serde::Serialize;

mod bpf_loader;
pub mod fixed;
mod libbpf;
pub mod model;
mod prune;
mod sys;

pub use bpf_loader::{
    LdInfo, LdRegistration, BPF_VERSION, LD_INFO_PIN, LD_NAME, LD_OPS_PIN, LD_PIN_DIR, NETNS_MAX,
    NETNS_PARAMS_PIN, OPS_PIN, PARAMS_PIN, PIN_DIR,
};
pub use prune::{live_netns_cookies, prune_stale_netns, prune_stale_netns_observed, PruneReport};
pub use sys::netns_cookie;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Implementation {
    Kernel,
    Bpf,
    None,
}

/// One network namespace's own parameters (Perigee's BPF Hybla only). Its sockets use them
/// instead of the host-wide ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct NetnsParams {
    /// The namespace's cookie (SO_NETNS_COOKIE): unique per namespace until reboot.
    pub cookie: u64,
    pub rtt0_ms: u32,
    pub base_rtt_ms: u32,
    pub cwnd_max: u32,
}

impl NetnsParams {
    fn from_value(cookie: u64, v: bpf_loader::ParamsValue) -> NetnsParams {
        NetnsParams {
            cookie,
            rtt0_ms: rtt0_ms_of(v.rtt0_us),
            base_rtt_ms: v.base_rtt_us / 1000,
            cwnd_max: v.cwnd_max,
        }
    }

    pub fn params(&self) -> HyblaParams {
        HyblaParams {
            rtt0_ms: self.rtt0_ms,
            base_rtt_ms: self.base_rtt_ms,
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
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
    /// The caller's network namespace cookie (None if the kernel cannot tell, < 5.14).
    pub netns_cookie: Option<u64>,
    /// Per-namespace entries (rtt0_ms, base_rtt_ms, cwnd_max above are the host-wide entry,
    /// which namespaces without one of their own use).
    pub netns: Vec<NetnsParams>,
    /// `hybla_ld`, the loss-differentiating variant (always Perigee's BPF).
    pub ld: LdStatus,
}

/// The `hybla_ld` registration as this build sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LdStatus {
    /// `hybla_ld` is registered (usable by routes and sockets).
    pub loaded: bool,
    /// missing | current | newer | stale | foreign (see [`LdRegistration`]).
    pub registration: String,
    /// BPF version of the Perigee build that registered it (ours only).
    pub version: Option<u32>,
    pub problem: Option<String>,
}

impl Default for LdStatus {
    /// Not registered, nothing known.
    fn default() -> Self {
        LdStatus {
            loaded: false,
            registration: "missing".into(),
            version: None,
            problem: None,
        }
    }
}

impl LdStatus {
    fn read(available: &[String]) -> LdStatus {
        let loaded = available.iter().any(|n| n == LD_NAME);
        let reg = bpf_loader::ld_registration(loaded);
        let version = matches!(
            reg,
            LdRegistration::Current | LdRegistration::Newer(_) | LdRegistration::Stale(_)
        )
        .then(|| bpf_loader::read_ld_info().ok().map(|i| i.version))
        .flatten();
        let (registration, problem) = match reg {
            LdRegistration::Missing => (
                "missing",
                Some(format!(
                    "{LD_NAME} is not registered: run `perigee hybla load`"
                )),
            ),
            LdRegistration::Current => ("current", None),
            LdRegistration::Newer(_) => ("newer", None),
            LdRegistration::Stale(why) => (
                "stale",
                Some(format!(
                    "{LD_NAME} must be registered again ({why}): run `perigee hybla load`"
                )),
            ),
            LdRegistration::Foreign => (
                "foreign",
                Some(format!(
                    "a BPF `{LD_NAME}` not loaded by perigee is registered (no pin at {LD_OPS_PIN})"
                )),
            ),
        };
        LdStatus {
            loaded,
            registration: registration.into(),
            version,
            problem,
        }
    }
}

impl HyblaStatus {
    /// The caller's namespace's own entry, if it has one.
    pub fn own_netns(&self) -> Option<&NetnsParams> {
        let cookie = self.netns_cookie?;
        self.netns.iter().find(|e| e.cookie == cookie)
    }
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
    #[error(
        "the registered Perigee Hybla predates per-namespace parameters: run `perigee hybla \
         load` to re-register it (open connections keep running)"
    )]
    Outdated,
    #[error(
        "per-namespace Hybla parameters are full ({0} namespaces): list them with `perigee \
         hybla status`; `perigee hybla prune` removes those of namespaces that no longer \
         exist (a gateway killed without a clean stop), `perigee hybla unset --cookie N` any one"
    )]
    NetnsFull(u32),
    #[error(
        "cannot tell which per-namespace Hybla entries are stale, so none was removed (pruning \
         needs root, in the host's PID namespace): {0}"
    )]
    PruneUndecided(String),
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
    let available_now = available.clone();
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
        netns_cookie: sys::netns_cookie().ok(),
        netns: Vec::new(),
        ld: LdStatus::read(&available_now),
    };
    if owned {
        match bpf_loader::read_params() {
            Ok(p) => {
                st.rtt0_ms = rtt0_ms_of(p.rtt0_us);
                st.base_rtt_ms = p.base_rtt_us / 1000;
                st.cwnd_max = p.cwnd_max;
            }
            Err(e) => st.problem = Some(format!("cannot read the params map: {e}")),
        }
        match bpf_loader::read_netns_params() {
            Ok(entries) => {
                st.netns = entries
                    .into_iter()
                    .map(|(cookie, v)| NetnsParams::from_value(cookie, v))
                    .collect()
            }
            Err(e) => {
                st.problem
                    .get_or_insert_with(|| format!("per-namespace parameters: {e}"));
            }
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

fn rtt0_ms_of(rtt0_us: u32) -> u32 {
    if rtt0_us == 0 {
        DEFAULT_RTT0_MS
    } else {
        rtt0_us / 1000
    }
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

/// Ours is registered but predates per-namespace parameters: `load` re-registers it.
pub fn outdated() -> bool {
    bpf_loader::outdated()
}

/// Whether `load` has something to do: hybla missing or outdated, or hybla_ld missing or
/// stale (a current, newer or foreign hybla_ld is left as it is).
pub fn needs_load() -> bool {
    let available = sys::available();
    let ld_loaded = available.iter().any(|n| n == LD_NAME);
    !available.iter().any(|n| n == "hybla")
        || outdated()
        || matches!(
            bpf_loader::ld_registration(ld_loaded),
            LdRegistration::Missing | LdRegistration::Stale(_)
        )
}

/// Make `hybla` available: the kernel's if it has one, otherwise ours with `params`; and
/// `hybla_ld` next to it over the same parameter maps.
/// Idempotent: an existing registration is kept as is (use `set_params` to change it), except
/// one of ours without per-namespace parameters, which is replaced keeping its host-wide
/// parameters (open connections keep the old program until they close), and a stale hybla_ld
/// (see [`LdRegistration`]). A hybla_ld that cannot be loaded does not fail the load: the
/// returned status says why in `ld.problem`.
pub fn load_with_params(params: HyblaParams) -> Result<HyblaStatus, HyblaError> {
    let (mut rtt0_us, mut base_rtt_us) = validate(params)?;
    let _lock = bpf_loader::load_lock();
    let mut cwnd_max = 0;
    if bpf_loader::outdated() {
        let old = bpf_loader::read_params()?;
        (rtt0_us, base_rtt_us, cwnd_max) = (old.rtt0_us, old.base_rtt_us, old.cwnd_max);
        unload_locked()?;
    }
    if !sys::hybla_available() {
        sys::try_modprobe();
    }
    let initial = bpf_loader::ParamsValue {
        rtt0_us,
        base_rtt_us,
        generation: 1,
        cwnd_max,
    };
    if !sys::hybla_available() {
        // A pin without a registration is debris from an earlier crash or reboot-less unregister.
        bpf_loader::remove_pins();
        if let Some(problem) = sys::bpf_load_problem(true) {
            return Err(if problem.starts_with("not permitted") {
                HyblaError::NotPermitted(problem)
            } else {
                HyblaError::Unsupported(problem)
            });
        }
        bpf_loader::load(initial)?;
    }
    let ld_error = load_ld(initial).err();
    let mut st = status();
    if let Some(e) = ld_error {
        st.ld.problem = Some(format!("{LD_NAME} could not be loaded: {e}"));
    }
    Ok(st)
}

/// hybla_ld, when this host can load BPF (the kernel's tcp_hybla needs no such rights).
fn load_ld(initial: bpf_loader::ParamsValue) -> Result<(), HyblaError> {
    let registered = sys::available().iter().any(|n| n == LD_NAME);
    if !matches!(
        bpf_loader::ld_registration(registered),
        LdRegistration::Missing | LdRegistration::Stale(_)
    ) {
        return bpf_loader::load_ld(initial, registered);
    }
    if let Some(problem) = sys::bpf_load_problem(true) {
        return Err(if problem.starts_with("not permitted") {
            HyblaError::NotPermitted(problem)
        } else {
            HyblaError::Unsupported(problem)
        });
    }
    bpf_loader::load_ld(initial, registered)
}

/// Remove Perigee's BPF `hybla` and `hybla_ld`; a kernel `hybla` (or anyone else's) is never
/// touched. Idempotent.
pub fn unload() -> Result<(), HyblaError> {
    let _lock = bpf_loader::load_lock();
    unload_locked()
}

fn unload_locked() -> Result<(), HyblaError> {
    let ours = [OPS_PIN, PARAMS_PIN, LD_OPS_PIN];
    if ours.iter().any(|p| std::path::Path::new(p).exists()) {
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
            })?;
            // hybla_ld (ours) next to the kernel's hybla reads our host-wide entry.
            if std::path::Path::new(PARAMS_PIN).exists() {
                bpf_loader::update_params(|p| p.rtt0_us = rtt0_us)?;
            }
            Ok(())
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
    validate_ceiling(segments)?;
    let st = status();
    if st.owned {
        bpf_loader::update_params(|p| p.cwnd_max = segments)?;
        return Ok(());
    }
    match st.implementation {
        Implementation::Kernel if segments == 0 => Ok(()),
        Implementation::Kernel => Err(HyblaError::Unsupported(
            "the kernel's tcp_hybla has no cwnd ceiling; cap the route instead \
             (ip route change ... cwnd N lock), or unload the kernel module (rmmod tcp_hybla) \
             and `perigee hybla load` the BPF one"
                .into(),
        )),
        Implementation::Bpf => Err(HyblaError::Unsupported(
            st.problem
                .unwrap_or_else(|| "hybla is not Perigee's".into()),
        )),
        Implementation::None => Err(HyblaError::NotLoaded),
    }
}

/// Give the calling thread's network namespace its own parameters (Perigee's BPF Hybla only):
/// its sockets use them instead of the host-wide entry, open connections from their next ACK.
/// Returns the namespace cookie. At most NETNS_MAX namespaces have entries
/// ([`HyblaError::NetnsFull`]). The kernel's tcp_hybla has host-wide parameters only.
pub fn set_netns_params(params: HyblaParams, cwnd_max: u32) -> Result<u64, HyblaError> {
    let (rtt0_us, base_rtt_us) = validate(params)?;
    validate_ceiling(cwnd_max)?;
    require_owned("per-namespace parameters")?;
    let cookie = sys::netns_cookie().map_err(|e| HyblaError::Io {
        what: "read this network namespace's cookie (SO_NETNS_COOKIE, Linux 5.14+)".into(),
        source: e,
    })?;
    bpf_loader::write_netns_params(
        cookie,
        bpf_loader::ParamsValue {
            rtt0_us,
            base_rtt_us,
            generation: 0,
            cwnd_max,
        },
    )?;
    Ok(cookie)
}

/// Remove a namespace's own parameters (the calling thread's when `cookie` is None), so its
/// sockets fall back to the host-wide entry. Ok(false) when it had none.
pub fn unset_netns_params(cookie: Option<u64>) -> Result<bool, HyblaError> {
    if !std::path::Path::new(OPS_PIN).exists() {
        return Ok(false); // not ours, or not loaded: there are no entries to remove
    }
    let cookie = match cookie {
        Some(c) => c,
        None => sys::netns_cookie().map_err(|e| HyblaError::Io {
            what: "read this network namespace's cookie (SO_NETNS_COOKIE, Linux 5.14+)".into(),
            source: e,
        })?,
    };
    bpf_loader::remove_netns_params(cookie)
}

/// Ok when the registered hybla is Perigee's BPF one; otherwise why `what` cannot be set.
fn require_owned(what: &str) -> Result<(), HyblaError> {
    let st = status();
    if st.owned {
        return Ok(());
    }
    Err(match st.implementation {
        Implementation::Kernel => HyblaError::Unsupported(format!(
            "the kernel's tcp_hybla has no {what} (its rtt0 is host-wide); unload the kernel \
             module (rmmod tcp_hybla) and `perigee hybla load` the BPF one"
        )),
        Implementation::Bpf => HyblaError::Unsupported(
            st.problem
                .unwrap_or_else(|| "hybla is not Perigee's".into()),
        ),
        Implementation::None => HyblaError::NotLoaded,
    })
}

fn validate_ceiling(segments: u32) -> Result<(), HyblaError> {
    if segments > MAX_CWND_CEILING {
        return Err(HyblaError::InvalidParams(format!(
            "cwnd_max must be 0..={MAX_CWND_CEILING} segments, got {segments}"
        )));
    }
    Ok(())
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
