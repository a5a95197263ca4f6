// Tauri's build step (config, capabilities, embedded assets). The front end must be built first.
fn main() {
    if !std::path::Path::new("ui/dist/index.html").exists() {
        panic!("the front end is not built: run scripts/build-ui (npm ci + npm run build in ui/)");
    }
    println!("cargo:rerun-if-changed=ui/dist");
    tauri_build::build()
}
