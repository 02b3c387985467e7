//! `rankscope export --redact-key`: DLRM's eight ranks with planted markers (an annotation,
//! a module, a kernel, a process, a host, a frame, an arg, the folder and file names) exported
//! as Parquet with and without redaction. No byte of any redacted file may hold a marker; every
//! number, boolean and null, and every column of rankscope's own vocabulary, equals the plain
//! export's (read back with the small Parquet reader below); one annotation has one token on
//! every rank, the token `analyze --redact-key` gives it.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used)] // a failed expectation is the test failing

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use rankscope_core::redact::{Key, Redactor};
use serde_json::{json, Value};

const MARK: &str = "ZQX";
const KEY: &str = "shared-key";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rankscope"))
}

/// DLRM's eight ranks with markers planted, under a folder whose path holds a user and a host.
fn planted(root: &Path) -> PathBuf {
    let dir = root.join("home").join("ZQXalice").join("ZQXhost-node17-run");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces/param-dlrm-8rank");
    let src = if src.exists() { src } else { PathBuf::from("/work/shared/traces/param-dlrm-8rank") };
    let mut files: Vec<_> =
        std::fs::read_dir(&src).expect("dlrm traces").flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f)
            .expect("read")
            .replace("## sparse_data_dist ##", "## ZQXannot sparse_dist ##")
            .replace("## KJTListSplitsAwaitable wait() ##", "nn.Module: ZQXSecretEmbedding_0")
            .replace("split_embedding_codegen", "ZQXkern_codegen")
            .replace("\"python3\"", "\"ZQXproc\"");
        let mut v: Value = serde_json::from_str(&text).expect("json");
        v["hostname"] = json!("ZQXhost-node17");
        let evs = v["traceEvents"].as_array_mut().expect("events");
        let (pid, tid, ts) = evs
            .iter()
            .find(|e| {
                e["cat"] == "user_annotation"
                    && e["name"].as_str().is_some_and(|n| n.starts_with("ProfilerStep"))
            })
            .map(|e| (e["pid"].clone(), e["tid"].clone(), e["ts"].as_i64().unwrap_or(0)))
            .expect("a step");
        evs.push(json!({"ph": "X", "cat": "python_function", "name": "/home/ZQXalice/proj/ZQXmodel.py(42): forward",
            "pid": pid, "tid": tid, "ts": ts + 1, "dur": 2, "args": {"Python id": 9, "ZQXargkey": "ZQXargvalue"}}));
        evs.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": "ZQXthread-loader"}}));
        let name = f.file_name().expect("name").to_string_lossy().replace("worker", "ZQXbox-worker");
        std::fs::write(dir.join(name), serde_json::to_vec(&v).expect("json")).expect("write");
    }
    dir
}

/// `rankscope export DIR --format F --out OUT` with `extra` flags: the files it wrote.
fn export(dir: &Path, out: &Path, format: &str, extra: &[&str]) -> BTreeMap<String, Vec<u8>> {
    let o = bin()
        .arg("export")
        .arg(dir)
        .args(["--format", format, "--out"])
        .arg(out)
        .args(extra)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains(MARK), "stderr leaks: {stderr}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains(MARK), "stdout leaks");
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(out).expect("out").flatten() {
        files.insert(e.file_name().to_string_lossy().to_string(), std::fs::read(e.path()).expect("file"));
    }
    files
}

