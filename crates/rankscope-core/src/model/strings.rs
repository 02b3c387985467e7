//! One string table for everything: event names, categories, lane names, argument values.
//!
//! Strings are interned by their raw bytes as they appear in the file, so the UTF-8 check and
//! any lossy repair happen once per distinct string, not once per event. Two events with the same
//! name compare as one `u32` comparison, on one rank or across ranks once the tables are merged
//! (see [`StringTable::merge`]).
//!
//! The table's own map hashes the input's bytes with SipHash-1-3 under a key of its own
//! ([`TableKey`]), so names crafted to collide in one table's buckets cannot be written ahead of
//! time. The core has no source of randomness (it builds for `wasm32-unknown-unknown` without
//! `getrandom`): the shells hand it entropy once, with [`seed_table_keys`] (the CLI and Python
//! from std's `RandomState`, the browser from `Math.random`); without it the keys are
//! still distinct per table but predictable. The key decides only where a string sits in the
//! map, never its id or any order, so every result is the same whatever the key.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Index into a [`StringTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct StrId(pub u32);

impl StrId {
    /// The empty string; every table has it at index 0.
    pub const EMPTY: StrId = StrId(0);
}

/// A small, fast, non-cryptographic hasher (the multiply-rotate scheme of rustc's FxHash, with a
/// finalizer that spreads every bit), for maps keyed by ids and numbers. Its key is fixed, so it
/// is not for the input's strings: a top-bit difference in one word cancels against a bit-4
/// difference in the next whatever the start state, so colliding names exist for any key
/// (the [`StringTable`] uses [`TableKey`] instead); names that merely look alike spread well.
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

/// The entropy the shells handed over ([`seed_table_keys`]), or a fixed value without it.
static ENTROPY: AtomicU64 = AtomicU64::new(0x2f0e_6a3c_9d41_b857);
/// Tables keyed so far: each table's key is drawn from the entropy and this count.
static DRAWN: AtomicU64 = AtomicU64::new(0);

/// Gives the core entropy for the string tables' keys: every table made afterwards draws its
/// key from it (and from how many tables came before). Shells call it once, at start, with 64
/// bits an input author cannot know; calling it again mixes the new bits in.
pub fn seed_table_keys(entropy: u64) {
    let mut h = Sip13::new(entropy, ENTROPY.load(Ordering::Relaxed));
    h.write_u64(0x7365_6564);
    ENTROPY.store(h.finish(), Ordering::Relaxed);
}

/// A string table's SipHash-1-3 key (the hash std's `HashMap` uses, keyed per table here).
#[derive(Debug, Clone, Copy)]
pub struct TableKey {
    k0: u64,
    k1: u64,
}

impl TableKey {
    /// The next table's key: SipHash of a draw count under the shells' entropy.
    pub fn draw() -> TableKey {
        let entropy = ENTROPY.load(Ordering::Relaxed);
        let n = DRAWN.fetch_add(1, Ordering::Relaxed);
        let word = |i: u64| {
            let mut h = Sip13::new(entropy, !entropy);
            h.write_u64(n);
            h.write_u64(i);
            h.finish()
        };
        TableKey { k0: word(0), k1: word(1) }
    }

    /// A key given outright (tests; two tables with one key hash alike).
    pub const fn fixed(k0: u64, k1: u64) -> TableKey {
        TableKey { k0, k1 }
    }
}

impl BuildHasher for TableKey {
    type Hasher = Sip13;
    #[inline]
    fn build_hasher(&self) -> Sip13 {
        Sip13::new(self.k0, self.k1)
    }
}

/// SipHash-1-3 (one compression round a word, three to finish), streaming; the same function as
/// std's `DefaultHasher` under the same key (a test compares them).
#[derive(Debug, Clone, Copy)]
pub struct Sip13 {
    v0: u64,
    v1: u64,
    v2: u64,
    v3: u64,
    /// Bytes written and not yet compressed (fewer than 8), little-endian from bit 0.
    tail: u64,
    ntail: usize,
    length: usize,
}

impl Sip13 {
    #[inline]
    pub fn new(k0: u64, k1: u64) -> Sip13 {
        Sip13 {
            v0: k0 ^ 0x736f_6d65_7073_6575,
            v1: k1 ^ 0x646f_7261_6e64_6f6d,
            v2: k0 ^ 0x6c79_6765_6e65_7261,
            v3: k1 ^ 0x7465_6462_7974_6573,
            tail: 0,
            ntail: 0,
            length: 0,
        }
    }

    #[inline]
    fn round(&mut self) {
        self.v0 = self.v0.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(13) ^ self.v0;
        self.v0 = self.v0.rotate_left(32);
        self.v2 = self.v2.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(16) ^ self.v2;
        self.v0 = self.v0.wrapping_add(self.v3);
        self.v3 = self.v3.rotate_left(21) ^ self.v0;
        self.v2 = self.v2.wrapping_add(self.v1);
        self.v1 = self.v1.rotate_left(17) ^ self.v2;
        self.v2 = self.v2.rotate_left(32);
    }

