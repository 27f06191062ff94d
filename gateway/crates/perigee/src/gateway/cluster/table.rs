//! A hub cluster's bucket table as its controller last pushed it (`PUT /v1/cluster/table`,
//! docs/cluster.md, *The peer path through the cluster*): which gateway receives each bucket of
//! flows from the routers, and the hash the routers pick buckets with. A hub gateway refuses a
//! peer flow whose bucket is another gateway's (the server's answers would reach that one); a
//! terminal opens each flow on a warm connection to the flow's own gateway.
//!
//! The table is runtime state, not config: it changes within a second of a gateway failing, and
//! only the controller, which writes the routers, knows it.
use super::hash::{self, HashParams};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::net::SocketAddr;

pub const MAX_MEMBERS: usize = 16;
pub const MAX_BUCKETS: usize = 256;
pub const MAX_CHECKS: usize = 256;
/// Fewer checks than this could leave a wrong hash unnoticed in most buckets.
pub const MIN_CHECKS: usize = 16;
/// The only hash fields the gateway reproduces: source and destination address, protocol,
/// source and destination port (`fib_multipath_hash_fields=0x0037`).
pub const FIELDS: u32 = 0x0037;

/// One gateway of the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterMember {
    /// Its name in the table (the controller's), 1-32 characters.
    pub name: String,
    /// Its peer listener: where a terminal opens the flows of this gateway's buckets.
    pub peer: SocketAddr,
}

/// A flow and the gateway the routers' kernel sent it to under this table: the gateway refuses
/// a table its own hash disagrees with, instead of aiming flows at the wrong gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OwnerCheck {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// The member the router chose.
    pub member: String,
}

/// `PUT /v1/cluster/table`: the whole table, every time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterTable {
    /// The controller's generation of this table; a table older than the one held is refused.
    pub epoch: u64,
    /// Which member this gateway is; null at a terminal.
    pub member: Option<String>,
    pub members: Vec<ClusterMember>,
    /// Each bucket's gateway, by name; null for a bucket no gateway holds.
    pub buckets: Vec<Option<String>>,
    /// The routers' `net.ipv4.fib_multipath_hash_seed`.
    pub seed: u32,
    /// The routers' `fib_multipath_hash_fields`: only 0x0037 (55) is reproduced.
    pub fields: u32,
    /// At least 16 TCP flows with the gateway the routers' kernel chose for each.
    pub checks: Vec<OwnerCheck>,
}

/// Who receives a flow's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// This gateway (or no table: a lone hub owns everything).
    Me,
    /// Another gateway, with its peer listener.
    Other { name: String, peer: SocketAddr },
    /// A bucket no gateway holds now (every gateway down), or an address the hash does not cover.
    Unknown,
}