#[test]
fn redacted_tables_hold_no_marker_and_the_same_figures() {
    let root = std::env::temp_dir().join(format!("rankscope-export-redact-{}", std::process::id()));
    let dir = planted(&root);
    let plain = export(&dir, &root.join("plain"), "parquet", &[]);
    let red = export(&dir, &root.join("red"), "parquet", &["--redact-key", KEY]);
    assert!(plain.contains_key("events.parquet") && plain.len() == 7, "{:?}", plain.keys());
    // The fixture does plant what the test looks for.
    assert!(String::from_utf8_lossy(&plain["events.parquet"]).contains(MARK));
    for (name, bytes) in &red {
        let text = String::from_utf8_lossy(bytes);
        for m in [MARK, "zqx", "Zqx"] {
            assert!(!text.contains(m), "{name} leaks {m}: …{}…", {
                let k = text.find(m).unwrap_or(0);
                text.get(k.saturating_sub(80)..(k + 80).min(text.len())).unwrap_or_default().to_string()
            });
        }
    }
    let statement: Value = serde_json::from_slice(&red["redaction.json"]).expect("the statement");
    assert!(statement["hashed"]["name"].as_u64().is_some_and(|n| n > 0), "{statement}");
    assert!(statement["hashed"]["host"].as_u64().is_some_and(|n| n > 0), "{statement}");
    assert_eq!(statement["key"], "given");

    let vocabulary = rankscope_core::redact::table::VOCABULARY_COLUMNS;
    for (name, bytes) in plain.iter().filter(|(n, _)| n.ends_with(".parquet")) {
        let p = parquet::read(bytes);
        let r = parquet::read(&red[name]);
        assert_eq!(p.len(), r.len(), "{name}: columns");
        let rows = p.first().map_or(0, |c| c.1.len());
        for ((col, a), (col2, b)) in p.iter().zip(&r) {
            assert_eq!(col, col2, "{name}: column order");
            assert_eq!(a.len(), b.len(), "{name}.{col}: rows");
            let text = a.iter().any(|c| matches!(c, parquet::Cell::Text(_)));
            if !text || vocabulary.contains(&col.as_str()) {
                assert_eq!(a, b, "{name}.{col}: the figures stay");
            } else {
                // Text: the same rows hold a value (a token where a name was).
                let present =
                    |v: &[parquet::Cell]| v.iter().map(|c| *c != parquet::Cell::Null).collect::<Vec<_>>();
                assert_eq!(present(a), present(b), "{name}.{col}: nulls stay");
            }
        }
        if name == "events.parquet" {
            assert!(rows > 10_000, "{rows} events");
        }
    }

    // One annotation, one token, on every rank: the token `analyze --redact-key` gives it.
    let mut k = Redactor::new(Key::from_phrase(KEY));
    k.consider("## ZQXannot sparse_dist ##");
    let token = k.exact("## ZQXannot sparse_dist ##").expect("hashed").to_string();
    let ev = parquet::read(&red["events.parquet"]);
    let col = |n: &str| &ev.iter().find(|c| c.0 == n).expect("column").1;
    let mut ranks: Vec<i64> = col("name")
        .iter()
        .zip(col("rank"))
        .filter(|(n, _)| **n == parquet::Cell::Text(token.clone()))
        .filter_map(|(_, r)| if let parquet::Cell::Int(r) = r { Some(*r) } else { None })
        .collect();
    ranks.dedup();
    assert_eq!(ranks, (0..8).collect::<Vec<_>>(), "the annotation's token on every rank");
    let _ = std::fs::remove_dir_all(&root);
}

/// A reader of the Parquet subset rankscope writes (PLAIN, uncompressed, data pages v1,
/// OPTIONAL columns): the footer's Thrift compact structs, then each column chunk's page.
mod parquet {
    use std::collections::BTreeMap;

    #[derive(Debug, Clone, PartialEq)]
    pub enum Cell {
        Null,
        Int(i64),
        Float(u64),
        Text(String),
        Bool(bool),
    }

    #[derive(Debug, Clone)]
    enum T {
        Int(i64),
        Bin(Vec<u8>),
        List(Vec<T>),
        Struct(BTreeMap<i16, T>),
        Other,
    }

    impl T {
        fn field(&self, id: i16) -> &T {
            match self {
                T::Struct(m) => m.get(&id).unwrap_or(&T::Other),
                _ => &T::Other,
            }
        }
        fn int(&self) -> i64 {
            if let T::Int(v) = self {
                *v
            } else {
                panic!("not an int: {self:?}")
            }
        }
        fn list(&self) -> &[T] {
            if let T::List(v) = self {
                v
            } else {
                &[]
            }
        }
    }

    fn varint(b: &[u8], p: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let x = b[*p];
            *p += 1;
            v |= u64::from(x & 0x7f) << shift;
            if x & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }

