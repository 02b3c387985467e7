//! The keyboard help overlay (`?`).

use yew::prelude::*;

use super::Ctx;
use crate::state::Action;

const KEYS: &[(&str, &str)] = &[
    ("?", "show or hide this help"),
    ("1 … 9", "the views, in the order of the bar"),
    ("W / S", "zoom in / out (timeline, at the pointer)"),
    ("A / D", "pan left / right"),
    ("Ctrl + wheel", "zoom at the pointer"),
    ("Shift + wheel", "pan"),
    ("wheel", "scroll ranks and lanes"),
    ("drag", "pan in time and scroll"),
    ("0", "show the whole job"),
    ("click a rank's header", "fold or unfold its lanes; its \"pin\" keeps the rank on top while the others scroll"),
    ("P", "pin or unpin the selected event's rank (timeline; pins stay in the URL)"),
    ("[ / ]", "the previous / next member of the selected collective on the other ranks (timeline)"),
    ("Shift+drag", "select a time range: totals of its events by name and class (timeline)"),
    ("hover / click", "details of an event; a click opens its args panel (step-relative time, every source arg, links to its step and launch / kernel, a collective's members on every rank; Esc closes)"),
    ("Lead path", "draw the lead finding's critical path on the timeline: each hop over its rank, an arrow where it moves"),
    ("Esc", "close this help, clear the selection"),
];

#[function_component(Help)]
pub fn help() -> Html {
    let ctx = use_context::<Ctx>();
    let close = Callback::from(move |_| {
        if let Some(c) = &ctx {
            c.dispatch.emit(Action::CloseHelp);
        }
    });
    html! {
        <div class="overlay" data-testid="help" onclick={close.clone()}>
            <div class="help" role="dialog" aria-label="Keyboard shortcuts">
                <h2>{"Keyboard"}</h2>
                <table>
                    { for KEYS.iter().map(|(k, what)| html! { <tr><td><kbd>{*k}</kbd></td><td>{*what}</td></tr> }) }
                </table>
                <p class="muted">{"Everything runs in this tab: your files are never uploaded."}</p>
                <button onclick={close}>{"Close"}</button>
            </div>
        </div>
    }
}
