//! The nft sets the daemon switches at run time, outside an apply: each holds the protocols a
//! group of rules matches only while the set has them (the table must be in place).
use super::super::render::{CACHE_UP_SET, DNS_UP_SET, TABLE};
use super::command::nft;

/// Fill `set` with `elems` (on) or empty it (off).
fn switch_set(set: &str, elems: &str, on: bool) -> Result<(), String> {
    let text = if on {
        format!("add element inet {TABLE} {set} {{ {elems} }}\n")
    } else {
        format!("flush set inet {TABLE} {set}\n")
    };
    nft(&text)
}

/// Put `tcp` into / take it out of the overflow set (new SYNs routed unsplit while present).
pub fn set_overflow(on: bool) -> Result<(), String> {
    switch_set("overflow", "tcp", on)
}

/// Put `udp` and `tcp` into / take them out of the dns_up set: the port-53 rules toward the
/// resolver only match while they are there, so while it is down queries go where they were
/// sent.
pub fn set_dns_up(on: bool) -> Result<(), String> {
    switch_set(DNS_UP_SET, "udp, tcp", on)
}

/// Put `tcp` into / take it out of the cache_up set: the port-80 rules toward Squid only match
/// while it is there, so a dead Squid fails over to the splitter.
pub fn set_cache_up(on: bool) -> Result<(), String> {
    switch_set(CACHE_UP_SET, "tcp", on)
}