    fn zigzag(v: u64) -> i64 {
        (v >> 1) as i64 ^ -((v & 1) as i64)
    }

    fn value(b: &[u8], p: &mut usize, ty: u8) -> T {
        match ty {
            1 | 2 => T::Other,
            3 => {
                *p += 1;
                T::Int(i64::from(b[*p - 1]))
            }
            4..=6 => T::Int(zigzag(varint(b, p))),
            7 => {
                *p += 8;
                T::Other
            }
            8 => {
                let n = varint(b, p) as usize;
                *p += n;
                T::Bin(b[*p - n..*p].to_vec())
            }
            9 | 10 => {
                let h = b[*p];
                *p += 1;
                let mut n = usize::from(h >> 4);
                if n == 15 {
                    n = varint(b, p) as usize;
                }
                T::List((0..n).map(|_| value(b, p, h & 0xf)).collect())
            }
            12 => strukt(b, p),
            _ => panic!("thrift type {ty}"),
        }
    }

    fn strukt(b: &[u8], p: &mut usize) -> T {
        let mut m = BTreeMap::new();
        let mut last = 0i16;
        loop {
            let h = b[*p];
            *p += 1;
            if h == 0 {
                return T::Struct(m);
            }
            let id = if h >> 4 == 0 { zigzag(varint(b, p)) as i16 } else { last + i16::from(h >> 4) };
            last = id;
            m.insert(id, value(b, p, h & 0xf));
        }
    }

    /// Every column's name and cells, in schema order.
    pub fn read(b: &[u8]) -> Vec<(String, Vec<Cell>)> {
        assert!(b.starts_with(b"PAR1") && b.ends_with(b"PAR1"));
        let n = b.len();
        let len = u32::from_le_bytes([b[n - 8], b[n - 7], b[n - 6], b[n - 5]]) as usize;
        let mut p = n - 8 - len;
        let meta = strukt(b, &mut p);
        let schema = meta.field(2).list();
        let cols: Vec<(String, i64)> = schema[1..]
            .iter()
            .map(|e| match e.field(4) {
                T::Bin(name) => (String::from_utf8_lossy(name).to_string(), e.field(1).int()),
                _ => panic!("a column without a name"),
            })
            .collect();
        let mut out: Vec<(String, Vec<Cell>)> = cols.iter().map(|(c, _)| (c.clone(), Vec::new())).collect();
        for g in meta.field(4).list() {
            for (k, chunk) in g.field(1).list().iter().enumerate() {
                let mut p = chunk.field(3).field(9).int() as usize;
                let rows = chunk.field(3).field(5).int() as usize;
                let _header = strukt(b, &mut p);
                let levels = u32::from_le_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]]) as usize;
                let mut q = p + 4;
                let _run = varint(b, &mut q);
                let bit = |bytes: &[u8], i: usize| bytes[i / 8] >> (i % 8) & 1 == 1;
                let valid: Vec<bool> = (0..rows).map(|i| bit(&b[q..], i)).collect();
                let mut v = p + 4 + levels;
                let mut nth = 0;
                for ok in valid {
                    let cell = if !ok {
                        Cell::Null
                    } else {
                        match cols[k].1 {
                            2 => {
                                v += 8;
                                Cell::Int(i64::from_le_bytes(b[v - 8..v].try_into().expect("8 bytes")))
                            }
                            5 => {
                                v += 8;
                                Cell::Float(u64::from_le_bytes(b[v - 8..v].try_into().expect("8 bytes")))
                            }
                            6 => {
                                let l = u32::from_le_bytes(b[v..v + 4].try_into().expect("4 bytes")) as usize;
                                v += 4 + l;
                                Cell::Text(String::from_utf8_lossy(&b[v - l..v]).to_string())
                            }
                            0 => {
                                nth += 1;
                                Cell::Bool(bit(&b[p + 4 + levels..], nth - 1))
                            }
                            t => panic!("type {t}"),
                        }
                    };
                    out[k].1.push(cell);
                }
            }
        }
        out
    }
}
