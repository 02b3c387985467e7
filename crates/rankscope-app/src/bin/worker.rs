//! The worker binary (see `rankscope_app::worker`). trunk builds it with a loader shim;
//! the pool starts it as `new Worker("./worker_loader.js")`.

fn main() {
    rankscope_app::worker::start();
}
