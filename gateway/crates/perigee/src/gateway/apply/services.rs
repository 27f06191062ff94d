//! The child services' steps: the resolver (`dns`, unbound) and the cache (`squid`). Neither
//! replaces a working config with one its own checker rejects, so a failed apply leaves the
//! service as it was; a rollback applies the previous policy again (or stops the service
//! when there was none).
use super::super::config::GatewayConfig;
use super::super::log;
use super::{ApplyError, ApplyStep};
use perigee_dns::UnboundManager;
use perigee_squid::SquidManager;
use serde_json::json;

/// The `dns` step of an apply: the new resolver policy, and the previous one to go back to.
pub struct DnsStep<'a> {
    pub mgr: &'a mut UnboundManager,
    pub new: &'a GatewayConfig,
    /// None on the first apply: going back means stopping unbound.
    pub prev: Option<&'a GatewayConfig>,
}

impl ApplyStep for DnsStep<'_> {
    fn name(&self) -> &'static str {
        "dns"
    }

    fn apply(&mut self) -> Result<(), ApplyError> {
        match self.mgr.apply(
            &self.new.dns,
            &self.new.served_subnets,
            self.new.dns_forwarding(),
        ) {
            Ok(report) => {
                log::info(
                    "resolver applied",
                    json!({"action": report.action, "cache_records_kept": report.cache_records_kept}),
                );
                Ok(())
            }
            Err(e) => Err(ApplyError::new(
                "dns",
                format!("{}: {}", e.code, e.message),
                e.field,
            )),
        }
    }

    fn rollback(&mut self) {
        let result = match self.prev {
            Some(p) => self
                .mgr
                .apply(&p.dns, &p.served_subnets, p.dns_forwarding())
                .map(|_| ()),
            None => {
                self.mgr.stop();
                Ok(())
            }
        };
        if let Err(e) = result {
            log::error(
                "could not restore the previous resolver policy",
                json!({"error": e.to_string()}),
            );
        }
    }
}

/// The `squid` step of an apply: the new cache policy, and the previous one to go back to.
pub struct SquidStep<'a> {
    pub mgr: &'a mut SquidManager,
    pub new: &'a GatewayConfig,
    /// None on the first apply: going back means stopping Squid.
    pub prev: Option<&'a GatewayConfig>,
}

impl ApplyStep for SquidStep<'_> {
    fn name(&self) -> &'static str {
        "squid"
    }

    fn apply(&mut self) -> Result<(), ApplyError> {
        let ns = self.new.squid_nameservers();
        match self.mgr.apply(
            &self.new.cache,
            &self.new.served_subnets,
            &self.new.served_limits,
            &ns,
        ) {
            Ok(report) => {
                log::info(
                    "cache applied",
                    json!({"action": report.action, "collapsed_forwarding_effective": report.collapsed_forwarding_effective}),
                );
                Ok(())
            }
            Err(e) => Err(ApplyError::new(
                "squid",
                format!("{}: {}", e.code, e.message),
                e.field,
            )),
        }
    }

    fn rollback(&mut self) {
        let result = match self.prev {
            Some(p) => self
                .mgr
                .apply(
                    &p.cache,
                    &p.served_subnets,
                    &p.served_limits,
                    &p.squid_nameservers(),
                )
                .map(|_| ()),
            None => {
                self.mgr.stop();
                Ok(())
            }
        };
        if let Err(e) = result {
            log::error(
                "could not restore the previous cache policy",
                json!({"error": e.to_string()}),
            );
        }
    }
}
