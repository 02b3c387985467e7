//! Redaction before sharing (`rankscope analyze --redact`): a report, its JSON / CSV and the
//! exports with the user's names, paths, hosts and source args replaced by keyed tokens, so the
//! output can go to a vendor or a public bug tracker and still say what ran and how long.
//!
//! - **What is kept, hashed, removed** is decided by vocabulary ([`vocab::judge`]): the public
//!   names of PyTorch (`aten::`, `c10d::`, `nccl:`, `ProfilerStep#N`, the optimizer and data
//!   loader markers), CUDA / HIP runtime calls, NCCL and library kernels, Inductor's generated
//!   Triton kernels, Kineto's categories, and every figure rankscope measures are kept; the
//!   user's annotations, module names, Python frames, user kernels, thread and process names,
//!   process-group descriptions, hosts, file paths and the source args' text are hashed.
//! - **Tokens** are typed by what they replace (`name-…`, `frame-…`, `path-…`, `file-…`,
//!   `host-…`, `ip-…`, `arg-…`) and are SipHash-1-3 of the string under the run's [`Key`]: the
//!   same string gives the same token in every output of a run and on every rank; two runs (or
//!   a `part` on another machine) agree when given one key (`--redact-key`).
//! - **Where**: the names are gathered from the job (its string table, metadata, files) and
//!   from the analysis itself ([`Redactor::gather_value`]); the analysis is redacted as a
//!   value and read back, so every output written from it (Markdown, the terminal layout, CSV,
//!   JSON) shows tokens, even where a name is cut or quoted inside a sentence; the exports are
//!   written from the job redacted in place ([`job::redact_job`]); every text written is then
//!   passed once more over every spelling of every hashed string (raw, JSON-, Markdown- and
//!   CSV-escaped) and over absolute paths and IPv4 addresses ([`Redactor::text`]).

pub mod job;
pub mod ledger;
pub mod table;
pub mod vocab;

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher as _;

use serde::{Deserialize, Serialize};

use crate::model::strings::{Sip13, TableKey};

pub use ledger::Ledger;
pub use vocab::{judge, Verdict};

/// What a token replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// An annotation, module, kernel, thread, process or group name.
    Name,
    /// A Python frame (`file.py(41): fn`).
    Frame,
    /// A file path met in a name or in text.
    Path,
    /// An input file (its path and its base name).
    File,
    /// A host name.
    Host,
    /// An IPv4 address in text.
    Address,
    /// A source arg's key or string value.
    Arg,
}

impl Kind {
    pub const ALL: [Kind; 7] =
        [Kind::Name, Kind::Frame, Kind::Path, Kind::File, Kind::Host, Kind::Address, Kind::Arg];

    /// The token's prefix.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Name => "name",
            Kind::Frame => "frame",
            Kind::Path => "path",
            Kind::File => "file",
            Kind::Host => "host",
            Kind::Address => "ip",
            Kind::Arg => "arg",
        }
    }
}

/// The key tokens are hashed under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    k0: u64,
    k1: u64,
    /// Whether the user gave it (two runs given one key agree) or it was drawn for this run.
    given: bool,
}

impl Key {
    /// A key for this run alone, from the entropy the shell handed the string tables
    /// ([`crate::model::strings::seed_table_keys`]).
    pub fn per_run() -> Key {
        let t = TableKey::draw();
        let mut h = std::hash::BuildHasher::build_hasher(&t);
        h.write(b"rankscope.redact");
        let k0 = h.finish();
        h.write(b"k1");
        Key { k0, k1: h.finish(), given: false }
    }

    /// A key from a phrase the user gives (`--redact-key`): outputs redacted separately under
    /// one phrase give one token per string.
    pub fn from_phrase(phrase: &str) -> Key {
        let word = |salt: u64| {
            let mut h = Sip13::new(0x7265_6461_6374_6b65, salt);
            h.write(phrase.as_bytes());
            h.finish()
        };
        Key { k0: word(0), k1: word(1), given: true }
    }

    fn token(&self, kind: Kind, s: &str) -> String {
        let mut h = Sip13::new(self.k0, self.k1);
        h.write(s.as_bytes());
        // 48 bits: a million distinct names collide with odds of about 2 in 1,000.
        format!("{}-{:012x}", kind.prefix(), h.finish() >> 16)
    }
}

