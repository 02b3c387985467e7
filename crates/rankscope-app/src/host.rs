//! Where the app runs, read once from its URL: a plain page or embedded in a host page
//! (`?embed=1` or `#embed`), which origins it trusts (`?origin=…`, repeatable or
//! comma-separated; its own origin always), and which Perfetto UI "Open in Perfetto" posts to
//! (`?perfetto=URL`, else the one the user set last, else <https://ui.perfetto.dev>), and how
//! many workers may read files at once (`?workers=N`, else `navigator.hardwareConcurrency`).
//! Also how a worker starts: from whatever the boot script offers as
//! `globalThis.rankscopeWorker()`, a Worker handed the worker's wasm compiled once by the page
//! (`www/boot.js`: from `./worker_loader.js` beside the page; the single-file build: from a Blob
//! URL).
//!
//! Every URL the app uses is relative to the page, so `dist/` works under any path prefix.

use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::Worker;

/// The default Perfetto UI.
pub const PERFETTO_UI: &str = "https://ui.perfetto.dev";
/// Where the last Perfetto UI the user named is kept (this browser only).
const PERFETTO_KEY: &str = "rankscope.perfetto_ui";

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    /// Embedded: no top bar, no landing page; files come from the host page.
    pub embed: bool,
    /// The page's own origin (`"null"` under `file://`).
    pub own_origin: String,
    /// Origins whose messages the embedding protocol answers (never `*` or `null`).
    pub trusted: Vec<String>,
    /// Given by `?perfetto=`.
    pub perfetto: Option<String>,
    /// Given by `?workers=N` (1 to [`MAX_WORKERS`]): at most this many workers read files at
    /// once, so a dashboard that embeds the app can leave cores to its own page. None: one per
    /// core.
    pub workers: Option<usize>,
}

/// The most workers the app starts, whatever the machine or the URL says.
pub const MAX_WORKERS: usize = 16;

/// The origin of an absolute http(s) URL, lower-cased, without a path or a default port; None
/// for anything else (`*`, `null`, `file:`, junk).
pub fn origin_of(url: &str) -> Option<String> {
    let u = url.trim();
    let (scheme, rest) = u.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or("").to_ascii_lowercase();
    if host.is_empty() || host.contains('@') || host.contains('*') {
        return None;
    }
    let default_port = if scheme == "http" { ":80" } else { ":443" };
    let host = host.strip_suffix(default_port).map(str::to_string).unwrap_or(host);
    Some(format!("{scheme}://{host}"))
}

impl Page {
    /// Reads a page's URL parts: `search` (`?embed=1&origin=…`) and `hash` (`#embed&view=…`).
    pub fn parse(own_origin: &str, search: &str, hash: &str) -> Page {
        let mut p = Page { own_origin: own_origin.to_string(), ..Page::default() };
        for (k, v) in pairs(search.trim_start_matches('?')) {
            match k.as_str() {
                "embed" => p.embed = v != "0" && v != "false",
                "origin" => {
                    for o in v.split(',').filter_map(origin_of) {
                        if !p.trusted.contains(&o) {
                            p.trusted.push(o);
                        }
                    }
                }
                "perfetto" => p.perfetto = origin_of(&v).map(|_| v.trim().to_string()),
                "workers" => {
                    p.workers = v.trim().parse::<usize>().ok().filter(|&n| n > 0).map(|n| n.min(MAX_WORKERS))
                }
                _ => {}
            }
        }
        if pairs(hash.trim_start_matches('#')).any(|(k, v)| k == "embed" && v != "0") {
            p.embed = true;
        }
        if let Some(own) = origin_of(own_origin) {
            if !p.trusted.contains(&own) {
                p.trusted.insert(0, own);
            }
        }
        p
    }

    /// Whether a message from `origin` is answered.
    pub fn trusts(&self, origin: &str) -> bool {
        self.trusted.iter().any(|t| t == origin)
    }

    /// This page's options, from `location`.
    pub fn current() -> Page {
        let loc = web_sys::window().map(|w| w.location());
        let get = |f: fn(&web_sys::Location) -> Result<String, JsValue>| {
            loc.as_ref().and_then(|l| f(l).ok()).unwrap_or_default()
        };
        Page::parse(
            &get(web_sys::Location::origin),
            &get(web_sys::Location::search),
            &get(web_sys::Location::hash),
        )
    }

