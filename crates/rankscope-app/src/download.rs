//! Saving files built in the browser: a `Blob` (from parts: strings or byte arrays, never one
//! giant JS string) handed to the browser's download through an object URL. Nothing is uploaded.

use js_sys::Array;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Blob, BlobPropertyBag, HtmlAnchorElement, Url};

/// Saves the concatenation of `parts` (strings, `Uint8Array`s or `Blob`s) as `name`.
pub fn save_parts(parts: &Array, mime: &str, name: &str) -> Result<(), JsValue> {
    let opts = BlobPropertyBag::new();
    opts.set_type(mime);
    let blob = Blob::new_with_u8_array_sequence_and_options(parts, &opts)?;
    save_blob(&blob, name)
}

pub fn save_text(text: &str, mime: &str, name: &str) -> Result<(), JsValue> {
    save_parts(&Array::of1(&JsValue::from_str(text)), mime, name)
}

pub fn save_blob(blob: &Blob, name: &str) -> Result<(), JsValue> {
    let window = web_sys::window().ok_or("no window")?;
    let doc = window.document().ok_or("no document")?;
    let body = doc.body().ok_or("no body")?;
    let url = Url::create_object_url_with_blob(blob)?;
    let a: HtmlAnchorElement = doc.create_element("a")?.dyn_into()?;
    a.set_href(&url);
    a.set_download(name);
    body.append_child(&a)?;
    a.click();
    a.remove();
    // The download has its own reference to the blob by now; the URL can go a little later.
    let revoke = Closure::once_into_js(move || {
        let _ = Url::revoke_object_url(&url);
    });
    let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(revoke.unchecked_ref(), 60_000);
    Ok(())
}
