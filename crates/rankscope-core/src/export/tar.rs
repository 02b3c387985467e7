//! The few bytes of the POSIX ustar format the Perfetto archive needs: one 512-byte header per
//! regular file, the file's bytes padded to a multiple of 512, and two zero blocks at the end.
//!
//! Everything a reader could take from the environment is fixed (mtime 0, uid/gid 0, mode
//! 0644, no user or group names), so the same job gives the same archive byte for byte, in the
//! CLI and in the app. Sizes up to 8 GiB − 1 are written in octal as ustar says; larger ones in
//! the base-256 form GNU tar, bsdtar and libarchive read (first byte 0x80, then big-endian).

use std::io::{self, Write};

/// A tar block.
pub const BLOCK: usize = 512;

/// The header of a regular file `path` of `size` bytes. `path` must be ASCII, at most 100
/// bytes (ours are `rank3.json` and `perfetto_manifest.json`).
pub fn header(path: &str, size: u64) -> io::Result<[u8; BLOCK]> {
    if path.is_empty() || path.len() > 100 || !path.is_ascii() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("tar member name `{path}`")));
    }
    let mut h = [0u8; BLOCK];
    h[..path.len()].copy_from_slice(path.as_bytes());
    octal(&mut h[100..108], 0o644);
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    if size < 1 << 33 {
        octal(&mut h[124..136], size);
    } else {
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    octal(&mut h[136..148], 0);
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    // The checksum is the sum of the header's bytes with its own field read as spaces.
    h[148..156].fill(b' ');
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    octal(&mut h[148..155], u64::from(sum));
    h[155] = b' ';
    Ok(h)
}

/// `v` in octal, zero-padded to fill `field` but its last byte, which is NUL.
fn octal(field: &mut [u8], v: u64) {
    let n = field.len() - 1;
    let s = format!("{v:0n$o}");
    field[..n].copy_from_slice(&s.as_bytes()[s.len() - n..]);
    field[n] = 0;
}

/// Zero bytes that bring a member of `size` bytes to a whole number of blocks.
pub fn padding(size: u64) -> usize {
    (BLOCK - (size % BLOCK as u64) as usize) % BLOCK
}

/// One whole member from bytes in memory.
pub fn write_file<W: Write>(out: &mut W, path: &str, bytes: &[u8]) -> io::Result<()> {
    out.write_all(&header(path, bytes.len() as u64)?)?;
    out.write_all(bytes)?;
    out.write_all(&[0u8; BLOCK][..padding(bytes.len() as u64)])
}

/// The end of the archive: two zero blocks.
pub fn write_end<W: Write>(out: &mut W) -> io::Result<()> {
    out.write_all(&[0u8; 2 * BLOCK])
}

/// Counts what is written to it (the first pass of a member whose size is not known ahead).
#[derive(Debug, Default)]
pub struct Counter(pub u64);

impl Write for Counter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A member whose bytes come from `body`, written without holding them: `body` runs once into a
/// [`Counter`] for the header's size, then again into `out`. `body` must write the same bytes
/// both times (it is an error otherwise; the archive is then broken and must be discarded).
pub fn write_streamed<W, F>(out: &mut W, path: &str, mut body: F) -> io::Result<u64>
where
    W: Write,
    F: FnMut(&mut dyn Write) -> io::Result<()>,
{
    let mut count = Counter::default();
    body(&mut count)?;
    let size = count.0;
    out.write_all(&header(path, size)?)?;
    let mut check = Tee { inner: out, n: 0 };
    body(&mut check)?;
    if check.n != size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{path}: {size} bytes counted, then {} written", check.n),
        ));
    }
    out.write_all(&[0u8; BLOCK][..padding(size)])?;
    Ok(size)
}

/// Passes writes through and counts them.
struct Tee<'a, W: Write> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Tee<'_, W> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(b)?;
        self.n += k as u64;
        Ok(k)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(h: &[u8], r: std::ops::Range<usize>) -> String {
        String::from_utf8_lossy(&h[r]).trim_end_matches('\0').to_string()
    }

    #[test]
    fn a_header_is_ustar_with_a_valid_checksum() {
        let h = header("rank3.json", 1234).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(field(&h, 0..100), "rank3.json");
        assert_eq!(field(&h, 124..136), "00000002322");
        assert_eq!(&h[257..265], b"ustar\x0000");
        let stored = u32::from_str_radix(field(&h, 148..155).trim(), 8).unwrap_or(0);
        let mut blank = h;
        blank[148..156].fill(b' ');
        assert_eq!(stored, blank.iter().map(|&b| u32::from(b)).sum::<u32>());
        let big = header("big.json", 10 << 30).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(big[124], 0x80);
        assert_eq!(u64::from_be_bytes(big[128..136].try_into().unwrap_or([0; 8])), 10 << 30);
        assert!(header(&"x".repeat(101), 1).is_err());
    }

    #[test]
    fn members_are_padded_and_streamed_members_equal_whole_ones() {
        assert_eq!((padding(0), padding(1), padding(512), padding(513)), (0, 511, 0, 511));
        let mut a = Vec::new();
        write_file(&mut a, "a.txt", b"hello").unwrap_or_else(|e| panic!("{e}"));
        let mut b = Vec::new();
        write_streamed(&mut b, "a.txt", |w| w.write_all(b"hello")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b);
        assert_eq!(a.len(), 1024);
        let mut n = 0;
        let mut c = Vec::new();
        let e = write_streamed(&mut c, "a.txt", |w| {
            n += 1;
            w.write_all(&b"xy"[..n])
        });
        assert!(e.is_err(), "a body that changes between passes is caught");
    }
}
