//! One string table for everything: event names, categories, lane names, argument values.
//!
//! Strings are interned by their raw bytes as they appear in the file, so the UTF-8 check and
//! any lossy repair happen once per distinct string, not once per event. Two events with the same
//! name compare as one `u32` comparison, on one rank or across ranks once the tables are merged
//! (see [`StringTable::merge`]).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::Serialize;

/// Index into a [`StringTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct StrId(pub u32);

impl StrId {
    /// The empty string; every table has it at index 0.
    pub const EMPTY: StrId = StrId(0);
}

/// A small, fast, non-cryptographic hasher (the multiply-rotate scheme of rustc's FxHash, with a
/// finalizer that spreads every bit). Its key is fixed (tables must be the same in every shell),
/// so names crafted to collide can still slow a table; names that merely look alike do not.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const FX_SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(FX_SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    /// The state's bits mixed into every bit of the result (murmur3's `fmix64`): the last step
    /// of `add` is a multiply, whose low bits depend only on the low bits of what it multiplies,
    /// and hashbrown picks buckets by the low bits; names that differ only past their first
    /// byte (`k0` … `k399999`) all fell in a few buckets, and 400k distinct names took 6.6 s
    /// against 0.18 s for one.
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.hash;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Interned strings. Index 0 is always the empty string.
#[derive(Debug, Clone)]
pub struct StringTable {
    by_bytes: FxHashMap<Box<[u8]>, StrId>,
    strings: Vec<Box<str>>,
    /// Ids whose bytes were not valid UTF-8 (stored with replacement characters).
    lossy: Vec<bool>,
}

impl Default for StringTable {
    fn default() -> Self {
        let mut t = StringTable { by_bytes: FxHashMap::default(), strings: Vec::new(), lossy: Vec::new() };
        t.intern_bytes(b"");
        t
    }
}

impl StringTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Interns raw bytes. Returns the id and whether the bytes are invalid UTF-8 (such strings
    /// are stored with U+FFFD replacement characters; the check runs once per distinct string).
    #[inline]
    pub fn intern_bytes(&mut self, bytes: &[u8]) -> (StrId, bool) {
        if let Some(&id) = self.by_bytes.get(bytes) {
            return (id, self.lossy.get(id.0 as usize).copied().unwrap_or(false));
        }
        let (text, invalid) = match std::str::from_utf8(bytes) {
            Ok(s) => (Box::<str>::from(s), false),
            Err(_) => (String::from_utf8_lossy(bytes).into_owned().into_boxed_str(), true),
        };
        let id = StrId(self.strings.len() as u32);
        self.strings.push(text);
        self.lossy.push(invalid);
        self.by_bytes.insert(Box::from(bytes), id);
        (id, invalid)
    }

    /// Interns a valid string.
    pub fn intern(&mut self, s: &str) -> StrId {
        self.intern_bytes(s.as_bytes()).0
    }

    /// The id of `s` if it is interned.
    pub fn find(&self, s: &str) -> Option<StrId> {
        self.by_bytes.get(s.as_bytes()).copied()
    }

    /// The string behind `id`; the empty string for an id from another table that is out of range.
    pub fn get(&self, id: StrId) -> &str {
        self.strings.get(id.0 as usize).map(|s| &**s).unwrap_or("")
    }

    pub fn len(&self) -> usize {
        self.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strings.len() <= 1
    }

    /// Total bytes of string data held (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.strings.iter().map(|s| s.len()).sum::<usize>() * 2
            + self.strings.len() * (std::mem::size_of::<Box<str>>() * 2 + 16)
    }

    /// Adds every string of `other` to `self` and returns the remap table: `remap[old.0]` is the
    /// id in `self` of the string `old` had in `other`.
    pub fn merge(&mut self, other: &StringTable) -> Vec<StrId> {
        other.strings.iter().map(|s| self.intern(s)).collect()
    }

    /// Iterates over `(id, string)`.
    pub fn iter(&self) -> impl Iterator<Item = (StrId, &str)> {
        self.strings.iter().enumerate().map(|(i, s)| (StrId(i as u32), &**s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable_and_lossy_once() {
        let mut t = StringTable::new();
        assert_eq!(t.get(StrId::EMPTY), "");
        let (a, bad) = t.intern_bytes(b"ncclKernel");
        assert!(!bad);
        assert_eq!(t.intern_bytes(b"ncclKernel"), (a, false));
        let (b, bad) = t.intern_bytes(b"k\xffx");
        assert!(bad);
        assert_eq!(t.get(b), "k\u{fffd}x");
        assert_eq!(t.intern_bytes(b"k\xffx"), (b, true));
        assert_eq!(t.get(StrId(999)), "");
    }

    #[test]
    fn merge_remaps() {
        let mut a = StringTable::new();
        let x = a.intern("x");
        let mut b = StringTable::new();
        let y = b.intern("y");
        let x2 = b.intern("x");
        let remap = a.merge(&b);
        assert_eq!(remap[x2.0 as usize], x);
        assert_eq!(a.get(remap[y.0 as usize]), "y");
    }
}
