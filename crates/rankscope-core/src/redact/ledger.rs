//! What redactors that share a key kept, hashed and removed, by name, so that their statements
//! add up exactly: the app redacts a job's tables in several places (the analysis' tables in
//! the tab, each rank's events in the worker that holds it), each with its own [`Redactor`],
//! and the tar's `redaction.json` is the statement of all of them together.
//!
//! Counts alone do not add: a name met on two ranks is one name. A ledger keeps the names
//! (in memory only; never written), so the union counts each once. Where two redactors judged
//! one string differently, the first ledger merged wins its kind (the CLI's one redactor
//! gathers the ranks' names before the analysis'); a string hashed anywhere is hashed, not
//! kept, since some table holds its token.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{Kind, Redactor, Statement};

/// One redactor's names: kept, hashed (with what they were), and what it took out whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// The key was the user's (`--redact-key`), not drawn for the run.
    pub given: bool,
    pub kept: BTreeSet<String>,
    pub hashed: BTreeMap<String, Kind>,
    pub removed: BTreeMap<String, u64>,
}

impl Ledger {
    /// `later`'s names and removals added to these: a string already hashed keeps its kind;
    /// removals add up (each redactor took out its own).
    pub fn merge(&mut self, later: Ledger) {
        self.given |= later.given;
        for (s, kind) in later.hashed {
            self.hashed.entry(s).or_insert(kind);
        }
        self.kept.extend(later.kept);
        for (what, n) in later.removed {
            *self.removed.entry(what).or_default() += n;
        }
    }

    /// The statement of everything merged: a string hashed anywhere is counted as hashed only.
    pub fn statement(&self) -> Statement {
        let kept = self.kept.iter().filter(|s| !self.hashed.contains_key(*s)).count();
        Statement::of(self.given, kept, self.hashed.values().copied(), self.removed.clone())
    }
}

impl Redactor {
    /// This redactor's names, for a statement merged with other redactors' ([`Ledger::merge`]).
    pub fn ledger(&self) -> Ledger {
        Ledger {
            given: self.key.given,
            kept: self.kept.keys().cloned().collect(),
            hashed: self.hashed.iter().map(|(s, k)| (s.clone(), *k)).collect(),
            removed: self.removed.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::Key;

    /// Three redactors over overlapping names give, merged, the statement one redactor over
    /// all the names gives.
    #[test]
    fn merged_ledgers_state_what_one_redactor_would() {
        let key = || Key::from_phrase("k");
        let parts: [&[&str]; 3] = [
            &["my_model.encoder", "aten::mm", "train.py(12): step"],
            &["my_model.encoder", "aten::add", "/home/me/data/x.bin"],
            &["decoder_block", "aten::mm", "train.py(12): step"],
        ];
        let mut one = Redactor::new(key());
        let mut merged = Ledger::default();
        for names in parts {
            let mut r = Redactor::new(key());
            for n in names {
                r.consider(n);
                one.consider(n);
            }
            r.removed("source args of a kind rankscope does not read", 2);
            merged.merge(r.ledger());
        }
        one.removed("source args of a kind rankscope does not read", 6);
        assert_eq!(merged.statement(), one.statement());
        let st = merged.statement();
        assert_eq!(st.hashed.values().sum::<usize>(), 4, "{st:?}");
        assert_eq!(st.kept_names, 2, "{st:?}");
        assert_eq!(st.key, "given");
    }

    /// A string one redactor kept and another hashed is hashed in the union (a table holds
    /// its token), and the first kind met stays.
    #[test]
    fn hashed_anywhere_is_hashed_and_the_first_kind_stays() {
        let mut a = Redactor::new(Key::from_phrase("k"));
        a.hide("node-7", Kind::Host);
        let mut b = Redactor::new(Key::from_phrase("k"));
        b.consider("node-7");
        let mut c = Redactor::new(Key::from_phrase("k"));
        c.hide("node-7", Kind::Name);
        let mut l = a.ledger();
        l.merge(b.ledger());
        l.merge(c.ledger());
        let st = l.statement();
        assert_eq!(st.kept_names, 0, "{st:?}");
        assert_eq!(st.hashed, BTreeMap::from([(Kind::Host, 1)]));
    }

    /// The ledger crosses the app's worker boundary as JSON.
    #[test]
    fn a_ledger_round_trips_as_json() {
        let mut r = Redactor::new(Key::per_run());
        r.consider("my_model.encoder");
        r.consider("aten::mm");
        r.removed("x", 1);
        let l = r.ledger();
        let back: Ledger =
            serde_json::from_str(&serde_json::to_string(&l).unwrap_or_default()).unwrap_or_default();
        assert_eq!(back, l);
        assert!(!back.given);
    }
}
