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
/// Every form of the report: JSON (with both exports), CSV, Markdown, the terminal's whole
/// tables, the terminal's.
const ALL_FORMS: [&str; 5] = ["--json", "--csv", "--md", "--all", ""];

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
            .replace("\"python3\"", "\"ZQXproc\"")
            // An annotation spelled as one of rankscope's own enum values (a capture gap): the
            // word must stay where the analysis needs it, so the JSON still reads back.
            .replace("## zero_grad ##", "no_stack");
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

/// The names a user writes, marked: every annotation and Python function that is not one of
/// PyTorch's own markers (steps, collectives, optimizer, data loader), every CPU thread's and
/// process's name; a host and a folder holding a user name.
fn plant(v: &mut Value) {
    let public =
        ["ProfilerStep", "nccl:", "c10d::", "aten::", "Optimizer.", "enumerate(", "record_param_comms"];
    if v.get("traceEvents").is_some() {
        v["hostname"] = json!("ZQXhost-a");
    }
    let evs = match v {
        Value::Object(o) => o.get_mut("traceEvents").and_then(Value::as_array_mut),
        Value::Array(a) => Some(a),
        _ => None,
    };
    for e in evs.into_iter().flatten() {
        let cat = e["cat"].as_str().unwrap_or_default().to_string();
        let name = e["name"].as_str().unwrap_or_default().to_string();
        let mark = |s: &str| format!("ZQX{s}");
        if matches!(cat.as_str(), "user_annotation" | "gpu_user_annotation" | "python_function")
            && !public.iter().any(|p| name.starts_with(p))
        {
            e["name"] = json!(mark(&name));
        }
        if e["ph"] == "M" && (name == "thread_name" || name == "process_name") {
            let n = e["args"]["name"].as_str().unwrap_or_default().to_string();
            if !n.starts_with("stream") && !n.is_empty() {
                e["args"]["name"] = json!(mark(&n));
            }
        }
    }
}

/// A copy of each trace of `src` with [`plant`]'s markers, under a marked folder.
fn planted_copy(src: &Path, tag: &str) -> Option<PathBuf> {
    use std::io::Read as _;
    let dir = std::env::temp_dir()
        .join(format!("rankscope-redact-{}-{tag}", std::process::id()))
        .join("ZQXbob")
        .join("traces");
    std::fs::create_dir_all(&dir).ok()?;
    let mut files: Vec<_> = std::fs::read_dir(src).ok()?.flatten().map(|e| e.path()).collect();
    files.sort();
    let mut n = 0;
    for f in files.iter().filter(|f| f.is_file()) {
        let raw = std::fs::read(f).ok()?;
        let mut text = Vec::new();
        if raw.starts_with(&[0x1f, 0x8b]) {
            flate2::read::MultiGzDecoder::new(raw.as_slice()).read_to_end(&mut text).ok()?;
        } else {
            text = raw;
        }
        let Ok(mut v) = serde_json::from_slice::<Value>(&text) else { continue };
        plant(&mut v);
        let name = f.file_name()?.to_string_lossy().trim_end_matches(".gz").to_string();
        std::fs::write(dir.join(format!("ZQX{name}")), serde_json::to_vec(&v).ok()?).ok()?;
        n += 1;
    }
    (n > 0).then_some(dir)
}

struct Run {
    json: Value,
    texts: Vec<(String, Vec<u8>)>,
}

