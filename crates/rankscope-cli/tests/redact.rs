//! `--redact`: a job whose annotations, module names, kernels, threads, hosts, args and paths
//! are planted markers, run through every output with and without redaction. No output byte
//! may hold a marker; every figure must equal the plain run's; one name gets one token on
//! every rank and in every output made under one key.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::expect_used)] // a failed expectation is the test failing

use std::path::{Path, PathBuf};
use std::process::Command;

use rankscope_core::redact::{Key, Redactor};
use serde_json::{json, Value};

const MARK: &str = "ZQX";
const KEY: &str = "shared-key";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rankscope"))
}

/// DLRM's eight ranks with markers planted, under a folder whose path holds a user name and a
/// host name.
fn planted() -> PathBuf {
    let root = std::env::temp_dir().join(format!("rankscope-redact-{}", std::process::id()));
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
        if let Some(e) = evs.iter_mut().find(|e| e["cat"] == "cpu_op") {
            e["args"]["Call stack"] = json!("/home/ZQXalice/proj/ZQXtrain.py(7): main");
            e["args"]["Process Group Description"] = json!("ZQXpg_desc");
        }
        let name = f.file_name().expect("name").to_string_lossy().replace("worker", "ZQXbox-worker");
        std::fs::write(dir.join(name), serde_json::to_vec(&v).expect("json")).expect("write");
    }
    dir
}

struct Run {
    json: Value,
    texts: Vec<(String, Vec<u8>)>,
}

/// Every output of `analyze` on `dir`, with `extra` flags.
fn run_all(dir: &Path, extra: &[&str], tag: &str) -> Run {
    let out = dir.parent().expect("parent").join(format!("out-{tag}"));
    std::fs::create_dir_all(&out).expect("out dir");
    let mut texts = Vec::new();
    let mut json = Value::Null;
    for form in ["--json", "--csv", "--md", "--all", ""] {
        let mut c = bin();
        c.arg("analyze").arg(dir).args(extra).env("NO_COLOR", "1");
        if !form.is_empty() {
            c.arg(form);
        }
        if form == "--json" {
            c.arg("--merged-trace").arg(out.join("m.json")).arg("--perfetto").arg(out.join("p.tar"));
        }
        let o = c.output().expect("run");
        assert!(o.status.success(), "{form}: {}", String::from_utf8_lossy(&o.stderr));
        if form == "--json" {
            json = serde_json::from_slice(&o.stdout).expect("json output");
        }
        texts.push((format!("stdout {form}"), o.stdout));
        texts.push((format!("stderr {form}"), o.stderr));
    }
    for f in ["m.json", "p.tar"] {
        texts.push((f.to_string(), std::fs::read(out.join(f)).expect("export")));
    }
    Run { json, texts }
}

/// Every number, boolean and null of `a` equals `b`'s at the same place, arrays and objects
/// have the same shape; strings may differ (names become tokens).
fn same_figures(a: &Value, b: &Value, at: &str) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: members");
            for ((k, p), (l, q)) in x.iter().zip(y) {
                let _ = l;
                same_figures(p, q, &format!("{at}.{k}"));
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: length");
            x.iter().zip(y).for_each(|(p, q)| same_figures(p, q, at));
        }
        (Value::String(_), Value::String(_)) => {}
        _ => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn no_marker_survives_and_the_figures_stay() {
    let dir = planted();
    let plain = run_all(&dir, &[], "plain");
    // The fixture does plant what the test looks for.
    for (what, bytes) in &plain.texts {
        if what == "stdout --json" || what == "m.json" || what == "p.tar" {
            assert!(String::from_utf8_lossy(bytes).contains(MARK), "the plain {what} shows the markers");
        }
    }
    let red = run_all(&dir, &["--redact-key", KEY], "red");
    for (what, bytes) in &red.texts {
        let text = String::from_utf8_lossy(bytes);
        for m in [MARK, "zqx", "Zqx"] {
            assert!(!text.contains(m), "{what} leaks {m}: …{}…", {
                let k = text.find(m).unwrap_or(0);
                text.get(k.saturating_sub(120)..(k + 120).min(text.len())).unwrap_or_default().to_string()
            });
        }
    }
    let mut red_json = red.json.clone();
    let statement = red_json.as_object_mut().and_then(|o| o.remove("redaction")).expect("a redaction member");
    assert!(statement["hashed"]["name"].as_u64().is_some_and(|n| n > 0), "{statement}");
    assert!(statement["hashed"]["host"].as_u64().is_some_and(|n| n > 0), "{statement}");
    same_figures(&plain.json, &red_json, "");
    let ids = |v: &Value| -> Vec<String> {
        v["findings"].as_array().into_iter().flatten().map(|f| f["id"].to_string()).collect()
    };
    assert!(!ids(&plain.json).is_empty());
    assert_eq!(ids(&plain.json), ids(&red_json));
    assert_eq!(plain.json["collectives"], red_json["collectives"], "kinds and sizes carry no names");

    // One annotation, one token, on every rank and in every output under the key.
    let mut r = Redactor::new(Key::from_phrase(KEY));
    r.consider("## ZQXannot sparse_dist ##");
    let token = r.exact("## ZQXannot sparse_dist ##").expect("hashed").to_string();
    let merged: Value =
        serde_json::from_slice(&red.texts.iter().find(|(w, _)| w == "m.json").expect("merged").1)
            .expect("merged trace json");
    let mut pids: Vec<i64> = merged["traceEvents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["name"] == token.as_str())
        .filter_map(|e| e["pid"].as_i64())
        .collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), 8, "the annotation's token on every rank: {pids:?}");
    assert!(red.json.to_string().contains(&token), "the report names the same token");
    assert!(merged["rankscope_redaction"].is_object(), "the merged trace says what was redacted");
    let again = run_all(&dir, &["--redact-key", KEY], "again");
    assert_eq!(again.json, red.json, "one key, one output");
    let _ =
        std::fs::remove_dir_all(dir.parent().and_then(Path::parent).and_then(Path::parent).unwrap_or(&dir));
}
