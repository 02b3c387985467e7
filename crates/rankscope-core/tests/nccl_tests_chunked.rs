//! nccl-tests output read in chunks ([`TestsReader`], what `rankscope nccl-tests` does so that a
//! file is never held whole) gives the tests of the whole file: every real file in
//! `shared/nccl-tests`, the fixtures and the NCCL logs that carry a perf table, as written, with
//! CRLF line ends and with CR-only line ends, in chunks of 1 byte, of odd sizes, and cut in two
//! at every byte of a CRLF file (inside a `\r\n`, inside a UTF-8 character, inside a row).

// Tests read ../shared and the fixtures from disk; the core never does (its clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rankscope_core::nccl::perf::{parse_tests_file, TestsFile, TestsReader};

const SHARED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nccl/");

/// Every nccl-tests file and every NCCL log that holds a perf table, `(name, bytes)`.
fn inputs() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in [format!("{SHARED}nccl-tests"), format!("{SHARED}nccl-logs"), FIXTURES.to_string()] {
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        for p in paths {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            out.push((name, std::fs::read(&p).unwrap()));
        }
    }
    out
}

fn whole(name: &str, bytes: &[u8]) -> TestsFile {
    let (tests, diagnostics) = parse_tests_file(name, bytes);
    TestsFile { name: name.to_string(), tests, diagnostics }
}

fn chunked<'a>(name: &str, pieces: impl IntoIterator<Item = &'a [u8]>) -> TestsFile {
    let mut r = TestsReader::new(name);
    for p in pieces {
        r.feed(p);
    }
    r.finish()
}

fn crlf(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() * 21 / 20);
    for &b in bytes {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

fn cr_only(bytes: &[u8]) -> Vec<u8> {
    bytes.iter().map(|&b| if b == b'\n' { b'\r' } else { b }).collect()
}

#[test]
fn chunks_of_any_size_give_the_whole_files_tests() {
    let mut with_tests = 0;
    for (name, bytes) in inputs() {
        for (variant, bytes) in
            [("as written", bytes.clone()), ("crlf", crlf(&bytes)), ("cr only", cr_only(&bytes))]
        {
            let expected = whole(&name, &bytes);
            with_tests += usize::from(!expected.tests.is_empty() && variant == "as written");
            for size in [1, 2, 3, 7, 64, 1000, 4096, 1 << 20] {
                let got = chunked(&name, bytes.chunks(size));
                assert_eq!(got, expected, "{name} ({variant}) in chunks of {size}");
            }
        }
    }
    // The inputs hold the shared nccl-tests files' tables and the fixtures': the comparison is
    // of real tables, not of empty reports.
    assert!(with_tests >= 20, "{with_tests} inputs with tests");
}

#[test]
fn a_crlf_file_cut_anywhere_gives_the_whole_files_tests() {
    let path = format!("{SHARED}nccl-tests/aws-hpc-tutorials_a10g-1rank_allreduce_legacy-error-col.txt");
    let mut bytes = crlf(&std::fs::read(&path).unwrap());
    // A non-ASCII character in a row's line, to be cut inside too.
    bytes.extend_from_slice("# nThread 1 nGpus 1 \u{e9}t\u{e9}\r\n".as_bytes());
    let expected = whole("a10g.txt", &bytes);
    assert!(expected.tests.iter().map(|t| t.rows.len()).sum::<usize>() > 20);
    for cut in 0..=bytes.len() {
        let (a, b) = bytes.split_at(cut);
        assert_eq!(chunked("a10g.txt", [a, b]), expected, "cut at byte {cut}");
    }
}
