//! The UI binary: mounts the Yew app on `<body>`.

fn main() {
    rankscope_app::install_panic_hook();
    rankscope_app::seed_table_keys();
    yew::Renderer::<rankscope_app::views::app::App>::new().render();
}
