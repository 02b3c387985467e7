//! Memory follows events, never the input's junk: bombs fed in 1 MiB chunks (never held whole)
//! must keep the peak of live heap bytes under a constant, whatever their size.

use rankscope_core::model::DiagKind;
use rankscope_core::parse::FileIngest;
use rankscope_memtest::Counting;

#[global_allocator]
static ALLOC: Counting = Counting::new();

/// The allocator counts every thread: the tests run one at a time so that none measures another.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Size of each bomb's junk.
const BOMB: usize = 24 << 20;
/// The budget: the parser's unit limit (4 MiB) twice over, the 1 MiB chunk, tables of a few
/// events, and slack.
const BUDGET: usize = 12 << 20;

/// Feeds `head`, then `BOMB` bytes of `fill` in 1 MiB chunks, then `tail`; returns the peak of
/// live bytes during ingest and the result.
fn bomb(head: &[u8], fill: u8, tail: &[u8]) -> (usize, Result<rankscope_core::model::RankTrace, String>) {
    let chunk = vec![fill; 1 << 20];
    ALLOC.reset_peak();
    let base = ALLOC.live();
    let mut f = FileIngest::new("bomb.json");
    f.feed(head);
    for _ in 0..BOMB / chunk.len() {
        f.feed(&chunk);
    }
    f.feed(tail);
    let r = f.finish().map_err(|e| e.to_string());
    (ALLOC.peak().saturating_sub(base), r)
}

const EV: &[u8] = br#"{"ph": "X", "cat": "cpu_op", "name": "after", "pid": 1, "tid": 1, "ts": 1, "dur": 1}"#;

#[test]
fn whitespace_between_events() {
    let _alone = alone();
    let mut head = br#"{"traceEvents": ["#.to_vec();
    head.extend_from_slice(EV);
    head.push(b',');
    let mut tail = EV.to_vec();
    tail.extend_from_slice(b"]}");
    let (peak, r) = bomb(&head, b' ', &tail);
    assert!(peak < BUDGET, "peak {peak} bytes");
    let t = r.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.events.len(), 2);
    assert!(t.diagnostics.is_empty(), "{:?}", t.diagnostics.sorted());
}

