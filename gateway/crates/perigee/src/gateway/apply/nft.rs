//! The `nft` step: the whole ruleset as one `nft -f -` transaction, which applies whole or not
//! at all (so a failed one leaves nothing to undo).
use super::super::render::{delete_dup_tables, TABLE};
use super::command::nft;
use super::{ApplyError, ApplyStep};

pub struct NftStep<'a> {
    new: &'a str,
    /// The ruleset in force; None: there was no table of ours.
    prev: Option<&'a str>,
}

impl<'a> NftStep<'a> {
    pub fn new(new: &'a str, prev: Option<&'a str>) -> NftStep<'a> {
        NftStep { new, prev }
    }
}

impl ApplyStep for NftStep<'_> {
    fn name(&self) -> &'static str {
        "nft"
    }

    fn apply(&mut self) -> Result<(), ApplyError> {
        nft(self.new).map_err(|m| ApplyError::at("nft", m))
    }

    fn rollback(&mut self) {
        let _ = match self.prev {
            Some(t) => nft(t),
            None => delete_table(),
        };
    }
}

/// Remove our tables (no error when they are not there).
pub fn delete_table() -> Result<(), String> {
    nft(&format!(
        "table inet {TABLE} {{}}\ndelete table inet {TABLE}\n{}",
        delete_dup_tables()
    ))
}
