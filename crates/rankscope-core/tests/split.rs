//! One file on every core (`parse::split`): the frame + pieces + merge give the serial parse's
//! tables exactly, for random cut points; and any doubt (a seam inside a string, damage, `B`/`E`
//! pairs) gives `None`, never a different trace.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::indexing_slicing)] // a failed expectation is the test failing

use rankscope_core::model::{RankTrace, StrId};
use rankscope_core::parse::{ingest_bytes, split, wire, CutSizes, Cutout, FileIngest, TraceParser};
use rankscope_synth::Rng;
use rankscope_synth::{self as synth, SynthConfig};

/// The host's procedure (rankscope-host `read_trace_split`) over bytes in memory: seams found
/// after each cut, the frame reads the head and the tail, the pieces between are parsed alone.
/// `None` when no seam is found or the merge doubts.
fn split_parse(bytes: &[u8], cuts: &[usize], chunk: usize) -> Option<RankTrace> {
    let mut seams: Vec<(usize, usize)> = Vec::new();
    for &c in cuts {
        let w = &bytes[c..bytes.len().min(c + (1 << 20))];
        let (end, start) = split::find_seam(w)?;
        let seam = (c + end, c + start);
        if seams.last().is_some_and(|&(_, s)| seam.0 <= s) {
            return None;
        }
        seams.push(seam);
    }
    if seams.len() < 2 {
        return None;
    }
    let feed = |p: &mut TraceParser, b: &[u8]| {
        for c in b.chunks(chunk) {
            p.feed(c);
        }
    };
    let (first, last) = (seams[0], *seams.last().unwrap());
    let mut f = TraceParser::new("t");
    feed(&mut f, &bytes[..first.1]);
    let mark = f.mark()?;
    feed(&mut f, &bytes[last.1..]);
    let frame = f.finish().ok()?;
    let mut middle = Vec::new();
    for w in seams.windows(2) {
        let mut p = TraceParser::new("t");
        p.feed(b"[");
        feed(&mut p, &bytes[w[0].1..w[1].0]);
        p.feed(b"]");
        middle.push(p.finish().ok()?);
    }
    split::merge(frame, &mark, middle, bytes.len() as u64)
}

/// Everything a parse produces, as text (tables, every string in id order, lanes, counts).
fn dump(t: &RankTrace) -> String {
    let strings: Vec<&str> = (0..t.strings.len()).map(|i| t.strings.get(StrId(i as u32))).collect();
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{}\n{}",
        strings,
        t.events,
        t.comm,
        t.lanes,
        t.flows,
        t.counters,
        t.meta,
        t.counts,
        t.diagnostics.is_empty(),
        t.text_bytes
    )
}

fn rank_bytes(seed: u64, rank: u32) -> Vec<u8> {
    let cfg = SynthConfig {
        ranks: 2,
        steps: 3,
        kernels_per_step: 60,
        seed,
        straggler_rank: Some(1),
        ..SynthConfig::default()
    };
    let mut out = Vec::new();
    synth::write_rank(&cfg, rank, &mut out).expect("write_rank");
    out
}

/// `lo` to `lo + span - 1` sorted cut points in `0..len`, and a read size.
fn random_cuts(rng: &mut Rng, len: usize, lo: usize, span: u64) -> (Vec<usize>, usize) {
    let n = lo + (rng.next_u64() % span) as usize;
    let mut cuts: Vec<usize> = (0..n).map(|_| (rng.next_u64() % len as u64) as usize).collect();
    cuts.sort_unstable();
    (cuts, [7usize, 4096, 1 << 20][(rng.next_u64() % 3) as usize])
}

#[test]
fn random_seams_give_the_serial_tables() {
    let mut rng = Rng::from_state(12);
    let mut merged = 0;
    for seed in 0..4u64 {
        let bytes = rank_bytes(seed, (seed % 2) as u32);
        let serial = dump(&ingest_bytes("t", &bytes).expect("serial parse"));
        for _ in 0..12 {
            let (cuts, chunk) = random_cuts(&mut rng, bytes.len(), 2, 6);
            if let Some(t) = split_parse(&bytes, &cuts, chunk) {
                assert_eq!(dump(&t), serial, "seed {seed}, cuts {cuts:?}, chunk {chunk}");
                merged += 1;
            }
        }
    }
    // Cuts inside the metadata before or after the events find no usable seam: most must merge.
    assert!(merged >= 24, "only {merged} of 48 random splits merged");
}

