//! The worker binary (see `rankscope_app::worker`). trunk builds it with a loader shim; the
//! pool starts it from `./worker_loader.js`, handed the wasm compiled once (`www/boot.js`).

fn main() {
    rankscope_app::worker::start();
}