/// Every output of `analyze` on `dir`, with `extra` flags.
fn run_all(dir: &Path, extra: &[&str], tag: &str, forms: &[&str]) -> Run {
    let out = dir.parent().expect("parent").join(format!("out-{tag}"));
    std::fs::create_dir_all(&out).expect("out dir");
    let mut texts = Vec::new();
    let mut json = Value::Null;
    for &form in forms {
        let mut c = bin();
        c.arg("analyze").arg(dir).args(extra).env("NO_COLOR", "1");
        if !form.is_empty() {
            c.arg(form);
        }
        if form == "--json" {
            c.arg("--merged-trace").arg(out.join("m.json")).arg("--perfetto").arg(out.join("p.tar"));
        }
        let o = c.output().expect("run");
        // 1: an input the job could not use (HTA's test traces hold some); the same either way.
        assert!(matches!(o.status.code(), Some(0 | 1)), "{form}: {}", String::from_utf8_lossy(&o.stderr));
        texts.push((format!("exit {form}"), vec![o.status.code().unwrap_or(-1) as u8]));
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

/// `part` per file, then `combine --redact-key`: the report of parts (which hold no string
/// table: the names are gathered from the analysis) holds no marker either.
fn combined_parts_leak_nothing(dir: &Path) {
    let out = dir.parent().expect("parent").join("parts");
    std::fs::create_dir_all(&out).expect("parts dir");
    let mut files: Vec<_> = std::fs::read_dir(dir).expect("dir").flatten().map(|e| e.path()).collect();
    files.sort();
    let mut parts = Vec::new();
    for (k, f) in files.iter().enumerate() {
        let p = out.join(format!("{k}.part"));
        let o = bin().arg("part").arg(f).arg("-o").arg(&p).output().expect("part");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        parts.push(p);
    }
    for form in ["--json", "--md"] {
        let o =
            bin().arg("combine").args(&parts).args(["--redact-key", KEY, form]).output().expect("combine");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(!text.contains(MARK), "combine {form} leaks: …{}…", {
            let k = text.find(MARK).unwrap_or(0);
            text.get(k.saturating_sub(120)..(k + 120).min(text.len())).unwrap_or_default().to_string()
        });
        assert!(text.contains("name-"), "combine {form} shows tokens");
    }
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
    check(&planted(), &ALL_FORMS);
}

#[test]
fn real_traces_with_marked_names() {
    let shared = Path::new("/work/shared/traces");
    for d in [
        "tracelens",
        "kineto-tb-plugin",
        "param-single",
        "hta/with_gpu_user_annotation",
        "hta/critical_path",
        "hta/triton_example",
    ] {
        let Some(dir) = planted_copy(&shared.join(d), &d.replace('/', "-")) else { continue };
        check(&dir, &["--json", "--md"]);
        let _ = std::fs::remove_dir_all(dir.parent().and_then(Path::parent).unwrap_or(&dir));
    }
}

/// Every output with and without the key: no marker with it, the same figures; with
/// `dlrm`, the planted annotation's token on each of DLRM's eight ranks.
fn check(dir: &Path, forms: &[&str]) {
    let dlrm = forms == ALL_FORMS;
    let plain = run_all(dir, &[], "plain", forms);
    // The fixture does plant what the test looks for.
    for (what, bytes) in &plain.texts {
        if what == "stdout --json" || what == "m.json" || what == "p.tar" {
            assert!(String::from_utf8_lossy(bytes).contains(MARK), "the plain {what} shows the markers");
        }
    }
    let red = run_all(dir, &["--redact-key", KEY], "red", forms);
    for (what, bytes) in &red.texts {
        let text = String::from_utf8_lossy(bytes);
        for m in [MARK, "zqx", "Zqx"] {
            assert!(!text.contains(m), "{what} leaks {m}: …{}…", {
                let k = text.find(m).unwrap_or(0);
                text.get(k.saturating_sub(120)..(k + 120).min(text.len())).unwrap_or_default().to_string()
            });
        }
    }
    let exits = |r: &Run| -> Vec<Vec<u8>> {
        r.texts.iter().filter(|(w, _)| w.starts_with("exit")).map(|(_, b)| b.clone()).collect()
    };
    assert_eq!(exits(&plain), exits(&red), "{}: the exit status is the same redacted", dir.display());
    let mut red_json = red.json.clone();
    let statement = red_json.as_object_mut().and_then(|o| o.remove("redaction")).expect("a redaction member");
    assert!(statement["hashed"]["name"].as_u64().is_some_and(|n| n > 0), "{statement}");
    assert!(statement["hashed"]["host"].as_u64().is_some_and(|n| n > 0) || !dlrm, "{statement}");
    same_figures(&plain.json, &red_json, "");
    let ids = |v: &Value| -> Vec<String> {
        v["findings"].as_array().into_iter().flatten().map(|f| f["id"].to_string()).collect()
    };
    assert!(!ids(&plain.json).is_empty() || !dlrm);
    assert_eq!(ids(&plain.json), ids(&red_json));
    assert_eq!(plain.json["collectives"], red_json["collectives"], "kinds and sizes carry no names");
    assert_eq!(plain.json["ranks"][0]["capture_gaps"], red_json["ranks"][0]["capture_gaps"]);
    if !dlrm {
        return;
    }

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
    combined_parts_leak_nothing(dir);
    let again = run_all(dir, &["--redact-key", KEY], "again", forms);
    assert_eq!(again.json, red.json, "one key, one output");
    let _ =
        std::fs::remove_dir_all(dir.parent().and_then(Path::parent).and_then(Path::parent).unwrap_or(dir));
}
