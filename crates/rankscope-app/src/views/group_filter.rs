//! The group / role picker of Ranks × steps, Collectives and the Timeline: every rank, every
//! group of a role, or one group ([`crate::groups::Filter`], shared by the views and kept in the
//! URL hash). Nothing is shown when the analysis has no layout.

use std::rc::Rc;

use yew::prelude::*;

use super::layout::info::role_order;
use super::Ctx;
use crate::format::ranges;
use crate::groups::Filter;
use crate::state::{Action, JobView};

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub job: Rc<JobView>,
    pub filter: Option<Filter>,
    /// What the view shows of the members ("ranks", "collectives").
    pub what: &'static str,
    /// How many of them are shown, of how many (a note beside the picker).
    #[prop_or_default]
    pub shown: Option<(usize, usize)>,
}

#[function_component(GroupFilter)]
pub fn group_filter(p: &Props) -> Html {
    let ctx = use_context::<Ctx>();
    let Some(layout) = &p.job.analysis.layout else { return html! {} };
    let onchange = Callback::from(move |e: Event| {
        let el: web_sys::HtmlSelectElement = e.target_unchecked_into();
        if let Some(c) = &ctx {
            c.dispatch.emit(Action::SetFilter(Filter::from_key(&el.value())));
        }
    });
    let roles = role_order(&p.job);
    let selected = |f: &Filter| p.filter.as_ref() == Some(f);
    html! {
        <span class="group-filter">
            <label class="muted" for="group-filter">{format!("{} of", p.what)}</label>
            <select id="group-filter" data-testid="group-filter" data-value={p.filter.as_ref().map(Filter::key)} {onchange}>
                <option value="" selected={p.filter.is_none()}>{"every rank"}</option>
                <optgroup label="every group of a role">
                    { for roles.iter().map(|&r| {
                        let f = Filter::Role(r);
                        html! { <option value={f.key()} selected={selected(&f)}>{format!("every {r} group")}</option> }
                    }) }
                </optgroup>
                { for roles.iter().map(|&r| html! {
                    <optgroup label={format!("{r} groups")}>
                        { for layout.groups.iter().filter(|g| g.role == r).map(|g| {
                            let f = Filter::Group(g.name.clone());
                            let ranks = ranges(&g.ranks);
                            let ranks = if ranks.len() > 40 { format!("{} ranks", g.ranks.len()) } else { format!("ranks {ranks}") };
                            html! { <option value={f.key()} selected={selected(&f)}>{format!("{r} group {}: {ranks}", g.name)}</option> }
                        }) }
                    </optgroup>
                }) }
            </select>
            if let (Some(f), Some((n, of))) = (&p.filter, p.shown) {
                <span class="muted" data-testid="group-filter-note" data-shown={n.to_string()}>
                    {format!("{}: {n} of {of} {}", f.words(Some(layout)), p.what)}
                </span>
            }
        </span>
    }
}
