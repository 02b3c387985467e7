//! Flight Recorder: the dumps loaded with (or without) the traces and what the mismatch engine
//! says of them, as `rankscope analyze` / `rankscope fr` do: the diagnoses, then per process
//! group where each rank got to.

use yew::prelude::*;

use crate::state::FlightRecorder as Fr;

#[derive(Properties, PartialEq, Debug)]
pub struct Props {
    pub fr: std::rc::Rc<Fr>,
}

fn record(r: &Option<rankscope_core::sequence::RecordRef>) -> String {
    r.as_ref().map_or("–".to_string(), |x| {
        format!(
            "{} #{}{}",
            x.kind.name(),
            x.position,
            x.label.as_ref().map(|l| format!(" in {l}")).unwrap_or_default()
        )
    })
}

#[function_component(FlightRecorder)]
pub fn flight_recorder(p: &Props) -> Html {
    let rep = &p.fr.report;
    html! {
        <section class="flight-recorder" data-testid="flight-recorder">
            <h2>{"Flight Recorder"}</h2>
            <p class="muted">{format!("{} dump(s): {}", p.fr.dumps.len(),
                p.fr.dumps.iter().map(|d| format!("rank {} ({})", d.rank, crate::format::inert(&d.dump.file))).collect::<Vec<_>>().join(", "))}</p>
            if rep.diagnoses.is_empty() {
                <p class="ok" data-testid="fr-agree">{"The dumps' collective sequences agree across ranks."}</p>
            }
            <ul class="fr-diagnoses">
            { for rep.diagnoses.iter().map(|d| html! {
                <li data-testid="fr-diagnosis" data-kind={format!("{:?}", d.kind).to_lowercase()}
                    data-ranks={d.ranks.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(",")}>{d.sentence.clone()}</li>
            }) }
            </ul>
            // What reading each dump said (a claim out of range, numbers read as null), with
            // its file: the dump is kept, its claim is not.
            { for p.fr.dumps.iter().flat_map(|d| d.dump.diagnostics.iter().map(move |x| (&d.dump.file, x))).map(|(file, x)| html! {
                <p class="warn" data-testid="fr-dump-diagnostic" data-kind={x.kind.name()}>{format!("{}: {}{}",
                    crate::format::inert(file), crate::format::inert(&x.message),
                    x.first_offset.map(|o| format!(" (byte {o})")).unwrap_or_default())}</p>
            }) }
            { for rep.groups.iter().map(|g| html! {
                <table class="stopped" data-testid="fr-group" data-pg={g.pg.clone()}>
                    <caption class="muted">{format!("group {}{}: {} position(s), {} diverging", g.pg,
                        if g.pg_desc.is_empty() || g.pg_desc == "undefined" { String::new() } else { format!(" ({})", g.pg_desc) },
                        g.positions, g.diverging_positions)}</caption>
                    <thead><tr><th class="num">{"Rank"}</th><th class="num">{"Records"}</th><th>{"Last entered"}</th><th>{"Last completed"}</th></tr></thead>
                    <tbody>
                    { for g.ranks.iter().map(|r| html! {
                        <tr data-testid="fr-rank" data-rank={r.rank.to_string()}>
                            <td class="num">{r.rank}</td><td class="num">{r.records}</td>
                            <td>{record(&r.last_entered)}</td><td>{record(&r.last_completed)}</td>
                        </tr>
                    }) }
                    </tbody>
                </table>
            }) }
            { for rep.notes.iter().map(|n| html! { <p class="muted">{format!("Note: {n}")}</p> }) }
            { for p.fr.problems().into_iter().map(|(f, why)| html! { <p class="warn">{format!("{f}: {why}")}</p> }) }
        </section>
    }
}
