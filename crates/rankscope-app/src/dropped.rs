//! Files dropped on the page, folders included: a dropped folder is walked (File and Directory
//! Entries API) and its trace files kept, as when a folder is chosen.

use js_sys::{Array, Promise};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{DataTransfer, File, FileSystemDirectoryEntry, FileSystemEntry, FileSystemFileEntry};

use crate::views::landing::is_trace_name;

/// The entries of a drop. Must be called while the drop event is being dispatched: the browser
/// empties the items afterwards.
pub fn entries(dt: &DataTransfer) -> Vec<FileSystemEntry> {
    let items = dt.items();
    (0..items.length())
        .filter_map(|i| items.get(i))
        .filter_map(|it| it.webkit_get_as_entry().ok().flatten())
        .collect()
}

/// Every file of the dropped entries: files dropped themselves are all kept, files found inside
/// dropped folders only when their names say they are traces. Unreadable entries are skipped.
pub async fn files(entries: Vec<FileSystemEntry>) -> Vec<File> {
    let mut out = Vec::new();
    let mut stack: Vec<(FileSystemEntry, bool)> = entries.into_iter().rev().map(|e| (e, true)).collect();
    while let Some((entry, dropped_itself)) = stack.pop() {
        if entry.is_file() {
            if !dropped_itself && !is_trace_name(&entry.name()) {
                continue;
            }
            let fe: FileSystemFileEntry = entry.unchecked_into();
            let p =
                Promise::new(&mut |resolve, reject| fe.file_with_callback_and_callback(&resolve, &reject));
            if let Ok(f) = JsFuture::from(p).await.and_then(|v| v.dyn_into::<File>()) {
                out.push(f);
            }
        } else if entry.is_directory() {
            let reader = entry.unchecked_into::<FileSystemDirectoryEntry>().create_reader();
            let mut found = Vec::new();
            // readEntries returns the directory in batches until an empty one.
            loop {
                let p = Promise::new(&mut |resolve, reject| {
                    let _ = reader.read_entries_with_callback_and_callback(&resolve, &reject);
                });
                let Ok(batch) = JsFuture::from(p).await else { break };
                let batch: Array = batch.unchecked_into();
                if batch.length() == 0 {
                    break;
                }
                found.extend(batch.iter().map(|e| e.unchecked_into::<FileSystemEntry>()));
            }
            found.sort_by_key(|e| e.name());
            stack.extend(found.into_iter().rev().map(|e| (e, false)));
        }
    }
    out
}
