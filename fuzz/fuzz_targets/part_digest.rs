//! Fuzz target: any bytes as a rankscope part and as a job digest, and what `combine` and
//! `analyze` make of them (issue 39: claims checked before anything is sized by them). The
//! first byte chooses what the rest is: even, the bytes after the header as they are (the gzip
//! member itself, so the fuzzer reaches the framing and the inflate limits); odd, the inflated
//! content, stored here in a gzip member without compression (so the fuzzer works on the head
//! line, the part and the payload, which it could not reach through a checksum). Nothing may
//! panic, hang or allocate beyond the ratio cap.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;
use rankscope_core::analyze::Options;
use rankscope_core::job::{self, digest};

fn framed(magic: &[u8], version: u16, body: &[u8]) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(body);
    out
}

fn deflated(content: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::none());
    // Writing into a `Vec` cannot fail.
    let _ = gz.write_all(content);
    gz.finish().unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let body = if mode & 1 == 1 { deflated(rest) } else { rest.to_vec() };
    let opts = Options::default();
    let part = framed(digest::part::MAGIC, digest::part::VERSION, &body);
    match digest::part::decode("fuzz.part", &part) {
        Ok(digest::part::Piece::Trace { claim, part }) => {
            let out = job::combine(vec![(claim, *part)], &[], &[], &opts);
            let _ = out.json();
            let _ = out.markdown();
        }
        Ok(digest::part::Piece::Text(t)) => {
            let out = job::combine(Vec::new(), &[], &[t.as_ref()], &opts);
            let _ = out.json();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    let d = framed(digest::MAGIC, digest::VERSION, &body);
    match digest::decode_lean("fuzz.rsdigest", &d) {
        Ok(j) => {
            let out = j.into_output();
            let _ = out.json();
            let _ = out.markdown();
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