/// What a redaction kept, hashed and removed, written with every redacted output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Statement {
    /// `per_run` (tokens agree within this run only) or `given` (`--redact-key`).
    pub key: &'static str,
    /// Distinct names kept as public vocabulary.
    pub kept_names: usize,
    /// Distinct strings hashed, by what they were.
    pub hashed: BTreeMap<Kind, usize>,
    /// What was taken out whole, and how many of each.
    pub removed: BTreeMap<String, u64>,
    /// What is kept whatever the names (one line each).
    pub always_kept: Vec<&'static str>,
}

/// What every redacted output keeps.
const ALWAYS_KEPT: [&str; 5] = [
    "every figure rankscope measures: times, durations, sizes, bandwidths, counts, shares, ranks, steps",
    "rankscope's classes, collective kinds, phases, findings and their ids",
    "public names: PyTorch ops (aten::, c10d::, nccl:), CUDA / HIP calls, NCCL and library kernels, Inductor's Triton kernels, ProfilerStep#N",
    "numeric source args (ids, sizes, shapes, kernel launch figures) and PyTorch's dtype names",
    "device names (the GPU model) and the NCCL and backend versions",
];

/// A redaction in progress: the strings met so far, judged once each, and their tokens.
#[derive(Debug, Clone)]
pub struct Redactor {
    key: Key,
    /// Every hashed string (in each of its spellings) → its token.
    tokens: HashMap<String, String>,
    /// The spellings replaced inside text too ([`distinctive`] originals).
    in_text: HashMap<String, ()>,
    /// The kind of every hashed string (one spelling), for the statement.
    hashed: HashMap<String, Kind>,
    /// Tokens given so far → the string they stand for (a collision gets a suffix).
    given: HashMap<String, String>,
    /// Distinct strings judged public.
    kept: HashMap<String, ()>,
    removed: BTreeMap<String, u64>,
    /// The first bytes (up to four) of every spelling, → the spellings, longest first: the
    /// text pass looks a position up here.
    index: HashMap<Vec<u8>, Vec<String>>,
    index_stale: bool,
}

/// The shortest hashed string replaced inside text (a sentence, a path); shorter ones are
/// replaced only where they are a whole value.
pub const MIN_IN_TEXT: usize = 3;

impl Redactor {
    pub fn new(key: Key) -> Redactor {
        Redactor {
            key,
            tokens: HashMap::new(),
            in_text: HashMap::new(),
            hashed: HashMap::new(),
            given: HashMap::new(),
            kept: HashMap::new(),
            removed: BTreeMap::new(),
            index: HashMap::new(),
            index_stale: false,
        }
    }

    /// Meets a name: judged by vocabulary, kept or hashed.
    pub fn consider(&mut self, s: &str) {
        if self.tokens.contains_key(s) || self.kept.contains_key(s) {
            return;
        }
        match judge(s) {
            Verdict::Keep => {
                self.kept.insert(s.to_string(), ());
            }
            Verdict::Hash(kind) => self.hide(s, kind),
        }
    }

    /// Hashes `s` whatever it looks like (a host, a file): its token from now on.
    pub fn hide(&mut self, s: &str, kind: Kind) {
        if s.is_empty() || self.tokens.contains_key(s) {
            return;
        }
        self.kept.remove(s);
        let mut token = self.key.token(kind, s);
        let mut n = 1;
        while self.given.get(&token).is_some_and(|o| o != s) {
            n += 1;
            token = format!("{}-{n}", self.key.token(kind, s));
        }
        self.given.insert(token.clone(), s.to_string());
        self.hashed.insert(s.to_string(), kind);
        let in_text = distinctive(s);
        for spelled in spellings(s) {
            if in_text {
                self.in_text.insert(spelled.clone(), ());
            }
            self.tokens.entry(spelled).or_insert_with(|| token.clone());
        }
        self.index_stale = true;
    }

    /// Hashes an input file: its path, its base name and the name without the directory the
    /// shell walked.
    pub fn hide_file(&mut self, path: &str) {
        self.hide(path, Kind::File);
        let base = path.rsplit(['/', '\\']).next().unwrap_or(path);
        self.hide(base, Kind::File);
    }

