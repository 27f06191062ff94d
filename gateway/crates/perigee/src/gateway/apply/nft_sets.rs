//! The nft sets the daemon switches at run time, outside an apply: each holds the protocols a
//! group of rules matches only while the set has them (the table must be in place).
use super::super::render::{CACHE_UP_SET, DNS_UP_SET, TABLE};
use super::command::nft;

/// Put `tcp` into / take it out of the overflow set (new SYNs routed unsplit while present).
pub fn set_overflow(on: bool) -> Result<(), String> {
    let verb = if on { "add" } else { "delete" };
    let text = if on {
        format!("{verb} element inet {TABLE} overflow {{ tcp }}\n")
    } else {
        format!("flush set inet {TABLE} overflow\n")
    };
    nft(&text)
}

/// Put `udp` and `tcp` into / take them out of the dns_up set: the port-53 rules toward the
/// resolver only match while they are there, so while it is down queries go where they were
/// sent.
pub fn set_dns_up(on: bool) -> Result<(), String> {
    let set = DNS_UP_SET;
    let text = if on {
        format!("add element inet {TABLE} {set} {{ udp, tcp }}\n")
    } else {
        format!("flush set inet {TABLE} {set}\n")
    };
    nft(&text)
}

/// Put `tcp` into / take it out of the cache_up set: the port-80 rules toward Squid only match
/// while it is there, so a dead Squid fails over to the splitter.
pub fn set_cache_up(on: bool) -> Result<(), String> {
    let set = CACHE_UP_SET;
    let text = if on {
        format!("add element inet {TABLE} {set} {{ tcp }}\n")
    } else {
        format!("flush set inet {TABLE} {set}\n")
    };
    nft(&text)
}