    #[inline]
    fn compress(&mut self, m: u64) {
        self.v3 ^= m;
        self.round();
        self.v0 ^= m;
    }
}

/// Up to 8 bytes as a little-endian word.
#[inline]
fn le_word(bytes: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..bytes.len()].copy_from_slice(bytes);
    u64::from_le_bytes(w)
}

impl Hasher for Sip13 {
    #[inline]
    fn write(&mut self, mut bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len());
        if self.ntail != 0 {
            let take = (8 - self.ntail).min(bytes.len());
            self.tail |= le_word(&bytes[..take]) << (8 * self.ntail);
            bytes = &bytes[take..];
            if self.ntail + take < 8 {
                self.ntail += take;
                return;
            }
            let m = self.tail;
            self.compress(m);
            self.tail = 0;
            self.ntail = 0;
        }
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.compress(le_word(w));
        }
        let rest = words.remainder();
        self.tail = le_word(rest);
        self.ntail = rest.len();
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.write(&i.to_le_bytes());
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write(&(i as u64).to_le_bytes());
    }

    #[inline]
    fn finish(&self) -> u64 {
        let mut s = *self;
        let b = ((self.length as u64 & 0xff) << 56) | self.tail;
        s.compress(b);
        s.v2 ^= 0xff;
        s.round();
        s.round();
        s.round();
        s.v0 ^ s.v1 ^ s.v2 ^ s.v3
    }
}

/// Interned strings. Index 0 is always the empty string.
#[derive(Clone)]
pub struct StringTable {
    by_bytes: HashMap<Box<[u8]>, StrId, TableKey>,
    strings: Vec<Box<str>>,
    /// Ids whose bytes were not valid UTF-8 (stored with replacement characters).
    lossy: Vec<bool>,
}

/// The strings in id order (the map from bytes to ids is their index: its order depends on the
/// table's key, so it is left out and two tables of the same strings print alike).
impl std::fmt::Debug for StringTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StringTable").field("strings", &self.strings).field("lossy", &self.lossy).finish()
    }
}

impl Default for StringTable {
    fn default() -> Self {
        StringTable::with_key(TableKey::draw())
    }
}

impl StringTable {
    /// An empty table (the empty string at 0) whose map hashes under `key`.
    pub fn with_key(key: TableKey) -> Self {
        let mut t =
            StringTable { by_bytes: HashMap::with_hasher(key), strings: Vec::new(), lossy: Vec::new() };
        t.intern_bytes(b"");
        t
    }

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

    /// The same function as std's SipHash-1-3 (`DefaultHasher` is it under the key 0, 0), for
    /// every length and however the bytes are split across writes.
    #[test]
    fn sip13_is_siphash_1_3() {
        #[allow(clippy::disallowed_types)]
        use std::hash::DefaultHasher;
        let bytes: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for len in 0..bytes.len() {
            let mut std = DefaultHasher::new();
            std.write(&bytes[..len]);
            let want = std.finish();
            for cut in 0..=len {
                let mut ours = Sip13::new(0, 0);
                ours.write(&bytes[..cut]);
                ours.write(&bytes[cut..len]);
                assert_eq!(ours.finish(), want, "len {len} cut {cut}");
            }
        }
    }

    /// Names that collide under a fixed multiply-rotate hash whatever its start state (a top-bit
    /// difference in one word, a bit-4 difference in the next) spread under tables' keys, and
    /// each table draws its own key.
    #[test]
    fn names_crafted_for_the_fixed_hash_do_not_collide_under_table_keys() {
        let names = crafted(4);
        let fx = BuildHasherDefault::<FxHasher>::default();
        let fixed: std::collections::BTreeSet<u64> = names.iter().map(|n| fx.hash_one(&n[..])).collect();
        assert_eq!(fixed.len(), 1, "the fixed hash does not collide on them");
        let (a, b) = (TableKey::draw(), TableKey::draw());
        let keyed: std::collections::BTreeSet<u64> = names.iter().map(|n| a.hash_one(&n[..])).collect();
        assert_eq!(keyed.len(), names.len());
        assert_ne!(a.hash_one(&names[0][..]), b.hash_one(&names[0][..]));
        // The key changes where a string sits, never its id.
        let mut t = StringTable::with_key(a);
        let mut u = StringTable::with_key(TableKey::fixed(1, 2));
        for n in &names {
            assert_eq!(t.intern_bytes(n), u.intern_bytes(n));
        }
    }

    /// 2^blocks names of 16 bytes a block, all with one fixed-hash value.
    fn crafted(blocks: u32) -> Vec<Vec<u8>> {
        (0..1u32 << blocks)
            .map(|i| {
                let mut n = Vec::new();
                for b in 0..blocks {
                    let mut block = *b"kernel_gemm_xyz_";
                    if i >> b & 1 == 1 {
                        block[7] ^= 0x80;
                        block[8] ^= 0x10;
                    }
                    n.extend_from_slice(&block);
                }
                n
            })
            .collect()
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