    /// Takes a string back out of the hashed set: rankscope's own vocabulary where the
    /// analysis needs it as written (an enum value equal to a user's name). Returns whether it
    /// was hashed.
    pub fn unhide(&mut self, s: &str) -> bool {
        if self.hashed.remove(s).is_none() {
            return false;
        }
        for spelled in spellings(s) {
            self.tokens.remove(&spelled);
            self.in_text.remove(&spelled);
        }
        self.kept.insert(s.to_string(), ());
        self.index_stale = true;
        true
    }

    /// The original a token stands for (for [`Self::unhide`] from a token).
    pub fn original_of(&self, token: &str) -> Option<&str> {
        self.given.get(token).map(String::as_str)
    }

    /// Counts something taken out whole (`what` says what, in a few words).
    pub fn removed(&mut self, what: &str, n: u64) {
        if n > 0 {
            *self.removed.entry(what.to_string()).or_default() += n;
        }
    }

    /// The token of a whole hashed value, if it is one.
    pub fn exact(&self, s: &str) -> Option<&str> {
        self.tokens.get(s).map(String::as_str)
    }

    /// Meets every string of a JSON value ([`crate::analyze::Analysis`] as a value): files and
    /// hosts under the keys that hold them are hidden whatever they look like; the names under
    /// the keys that hold names are judged. Prose (messages, advice) is not gathered: the names
    /// inside it are the same strings, met where they stand alone.
    pub fn gather_value(&mut self, v: &serde_json::Value) {
        self.gather_at(v, "");
    }

    fn gather_at(&mut self, v: &serde_json::Value, key: &str) {
        use serde_json::Value;
        match v {
            Value::String(s) => match key {
                "file" | "source" | "clock" | "files" | "sources_files" => self.hide_file(s),
                "host" | "hostname" | "host_name" | "from_host" | "to_host" | "node" | "hosts" => {
                    self.hide(s, Kind::Host)
                }
                "name" | "region" | "parent" | "label" | "annotation" | "op" | "kernel" | "thread"
                | "process" | "pg_desc" | "desc" | "group_name" | "module" | "frame" | "function"
                | "evidence" => self.consider(s),
                _ => {}
            },
            Value::Array(a) => a.iter().for_each(|x| self.gather_at(x, key)),
            Value::Object(o) => o.iter().for_each(|(k, x)| self.gather_at(x, k)),
            _ => {}
        }
    }

    /// Every string of a JSON value redacted: a whole hashed value becomes its token, any other
    /// string passes [`Self::text`]. Keys are left alone (field names, and the public names
    /// some maps are keyed by); a key that is a hashed name passes [`Self::text`] too.
    pub fn value(&mut self, v: &mut serde_json::Value) {
        use serde_json::Value;
        match v {
            Value::String(s) => self.string(s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.value(x)),
            Value::Object(o) => {
                let keys: Vec<String> = o.keys().filter(|k| self.exact(k).is_some()).cloned().collect();
                for k in keys {
                    if let Some(x) = o.remove(&k) {
                        let t = self.exact(&k).unwrap_or(&k).to_string();
                        o.insert(t, x);
                    }
                }
                o.values_mut().for_each(|x| self.value(x));
            }
            _ => {}
        }
    }

    /// A string value redacted: a whole hashed value becomes its token, a kept name stays, any
    /// other string passes [`Self::text`] (what [`Self::value`] does to each string).
    pub fn string(&mut self, s: &mut String) {
        if let Some(t) = self.exact(s) {
            *s = t.to_string();
        } else if !self.kept.contains_key(s.as_str()) {
            *s = self.text(s);
        }
    }