/// Why a table is refused: `(code, message)`.
pub type Refusal = (&'static str, String);

impl ClusterTable {
    fn params(&self) -> HashParams {
        HashParams {
            seed: self.seed,
            fields: self.fields,
        }
    }

    /// Every rule a table must meet before it is used; `held` is the table in use, if any.
    pub fn validate(&self, held: Option<&ClusterTable>) -> Result<(), Refusal> {
        let bad = |m: String| Err(("invalid_cluster_table", m));
        if self.members.is_empty() || self.members.len() > MAX_MEMBERS {
            return bad(format!("members: 1 to {MAX_MEMBERS} gateways"));
        }
        let mut names = HashSet::new();
        for m in &self.members {
            if m.name.is_empty() || m.name.len() > 32 {
                return bad(format!("member name '{}': 1 to 32 characters", m.name));
            }
            if !names.insert(m.name.as_str()) {
                return bad(format!("member '{}' is listed twice", m.name));
            }
            if m.peer.port() == 0 || m.peer.ip().is_unspecified() {
                return bad(format!(
                    "member '{}': peer must be an address and a port",
                    m.name
                ));
            }
        }
        if let Some(me) = &self.member {
            if !names.contains(me.as_str()) {
                return bad(format!("member '{me}' is not among the members"));
            }
        }
        if self.buckets.is_empty() || self.buckets.len() > MAX_BUCKETS {
            return bad(format!("buckets: 1 to {MAX_BUCKETS}"));
        }
        if let Some(b) = self
            .buckets
            .iter()
            .flatten()
            .find(|b| !names.contains(b.as_str()))
        {
            return bad(format!("a bucket names '{b}', which is not a member"));
        }
        if self.fields != FIELDS {
            return bad(format!(
                "fields {:#06x}: the gateway reproduces the routers' hash only with fields {FIELDS:#06x} \
                 (addresses, protocol, ports)",
                self.fields
            ));
        }
        if self.checks.len() < MIN_CHECKS || self.checks.len() > MAX_CHECKS {
            return bad(format!("checks: {MIN_CHECKS} to {MAX_CHECKS} flows"));
        }
        for c in &self.checks {
            let ours = self.member_of(c.src, c.dst);
            if ours != Some(c.member.as_str()) {
                return Err((
                    "hash_mismatch",
                    format!(
                        "the routers sent {} -> {} to {}, this gateway's hash says {}: flows would be \
                         aimed at the wrong gateway, so the table is refused",
                        c.src,
                        c.dst,
                        c.member,
                        ours.unwrap_or("none")
                    ),
                ));
            }
        }
        if let Some(h) = held {
            if self.epoch < h.epoch || (self.epoch == h.epoch && self != h) {
                return Err((
                    "stale_epoch",
                    format!(
                        "epoch {} is not newer than the table held (epoch {})",
                        self.epoch, h.epoch
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The name of the member holding the bucket of the TCP flow `src` -> `dst`.
    fn member_of(&self, src: SocketAddr, dst: SocketAddr) -> Option<&str> {
        let n = self.buckets.len() as u16;
        let b = hash::bucket(&self.params(), src, dst, n)?;
        self.buckets.get(b as usize)?.as_deref()
    }

    /// The gateway that receives the answers of the TCP flow `client` -> `server`.
    pub fn owner(&self, client: SocketAddr, server: SocketAddr) -> Owner {
        match self.member_of(client, server) {
            None => Owner::Unknown,
            Some(name) if Some(name) == self.member.as_deref() => Owner::Me,
            Some(name) => match self.members.iter().find(|m| m.name == name) {
                Some(m) => Owner::Other {
                    name: m.name.clone(),
                    peer: m.peer,
                },
                None => Owner::Unknown,
            },
        }
    }

    /// Each member's share of the buckets, in member order.
    pub fn shares(&self) -> Vec<(String, usize)> {
        self.members
            .iter()
            .map(|m| {
                let held = self
                    .buckets
                    .iter()
                    .flatten()
                    .filter(|b| **b == m.name)
                    .count();
                (m.name.clone(), held)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flows(n: usize) -> Vec<(SocketAddr, SocketAddr)> {
        (0..n)
            .map(|i| {
                (
                    format!("10.71.1.{}:{}", 2 + i % 200, 30000 + i)
                        .parse()
                        .unwrap(),
                    format!("10.71.3.{}:443", 1 + i % 7).parse().unwrap(),
                )
            })
            .collect()
    }

    fn table(seed: u32) -> ClusterTable {
        let members: Vec<ClusterMember> = (1..=3)
            .map(|k| ClusterMember {
                name: format!("gw{k}"),
                peer: format!("10.71.{}.2:7072", 10 + k).parse().unwrap(),
            })
            .collect();
        let p = HashParams {
            seed,
            fields: FIELDS,
        };
        ClusterTable {
            epoch: 1,
            member: Some("gw2".into()),
            buckets: (0..64).map(|b| Some(format!("gw{}", 1 + b % 3))).collect(),
            members,
            seed,
            fields: FIELDS,
            checks: flows(MIN_CHECKS)
                .into_iter()
                .map(|(src, dst)| OwnerCheck {
                    src,
                    dst,
                    member: format!("gw{}", 1 + hash::bucket(&p, src, dst, 64).unwrap() % 3),
                })
                .collect(),
        }
    }

    #[test]
    fn a_table_names_the_gateway_of_every_flow_and_its_reply() {
        let t = table(0x5EED_0001);
        t.validate(None).unwrap();
        let mut seen = HashSet::new();
        for (c, s) in flows(300) {
            let o = t.owner(c, s);
            assert_eq!(o, t.owner(s, c), "a flow and its reply share a gateway");
            seen.insert(format!("{o:?}"));
        }
        // gw2 is this gateway; gw1 and gw3 are named with their peer listeners.
        assert!(seen.contains("Me"));
        assert!(seen
            .iter()
            .any(|o| o.contains("gw1") && o.contains("10.71.11.2:7072")));
        assert!(seen.iter().any(|o| o.contains("gw3")));
        assert_eq!(
            t.shares(),
            vec![("gw1".into(), 22), ("gw2".into(), 21), ("gw3".into(), 21)]
        );
    }

    #[test]
    fn a_table_the_hash_disagrees_with_is_refused() {
        let mut t = table(7);
        t.checks[5].member = if t.checks[5].member == "gw1" {
            "gw2"
        } else {
            "gw1"
        }
        .into();
        let (code, why) = t.validate(None).unwrap_err();
        assert_eq!(code, "hash_mismatch");
        assert!(why.contains("the routers sent"), "{why}");
        // Another seed than the routers' is a mismatch too.
        let mut t = table(7);
        t.seed = 8;
        assert_eq!(t.validate(None).unwrap_err().0, "hash_mismatch");
    }

    #[test]
    fn bad_tables_are_refused_with_what_is_wrong() {
        type Change = Box<dyn Fn(&mut ClusterTable)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "not a member",
                Box::new(|t| t.buckets[3] = Some("gw9".into())),
            ),
            (
                "listed twice",
                Box::new(|t| t.members[1].name = "gw1".into()),
            ),
            (
                "among the members",
                Box::new(|t| t.member = Some("gw7".into())),
            ),
            ("fields", Box::new(|t| t.fields = 0x0007)),
            ("checks", Box::new(|t| t.checks.truncate(3))),
            ("buckets", Box::new(|t| t.buckets.clear())),
            ("peer must", Box::new(|t| t.members[0].peer.set_port(0))),
        ];
        for (what, change) in cases {
            let mut t = table(1);
            change(&mut t);
            let (code, why) = t.validate(None).unwrap_err();
            assert_eq!(code, "invalid_cluster_table");
            assert!(why.contains(what), "{what}: {why}");
        }
    }

    #[test]
    fn an_older_epoch_is_refused_and_the_same_table_again_is_fine() {
        let held = table(3);
        let mut t = held.clone();
        t.validate(Some(&held)).unwrap();
        t.buckets[0] = Some("gw3".into());
        assert_eq!(t.validate(Some(&held)).unwrap_err().0, "stale_epoch");
        t.epoch = 2;
        t.validate(Some(&held)).unwrap();
        t.epoch = 0;
        assert_eq!(t.validate(Some(&held)).unwrap_err().0, "stale_epoch");
    }

    #[test]
    fn a_bucket_nobody_holds_has_no_owner() {
        let mut t = table(4);
        t.buckets = vec![None; 64];
        let (c, s) = flows(1)[0];
        assert_eq!(t.owner(c, s), Owner::Unknown);
        t.member = None; // a terminal's copy: every held bucket is another gateway's
        t.buckets = (0..64).map(|_| Some("gw1".into())).collect();
        assert!(matches!(t.owner(c, s), Owner::Other { .. }));
    }
}
