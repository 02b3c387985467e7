//! The bar above every view: name, views, status, new job, help.

use yew::prelude::*;

use super::Ctx;
use crate::state::{Action, View};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub view: View,
    pub ready: bool,
    pub demo: bool,
    pub status: String,
    /// The analysis has a layout (the Layout tab shows).
    #[prop_or_default]
    pub layout: bool,
}

#[function_component(TopBar)]
pub fn top_bar(p: &Props) -> Html {
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
        <header class="topbar">
            <span class="brand">{"rankscope"}</span>
            if p.demo { <span class="badge">{"synthetic demo"}</span> }
            <nav>
                { for super::tabs(p.layout).map(|v| html! {
                    <button class={classes!("tab", (v == p.view).then_some("active"))}
                        data-testid={format!("nav-{}", v.name())} disabled={!p.ready}
                        onclick={emit(Action::SetView(v))}>{v.title()}</button>
                }) }
            </nav>
            <span class="status" data-testid={if p.ready { "analysis-ready" } else { "analysis-pending" }}>{p.status.clone()}</span>
            <span class="spacer"></span>
            <button class="small" data-testid="new-job" onclick={emit(Action::Reset)}>{"Open other files"}</button>
            <button class="small" title="Keyboard help (?)" onclick={emit(Action::ToggleHelp)}>{"?"}</button>
        </header>
    }
}