    fn rebuild_index(&mut self) {
        self.index.clear();
        // A spelling with a space at an end would take the space from the sentence around it:
        // its trimmed spelling stands for it there.
        let edged = |s: &str| s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace);
        for s in self.in_text.keys().filter(|s| s.len() >= MIN_IN_TEXT && !edged(s)) {
            let head = s.as_bytes()[..s.len().min(4)].to_vec();
            self.index.entry(head).or_default().push(s.clone());
        }
        for v in self.index.values_mut() {
            v.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        }
        self.index_stale = false;
    }

    /// Text with every hashed string in it (at least [`MIN_IN_TEXT`] bytes, not inside a
    /// longer word) replaced by its token, longest first at each place, and every absolute
    /// path and IPv4 address replaced by a `path-` / `ip-` token.
    pub fn text(&mut self, s: &str) -> String {
        if self.index_stale {
            self.rebuild_index();
        }
        let b = s.as_bytes();
        let mut out = String::with_capacity(s.len());
        let mut i = 0;
        let mut copied = 0;
        while i < b.len() {
            if !s.is_char_boundary(i) {
                i += 1;
                continue;
            }
            let prev = s[..i].chars().next_back();
            let hit = self.match_at(s, i, prev).or_else(|| self.pattern_at(s, i, prev));
            match hit {
                Some((len, token)) => {
                    out.push_str(&s[copied..i]);
                    out.push_str(&token);
                    i += len;
                    copied = i;
                }
                None => i += 1,
            }
        }
        out.push_str(&s[copied..]);
        out
    }

    /// The longest hashed spelling starting at `i` whose ends are not inside a word.
    fn match_at(&self, s: &str, i: usize, prev: Option<char>) -> Option<(usize, String)> {
        let rest = &s.as_bytes()[i..];
        let mut best: Option<&String> = None;
        for n in (1..=rest.len().min(4)).rev() {
            let Some(cands) = self.index.get(&rest[..n]) else { continue };
            for c in cands {
                if best.is_some_and(|b| b.len() >= c.len()) {
                    break;
                }
                if rest.starts_with(c.as_bytes()) && bounded(c, prev, s[i + c.len()..].chars().next()) {
                    best = Some(c);
                    break;
                }
            }
        }
        best.and_then(|c| self.tokens.get(c).map(|t| (c.len(), t.clone())))
    }

    /// An absolute path (`/home/…/x`, `~/…`, `C:\…`) or an IPv4 address starting at `i`.
    fn pattern_at(&mut self, s: &str, i: usize, prev: Option<char>) -> Option<(usize, String)> {
        let rest = &s[i..];
        let free = prev.is_none_or(|c| !(c.is_alphanumeric() || "_.:/\\-~".contains(c)));
        if !free {
            return None;
        }
        let rb = rest.as_bytes();
        let path_start = rest.starts_with('/')
            || rest.starts_with("~/")
            || (rb.len() > 2 && rb[0].is_ascii_alphabetic() && rb[1] == b':' && rb[2] == b'\\');
        if path_start {
            let len = rest
                .find(|c: char| !(c.is_alphanumeric() || "/\\._-~+@%=,:".contains(c)))
                .unwrap_or(rest.len());
            let p = rest[..len].trim_end_matches(['.', ',', ':']);
            let seps = p.matches(['/', '\\']).count();
            if seps >= 2 && p.chars().any(char::is_alphabetic) {
                let t = self.key.token(Kind::Path, p);
                self.count_pattern(p, Kind::Path);
                return Some((p.len(), t));
            }
            return None;
        }
        let len = ipv4_len(rest)?;
        let ip = &rest[..len];
        self.count_pattern(ip, Kind::Address);
        Some((len, self.key.token(Kind::Address, ip)))
    }

    fn count_pattern(&mut self, s: &str, kind: Kind) {
        self.hashed.entry(s.to_string()).or_insert(kind);
    }

    /// What this redaction kept, hashed and removed so far.
    pub fn statement(&self) -> Statement {
        Statement::of(self.key.given, self.kept.len(), self.hashed.values().copied(), self.removed.clone())
    }
}

impl Statement {
    /// The statement of `kept` public names, the strings hashed (their kinds, one per string)
    /// and what was removed, under a given or a drawn key.
    fn of(
        given: bool,
        kept: usize,
        hashed_kinds: impl Iterator<Item = Kind>,
        removed: BTreeMap<String, u64>,
    ) -> Statement {
        let mut hashed = BTreeMap::new();
        for k in hashed_kinds {
            *hashed.entry(k).or_default() += 1;
        }
        Statement {
            key: if given { "given" } else { "per_run" },
            kept_names: kept,
            hashed,
            removed,
            always_kept: ALWAYS_KEPT.to_vec(),
        }
    }

