//! The chrome-less layout of an embedded rankscope (`?embed=1` or `#embed`): a slim bar of view
//! tabs instead of the top bar, and, until the host page sends traces, a waiting note instead of
//! the landing page (see `embed` and docs/embedding.md).

use std::collections::BTreeMap;

use yew::prelude::*;

use super::Ctx;
use crate::state::{Action, View};

#[derive(Properties, PartialEq, Debug)]
pub struct BarProps {
    pub view: View,
    pub ready: bool,
    pub status: String,
    pub title: Option<String>,
    /// The analysis has a layout (the Layout tab shows).
    #[prop_or_default]
    pub layout: bool,
}

#[function_component(EmbedBar)]
pub fn embed_bar(p: &BarProps) -> Html {
    let ctx = use_context::<Ctx>();
    let emit = |a: Action| {
        let ctx = ctx.clone();
        Callback::from(move |_| {
            if let Some(c) = &ctx {
                c.dispatch.emit(a.clone());
            }
        })
    };
    html! {
        <header class="embedbar" data-testid="embed-bar">
            if let Some(t) = &p.title { <span class="title" data-testid="embed-title">{t.clone()}</span> }
            <nav>
                { for super::tabs(p.layout).map(|v| html! {
                    <button class={classes!("tab", (v == p.view).then_some("active"))}
                        data-testid={format!("nav-{}", v.name())} disabled={!p.ready}
                        onclick={emit(Action::SetView(v))}>{v.title()}</button>
                }) }
            </nav>
            <span class="status" data-testid={if p.ready { "analysis-ready" } else { "analysis-pending" }}>{p.status.clone()}</span>
        </header>
    }
}

#[derive(Properties, PartialEq, Debug)]
pub struct WaitProps {
    pub untrusted: BTreeMap<String, u32>,
}

#[function_component(Waiting)]
pub fn waiting(p: &WaitProps) -> Html {
    let ignored: u32 = p.untrusted.values().sum();
    html! {
        <main class="waiting" data-testid="embed-waiting">
            <p><strong>{"rankscope"}</strong>{" is waiting for the page around it to send traces."}</p>
            <p class="muted">{"Nothing is uploaded: the traces the page hands over are read in this frame."}</p>
            if ignored > 0 {
                <p class="warn" data-testid="untrusted-count" data-count={ignored.to_string()}>
                    {format!("Ignored {ignored} message{} from untrusted origin{}: {}",
                        if ignored == 1 { "" } else { "s" },
                        if p.untrusted.len() == 1 { "" } else { "s" },
                        p.untrusted.keys().cloned().collect::<Vec<_>>().join(", "))}
                </p>
            }
        </main>
    }
}