/// The hosts' incremental merge: a [`split::Merger`] started from the live frame parser at its
/// mark (before the tail is read), the pieces pushed in a random order, some before the tail is
/// parsed and some after; `None` when no seam is found or the merge doubts.
fn merger_parse(bytes: &[u8], cuts: &[usize], chunk: usize, rng: &mut Rng) -> Option<RankTrace> {
    let mut seams: Vec<(usize, usize)> = Vec::new();
    for &c in cuts {
        let len = bytes.len() as u64;
        let seam = split::seam_windows(c as u64, len)
            .find_map(|(from, to)| split::seam_in(&bytes[from as usize..to as usize], from))
            .map(|(end, start)| (end as usize, start as usize))?;
        if seams.last().is_some_and(|&(_, s)| seam.0 <= s) {
            return None;
        }
        seams.push(seam);
    }
    if seams.len() < 2 {
        return None;
    }
    let feed = |p: &mut TraceParser, b: &[u8]| {
        for c in b.chunks(chunk) {
            p.feed(c);
        }
    };
    let mut pieces: Vec<(usize, RankTrace)> = Vec::new();
    for (i, w) in seams.windows(2).enumerate() {
        // Each piece parsed as its reads arrive, as a host reading its own range does.
        let mut p = split::PieceParser::new("t");
        for c in bytes[w[0].1..w[1].0].chunks(chunk) {
            p.feed(c);
        }
        pieces.push((i, p.finish()?));
    }
    let n = pieces.len();
    for i in (1..n).rev() {
        pieces.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    let (first, last) = (seams[0], *seams.last().unwrap());
    let mut f = TraceParser::new("t");
    feed(&mut f, &bytes[..first.1]);
    let mark = f.mark()?;
    let mut m = split::Merger::new(f.tables(), mark)?;
    let early = (rng.next_u64() % (n as u64 + 1)) as usize;
    let mut rest = pieces.split_off(early);
    for (i, p) in pieces {
        m.push(i, p);
    }
    feed(&mut f, &bytes[last.1..]);
    let frame = f.finish().ok()?;
    // A piece is appended once every piece before it is in; the others wait.
    assert!(m.doubt() || m.merged() + m.waiting() == early);
    for (i, p) in rest.drain(..) {
        m.push(i, p);
    }
    assert!(m.doubt() || (m.merged(), m.waiting()) == (n, 0));
    m.finish(frame, n, bytes.len() as u64)
}

/// Out-of-order arrival equals the in-order merge (and the serial parse), for random cuts,
/// random orders and random moments of the tail's parse.
#[test]
fn pieces_merged_in_any_order_give_the_serial_tables() {
    let mut rng = Rng::from_state(1207);
    let mut merged = 0;
    for seed in 0..4u64 {
        let bytes = rank_bytes(seed, (seed % 2) as u32);
        let serial = dump(&ingest_bytes("t", &bytes).expect("serial parse"));
        for _ in 0..12 {
            let (cuts, chunk) = random_cuts(&mut rng, bytes.len(), 3, 10);
            let in_order = split_parse(&bytes, &cuts, chunk).map(|t| dump(&t));
            let any_order = merger_parse(&bytes, &cuts, chunk, &mut rng).map(|t| dump(&t));
            assert_eq!(any_order, in_order, "seed {seed}, cuts {cuts:?}, chunk {chunk}");
            if let Some(t) = any_order {
                assert_eq!(t, serial, "seed {seed}, cuts {cuts:?}");
                merged += 1;
            }
        }
    }
    assert!(merged >= 24, "only {merged} of 48 random splits merged");
}

/// A piece given twice, a piece missing, or a frame other than the one the merge began with
/// give `None`.
#[test]
fn a_merger_refuses_a_repeated_or_missing_piece() {
    let bytes = rank_bytes(3, 1);
    let seams: Vec<(usize, usize)> = [bytes.len() / 4, bytes.len() / 2, bytes.len() * 3 / 4]
        .iter()
        .map(|&c| {
            let (e, s) = split::find_seam(&bytes[c..]).unwrap();
            (c + e, c + s)
        })
        .collect();
    let parse = || {
        let mut f = TraceParser::new("t");
        f.feed(&bytes[..seams[0].1]);
        let mark = f.mark().unwrap();
        let m = split::Merger::new(f.tables(), mark).unwrap();
        f.feed(&bytes[seams[2].1..]);
        (m, f.finish().unwrap())
    };
    let piece = |i: usize| split::parse_piece("t", &bytes[seams[i].1..seams[i + 1].0]).unwrap();
    let (mut m, frame) = parse();
    m.push(1, piece(1));
    m.push(0, piece(0));
    assert!(m.finish(frame, 2, bytes.len() as u64).is_some());
    let (mut m, frame) = parse();
    m.push(0, piece(0));
    m.push(0, piece(0));
    assert!(m.doubt());
    assert!(m.finish(frame, 2, bytes.len() as u64).is_none());
    let (mut m, frame) = parse();
    m.push(1, piece(1));
    assert!(m.finish(frame, 2, bytes.len() as u64).is_none(), "piece 0 never came");
}

#[test]
fn a_seam_inside_a_string_is_refused() {
    let doc = br#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1},{"ph":"X","name":"x}, {\"ph\":\"X\"}","pid":1,"tid":1,"ts":2,"dur":1},{"ph":"X","name":"b","pid":1,"tid":1,"ts":3,"dur":1},{"ph":"X","name":"c","pid":1,"tid":1,"ts":4,"dur":1}]}"#;
    let inside = doc.windows(4).position(|w| w == b"x}, ").unwrap() + 1;
    let first = doc.windows(3).position(|w| w == b"},{").unwrap();
    let last = doc.windows(3).rposition(|w| w == b"},{").unwrap();
    assert!(split_parse(doc, &[first, inside, last], 3).is_none(), "a false seam must not merge");
    // The true seams alone do.
    let serial = dump(&ingest_bytes("t", doc).unwrap());
    let t = split_parse(doc, &[first, first + 60, last], 3).expect("true seams merge");
    assert_eq!(dump(&t), serial);
}

#[test]
fn damage_and_begin_end_pairs_fall_back() {
    // A damaged event in a middle piece: its diagnostic makes the merge refuse.
    let damaged = br#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1},{"ph":"X","name":"b","pid":1,"ts":2,"dur":1,"tid":[1,2},{"ph":"X","name":"c","pid":1,"tid":1,"ts":3,"dur":1},{"ph":"X","name":"d","pid":1,"tid":1,"ts":4,"dur":1}]}"#;
    let first = damaged.windows(3).position(|w| w == b"},{").unwrap();
    let last = damaged.windows(3).rposition(|w| w == b"},{").unwrap();
    assert!(split_parse(damaged, &[first, first + 3, last], 5).is_none());
    // A B/E pair across a seam.
    let be = br#"{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1},{"ph":"B","name":"b","pid":1,"tid":1,"ts":2},{"ph":"X","name":"c","pid":1,"tid":1,"ts":3,"dur":1},{"ph":"E","pid":1,"tid":1,"ts":4},{"ph":"X","name":"d","pid":1,"tid":1,"ts":5,"dur":1}]}"#;
    let first = be.windows(3).position(|w| w == b"},{").unwrap();
    let last = be.windows(3).rposition(|w| w == b"},{").unwrap();
    assert!(split_parse(be, &[first, first + 60, last], 5).is_none());
}

#[test]
fn seams_are_found_between_elements_only() {
    assert_eq!(split::find_seam(b"1}, \n {2"), Some((2, 6)));
    assert_eq!(split::find_seam(b"1] , {2"), None);
    assert_eq!(split::find_seam(b"}{"), None);
    assert_eq!(split::find_seam(b"a,b},{"), Some((4, 5)));
    assert_eq!(split::seam_in(b"1}, {2", 100), Some((102, 104)));
}

#[test]
fn seam_windows_widen_once_and_stop_at_the_end() {
    let w: Vec<_> = split::seam_windows(10, 10 << 20).collect();
    assert_eq!(w, [(10, 10 + (64 << 10)), (10, 10 + (1 << 20))]);
    // The first window reaches the end: nothing wider to look in.
    assert_eq!(split::seam_windows(10, 1000).collect::<Vec<_>>(), [(10, 1000)]);
    assert_eq!(
        split::seam_windows(100 << 10, 200 << 10).collect::<Vec<_>>(),
        [(100 << 10, 164 << 10), (100 << 10, 200 << 10)]
    );
    assert_eq!(split::seam_windows(1000, 1000).count(), 0);
}

/// A cutting ingest over `bytes` fed in `chunk`-byte reads, its pieces parsed alone and merged:
/// the trace, whether anything was cut, or `None` when it doubts (the host then parses
/// serially).
fn cut_parse(bytes: &[u8], sizes: CutSizes, chunk: usize) -> Option<(RankTrace, usize)> {
    cut_parse_by(bytes, sizes, chunk, &|p| split::parse_piece("t", p))
}

/// [`cut_parse`] with each piece parsed by `parse_piece` (in a browser: another worker, whose
/// columns come back as bytes).
fn cut_parse_by(
    bytes: &[u8],
    sizes: CutSizes,
    chunk: usize,
    parse_piece: &dyn Fn(&[u8]) -> Option<RankTrace>,
) -> Option<(RankTrace, usize)> {
    let mut ing = FileIngest::cutting("t", sizes);
    let mut pieces = Vec::new();
    for c in bytes.chunks(chunk) {
        ing.feed(c);
        pieces.extend(ing.take_pieces());
    }
    match ing.finish_cut().ok()? {
        Cutout::Whole(t) => {
            assert!(pieces.is_empty(), "a whole parse hands on no piece");
            Some((t, 0))
        }
        Cutout::Doubt => None,
        Cutout::Cut { frame, mark, text_bytes, input_bytes } => {
            let n = pieces.len();
            let middle: Option<Vec<RankTrace>> = pieces.iter().map(|p| parse_piece(p)).collect();
            let mut t = split::merge(frame, &mark, middle?, text_bytes)?;
            t.input_bytes = input_bytes;
            Some((t, n))
        }
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).expect("gzip");
    e.finish().expect("gzip")
}

fn dump_all(t: &RankTrace) -> String {
    format!("{}\n{}\n{:?}", dump(t), t.input_bytes, t.diagnostics)
}

#[test]
fn cutting_a_stream_gives_the_serial_tables() {
    let mut rng = Rng::from_state(31);
    let mut cut_some = 0;
    for seed in 0..4u64 {
        let plain = rank_bytes(seed, (seed % 2) as u32);
        for bytes in [plain.clone(), gzip(&plain)] {
            let serial = dump_all(&ingest_bytes("t", &bytes).expect("serial parse"));
            for _ in 0..6 {
                let sizes = CutSizes {
                    head: 1 + rng.below(4096),
                    block: 256 + rng.below(plain.len() / 4),
                    // More than the `M` events at the end (about 6 kB here): a middle piece holding
                    // them doubts, rightly.
                    keep: 8192 + rng.below(8192),
                };
                let chunk = [7usize, 4096, 1 << 20][rng.below(3)];
                let (t, pieces) = cut_parse(&bytes, sizes, chunk).expect("a clean trace never doubts");
                assert_eq!(dump_all(&t), serial, "seed {seed}, {sizes:?}, chunk {chunk}");
                if pieces > 1 {
                    cut_some += 1;
                }
            }
        }
    }
    assert!(cut_some >= 24, "only {cut_some} of 48 cutting parses cut more than one piece");
}

#[test]
fn a_damaged_stream_keeps_the_serial_messages() {
    // A byte changed anywhere: whatever the cut, the answer is the serial parse's or a doubt
    // (then parsed serially), never a third trace.
    let mut rng = Rng::from_state(32);
    let plain = rank_bytes(5, 0);
    let sizes = CutSizes { head: 2048, block: 8192, keep: 2048 };
    let mut agreed = 0;
    for round in 0..40 {
        let mut bytes = plain.clone();
        let at = rng.below(bytes.len());
        bytes[at] = b"{}[],:\"x0"[rng.below(9)];
        let input = if round % 2 == 0 { bytes } else { gzip(&bytes) };
        let serial = ingest_bytes("t", &input).map(|t| dump_all(&t));
        if let Some((t, _)) = cut_parse(&input, sizes, 4096) {
            assert_eq!(Ok(dump_all(&t)), serial, "round {round}, byte {at}");
            agreed += 1;
        }
    }
    assert!(agreed > 0);
}

#[test]
fn a_damaged_gzip_member_is_not_merged() {
    // Cut short: the frame carries gzip's "cut" diagnostic, so the merge refuses.
    let gz = gzip(&rank_bytes(6, 1));
    let cut = &gz[..gz.len() * 3 / 4];
    let sizes = CutSizes { head: 2048, block: 8192, keep: 2048 };
    assert!(cut_parse(cut, sizes, 4096).is_none());
    // The serial parse reads what inflated, and says so.
    let t = ingest_bytes("t", cut).expect("partial");
    assert!(!t.diagnostics.is_empty());
}

/// A piece parsed by another worker: its columns as bytes and back.
fn over_the_wire(piece: &[u8]) -> Option<RankTrace> {
    let t = split::parse_piece("helper", piece)?;
    wire::decode_piece("t", &wire::encode_piece(&t)?)
}

#[test]
fn pieces_over_the_wire_merge_as_parsed_in_place() {
    let mut rng = Rng::from_state(33);
    let mut cut_some = 0;
    for seed in 0..4u64 {
        let plain = rank_bytes(seed, (seed % 2) as u32);
        for bytes in [plain.clone(), gzip(&plain)] {
            let serial = dump_all(&ingest_bytes("t", &bytes).expect("serial parse"));
            for _ in 0..4 {
                let sizes = CutSizes {
                    head: 1 + rng.below(4096),
                    block: 256 + rng.below(plain.len() / 4),
                    keep: 16384,
                };
                let (t, pieces) =
                    cut_parse_by(&bytes, sizes, 4096, &over_the_wire).expect("a clean trace never doubts");
                assert_eq!(dump_all(&t), serial, "seed {seed}, {sizes:?}");
                cut_some += usize::from(pieces > 1);
            }
        }
    }
    assert!(cut_some >= 16, "only {cut_some} of 32 parses cut more than one piece");
}

#[test]
fn damaged_wire_bytes_are_refused_or_merge_without_panic() {
    let plain = rank_bytes(7, 0);
    let serial = dump_all(&ingest_bytes("t", &plain).expect("serial parse"));
    let sizes = CutSizes { head: 2048, block: 8192, keep: 16384 };
    let (t, pieces) = cut_parse_by(&plain, sizes, 4096, &over_the_wire).expect("clean");
    assert!(pieces > 2);
    assert_eq!(dump_all(&t), serial);
    let mut ing = FileIngest::cutting("t", sizes);
    ing.feed(&plain);
    let cut = ing.take_pieces();
    let piece = split::parse_piece("t", &cut[1]);
    let bytes = wire::encode_piece(&piece.expect("a piece")).expect("encodable");
    let mut rng = Rng::from_state(34);
    let mut refused = 0;
    for round in 0..300 {
        let mut b = bytes.clone();
        if round % 3 == 0 {
            b.truncate(rng.below(b.len()));
        } else {
            let at = rng.below(b.len());
            b[at] ^= 1 << rng.below(8);
        }
        match wire::decode_piece("t", &b) {
            None => refused += 1,
            // A flip inside a value decodes to another value: it must still be a trace whose
            // tables agree (the merge indexes them).
            Some(t) => {
                assert_eq!(t.events.kind.len(), t.events.ts_ns.len());
                assert_eq!(t.lanes.kind.len(), t.lanes.pid.len());
            }
        }
    }
    assert!(refused >= 100, "truncations are refused: {refused} of 300");
    // Not a piece the merge would take: nothing to send.
    let mut dirty = split::parse_piece("t", &cut[1]).expect("a piece");
    dirty.counts.by_ph.insert("B".into(), 1);
    assert!(wire::encode_piece(&dirty).is_none());
}

/// The serial reader's carry (`TraceParser::feed`): a chunk that finishes a carried unit is
/// parsed where it lies after a short head of it joins the carried bytes. Events longer than
/// that head (args of 70 KB and 200 KB), one of them damaged, in chunks smaller and larger than
/// the head and mixed at random, give the tables of one whole-file feed.
#[test]
fn long_events_across_chunks_give_the_one_shot_tables() {
    let plain = rank_bytes(5, 0);
    let at = plain.windows(16).position(|w| w == b"\"traceEvents\": [").expect("synth traceEvents") + 16;
    let long = |n: usize, name: &str| {
        format!(
            "{{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"{name}\", \"pid\": 1, \"tid\": 1, \"ts\": 5, \"dur\": 3, \"args\": {{\"note\": \"{}\"}}}},\n",
            "x".repeat(n)
        )
    };
    let mut clean = plain[..at].to_vec();
    clean.extend_from_slice(long(200_000, "long_a").as_bytes());
    clean.extend_from_slice(long(70_000, "long_b").as_bytes());
    clean.extend_from_slice(&plain[at..]);
    // The same with a byte of the second long event's braces broken: the reader resyncs.
    let mut damaged = clean.clone();
    let b = damaged.windows(8).position(|w| w == b"\"long_b\"").expect("long_b") - 10;
    damaged[b] = b'#';
    let mut rng = Rng::from_state(77);
    for bytes in [clean, damaged] {
        let one = {
            let mut p = TraceParser::new("t");
            p.feed(&bytes);
            dump_all(&p.finish().expect("one feed"))
        };
        assert!(one.contains("long_a"), "the long event is read");
        for chunk in [0usize, 7, 4096, 65_553, 100_003, 1 << 20] {
            let mut p = TraceParser::new("t");
            let mut i = 0;
            while i < bytes.len() {
                let n = if chunk == 0 { 1 + rng.below(150_000) } else { chunk };
                let end = bytes.len().min(i + n);
                p.feed(&bytes[i..end]);
                i = end;
            }
            assert_eq!(dump_all(&p.finish().expect("chunked feed")), one, "chunk {chunk} (0: random)");
        }
    }
}