    /// The statement as `redaction.json` holds it (pretty JSON, a final newline).
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// The statement as a Markdown section (the report's last).
    pub fn markdown(&self) -> String {
        let mut s = String::from("\n## Redaction\n\n");
        s.push_str(match self.key {
            "given" => "Names, paths, hosts and source args are replaced by tokens under the key given (`--redact-key`): the same string has the same token in every output made with that key, on every rank.\n\n",
            _ => "Names, paths, hosts and source args are replaced by tokens under a key drawn for this run: the same string has the same token in every output of this run, on every rank.\n\n",
        });
        let hashed: Vec<String> = self.hashed.iter().map(|(k, n)| format!("{n} {}", k.prefix())).collect();
        s.push_str(&format!(
            "- Hashed: {} ({} strings).\n",
            if hashed.is_empty() { "nothing".to_string() } else { hashed.join(", ") },
            self.hashed.values().sum::<usize>()
        ));
        s.push_str(&format!("- Kept as public vocabulary: {} distinct names.\n", self.kept_names));
        for (what, n) in &self.removed {
            s.push_str(&format!("- Removed: {what} ({n}).\n"));
        }
        for k in &self.always_kept {
            s.push_str(&format!("- Kept: {k}.\n"));
        }
        s
    }

    /// One line for standard error.
    pub fn line(&self) -> String {
        let hashed: Vec<String> = self.hashed.iter().map(|(k, n)| format!("{n} {}", k.prefix())).collect();
        let removed: Vec<String> = self.removed.iter().map(|(w, n)| format!("{w} ({n})")).collect();
        format!(
            "redacted: hashed {}; kept {} public names{}",
            if hashed.is_empty() { "nothing".to_string() } else { hashed.join(", ") },
            self.kept_names,
            if removed.is_empty() { String::new() } else { format!("; removed {}", removed.join(", ")) }
        )
    }
}

/// The ways a string is written in rankscope's outputs: as is, JSON-escaped, Markdown-escaped
/// (text and code spans), CSV-quoted.
fn spellings(s: &str) -> Vec<String> {
    let mut v = vec![s.to_string()];
    if s.trim() != s && !s.trim().is_empty() {
        v.extend(spellings(s.trim()));
    }
    let json = serde_json::to_string(s).unwrap_or_default();
    let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_string();
    for t in [json, crate::escape::md_text(s), s.replace('|', "\\|"), s.replace('"', "\"\"")] {
        if !v.contains(&t) {
            v.push(t);
        }
    }
    v
}

/// Whether a hashed string is replaced inside text as well as where it is a whole value: not a
/// plain word (letters only, one case or capitalised, under 12 letters: `CPU`, `stream`,
/// `Scalar`), which rankscope's own sentences may hold; anything with a digit, an underscore, a
/// space, punctuation or an inner capital (`MySecretNet`, `## fwd ##`, `node-17`) is.
fn distinctive(s: &str) -> bool {
    let letters = s.chars().all(char::is_alphabetic);
    let inner_capital = s.chars().skip(1).any(char::is_uppercase) && s.chars().any(char::is_lowercase);
    !letters || inner_capital || s.chars().count() >= 12
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether a match of `c` between `prev` and `next` is not inside a longer word.
fn bounded(c: &str, prev: Option<char>, next: Option<char>) -> bool {
    let first = c.chars().next().is_some_and(is_word);
    let last = c.chars().next_back().is_some_and(is_word);
    let inside = (first && prev.is_some_and(is_word)) || (last && next.is_some_and(is_word));
    !inside
}

/// The length of an IPv4 address at the start of `s` (four numbers up to 255, not followed by
/// another digit, letter or dotted number).
fn ipv4_len(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    for part in 0..4 {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() && i - start < 3 {
            i += 1;
        }
        if i == start || s[start..i].parse::<u16>().ok()? > 255 {
            return None;
        }
        if part < 3 {
            if b.get(i) != Some(&b'.') {
                return None;
            }
            i += 1;
        }
    }
    let next = b.get(i).copied();
    let dotted = next == Some(b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit);
    (!next.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_') && !dotted).then_some(i)
}

#[cfg(test)]
mod tests;