    /// How many workers may read files at once: `?workers=`, else one per core (as
    /// `navigator.hardwareConcurrency` reports them), at most [`MAX_WORKERS`].
    pub fn max_workers(&self) -> usize {
        self.workers.unwrap_or_else(|| {
            let cores = web_sys::window().map_or(2.0, |w| w.navigator().hardware_concurrency());
            (cores as usize).clamp(1, MAX_WORKERS)
        })
    }

    /// The Perfetto UI to post to: `?perfetto=`, else the one the user named last, else the
    /// public one.
    pub fn perfetto_ui(&self) -> String {
        self.perfetto
            .clone()
            .or_else(|| storage().and_then(|s| s.get_item(PERFETTO_KEY).ok().flatten()))
            .filter(|u| origin_of(u).is_some())
            .unwrap_or_else(|| PERFETTO_UI.to_string())
    }
}

/// Remembers the Perfetto UI the user named (in this browser's local storage).
pub fn remember_perfetto_ui(url: &str) {
    if let Some(s) = storage() {
        let _ = s.set_item(PERFETTO_KEY, url);
    }
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|w| w.local_storage().ok().flatten())
}

/// `a=1&b=x%2Cy` as decoded pairs (`+` is a space; a key alone has an empty value).
fn pairs(s: &str) -> impl Iterator<Item = (String, String)> + '_ {
    s.split('&').filter(|p| !p.is_empty()).map(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (decode(k), decode(v))
    })
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Starts a worker with the boot script's factory (`www/boot.js`, or the single-file build's),
/// which hands it the compiled wasm. Both builds define it before the app starts.
pub fn new_worker() -> Result<Worker, JsValue> {
    let f = js_sys::Reflect::get(&js_sys::global(), &"rankscopeWorker".into())?;
    match f.dyn_ref::<js_sys::Function>() {
        Some(f) => f.call0(&JsValue::NULL)?.dyn_into::<Worker>(),
        None => Err(JsValue::from_str(
            "rankscope's boot script did not run (no globalThis.rankscopeWorker): no worker can start",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_exact_and_never_wildcards() {
        assert_eq!(
            origin_of("https://Dash.Example.com/jobs/1?x#y").as_deref(),
            Some("https://dash.example.com")
        );
        assert_eq!(origin_of("http://127.0.0.1:8080").as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(origin_of("https://a.b:443/").as_deref(), Some("https://a.b"));
        for bad in ["*", "null", "file:///x", "https://", "javascript:alert(1)", "https://*.x.com", "ftp://a"]
        {
            assert_eq!(origin_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_url_says_embed_and_whom_to_trust() {
        let p = Page::parse(
            "http://127.0.0.1:8080",
            "?embed=1&origin=http%3A%2F%2F127.0.0.1%3A9000,*&origin=https://dash.x/",
            "#view=timeline",
        );
        assert!(p.embed);
        assert_eq!(p.trusted, ["http://127.0.0.1:8080", "http://127.0.0.1:9000", "https://dash.x"]);
        assert!(p.trusts("http://127.0.0.1:9000") && !p.trusts("http://127.0.0.1:9001") && !p.trusts("*"));
        let q = Page::parse("null", "", "#embed&view=steps");
        assert!(q.embed && q.trusted.is_empty(), "file:// trusts nobody by default: {q:?}");
        assert!(!Page::parse("http://a", "?embed=0", "").embed);
        assert_eq!(q.workers, None, "one worker per core unless the URL says");
        assert_eq!(
            Page::parse("http://a", "?perfetto=http://127.0.0.1:10000/", "").perfetto.as_deref(),
            Some("http://127.0.0.1:10000/")
        );
        assert_eq!(Page::parse("http://a", "?perfetto=javascript:x", "").perfetto, None);
    }

    #[test]
    fn the_url_may_cap_the_workers() {
        let w = |s: &str| Page::parse("http://a", s, "").workers;
        assert_eq!(w("?workers=1"), Some(1));
        assert_eq!(w("?embed=1&workers=%203"), Some(3));
        assert_eq!(w("?workers=500"), Some(MAX_WORKERS));
        for bad in ["?workers=0", "?workers=-2", "?workers=two", "?workers="] {
            assert_eq!(w(bad), None, "{bad}: one per core, as without it");
        }
    }
}
