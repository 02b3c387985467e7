//! The UI binary: mounts the Yew app on `<body>`.

fn main() {
    rankscope_app::install_panic_hook();
    yew::Renderer::<rankscope_app::views::app::App>::new().render();
}