#[test]
fn whitespace_before_a_member_value_and_after_the_document() {
    let _alone = alone();
    let (peak, r) = bomb(br#"{"traceName":"#, b'\n', br#""x", "traceEvents": []}"#);
    assert!(peak < BUDGET, "peak {peak} bytes");
    assert_eq!(r.map(|t| t.meta.trace_name), Ok(Some("x".to_string())));
    let (peak, r) = bomb(br#"{"traceEvents": []}"#, b'\t', b"");
    assert!(peak < BUDGET, "peak {peak} bytes");
    assert!(r.is_ok());
}

#[test]
fn unterminated_string() {
    let _alone = alone();
    let mut head = br#"{"traceEvents": ["#.to_vec();
    head.extend_from_slice(EV);
    head.extend_from_slice(br#", {"ph": "X", "name": ""#);
    let (peak, r) = bomb(&head, b'a', b"");
    assert!(peak < BUDGET, "peak {peak} bytes");
    let t = r.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.events.len(), 1);
    let d =
        t.diagnostics.get(DiagKind::MalformedEvent).unwrap_or_else(|| panic!("{:?}", t.diagnostics.sorted()));
    assert!(d.message.contains("limit"), "{}", d.message);
}

#[test]
fn huge_string_then_more_events() {
    let _alone = alone();
    // A 64 MiB name that does end: the event is skipped as oversized, the next one kept.
    let mut head = br#"{"traceEvents": [{"ph": "X", "name": ""#.to_vec();
    head.truncate(head.len());
    let mut tail = br#"", "ts": 1, "dur": 1}, "#.to_vec();
    tail.extend_from_slice(EV);
    tail.extend_from_slice(b"]}");
    let (peak, r) = bomb(&head, b'b', &tail);
    assert!(peak < BUDGET, "peak {peak} bytes");
    let t = r.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.events.len(), 1, "{:?}", t.diagnostics.sorted());
    assert!(t.diagnostics.get(DiagKind::Truncated).is_none());
}

#[test]
fn deep_nesting() {
    let _alone = alone();
    let (peak, r) = bomb(b"", b'[', b"");
    assert!(peak < BUDGET, "peak {peak} bytes");
    assert!(r.is_err(), "a nest of brackets is not a trace");
    let mut head = br#"{"traceEvents": ["#.to_vec();
    head.extend_from_slice(EV);
    head.extend_from_slice(br#", {"ph": "X", "args": "#);
    let (peak, r) = bomb(&head, b'{', b"");
    assert!(peak < BUDGET, "peak {peak} bytes");
    assert_eq!(r.map(|t| t.events.len()), Ok(1));
    let (peak, r) = bomb(br#"{"deviceProperties": "#, b'[', b"");
    assert!(peak < BUDGET, "peak {peak} bytes");
    assert!(r.is_ok() || r.is_err());
}

#[test]
fn oversized_metadata_member() {
    let _alone = alone();
    let mut tail = br#"], "traceEvents": ["#.to_vec();
    tail.extend_from_slice(EV);
    tail.extend_from_slice(b"]}");
    let (peak, r) = bomb(br#"{"deviceProperties": [1"#, b',', &tail);
    assert!(peak < BUDGET, "peak {peak} bytes");
    let t = r.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.events.len(), 1);
    assert!(t.diagnostics.get(DiagKind::OversizedValue).is_some(), "{:?}", t.diagnostics.sorted());
}

#[test]
fn gzip_of_whitespace() {
    let _alone = alone();
    // 12 MiB of spaces gzip to ~12 kB: the inflated text is never held either.
    let mut text = br#"{"traceEvents": ["#.to_vec();
    text.extend(std::iter::repeat_n(b' ', BOMB / 2));
    text.extend_from_slice(EV);
    text.extend_from_slice(b"]}");
    let gz = gzip(&text);
    drop(text);
    ALLOC.reset_peak();
    let base = ALLOC.live();
    let mut f = FileIngest::new("bomb.json.gz");
    for c in gz.chunks(1 << 16) {
        f.feed(c);
    }
    let r = f.finish();
    let peak = ALLOC.peak().saturating_sub(base);
    assert!(peak < BUDGET, "peak {peak} bytes");
    assert_eq!(r.map(|t| t.events.len()), Ok(1));
}

fn gzip(text: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let _ = e.write_all(text);
    e.finish().unwrap_or_default()
}

/// A job digest whose analysis line is 64 MiB of blanks (a 64 kB file): judged by its first
/// bytes, refused at the line's start, never held (it was read whole before it was judged).
#[test]
fn digest_analysis_line_of_blanks() {
    use rankscope_core::job::digest;
    let _alone = alone();
    let head = br#"{"schema":"rankscope.digest","producer":"x","ranks":0,"texts":[]}"#;
    let mut content = head.to_vec();
    content.push(b'\n');
    content.resize(content.len() + (64 << 20), b' ');
    content.push(b'\n');
    let mut bytes = digest::MAGIC.to_vec();
    bytes.extend_from_slice(&digest::VERSION.to_le_bytes());
    bytes.extend(gzip(&content));
    drop(content);
    ALLOC.reset_peak();
    let base = ALLOC.live();
    let r = digest::decode("blank.rsdigest", &bytes);
    let peak = ALLOC.peak().saturating_sub(base);
    assert!(peak < BUDGET, "peak {peak} bytes");
    let e = r.err().map(|e| e.to_string()).unwrap_or_default();
    assert_eq!(
        e,
        format!(
            "blank.rsdigest: damaged rankscope job digest (at inflated byte {}): the analysis does not begin as one (`{{\"schema\":\"rankscope.analysis\",`)",
            head.len() + 1
        )
    );
}
