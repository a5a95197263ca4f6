// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

use headroom_desktop::window_rendering;
use std::path::Path;

fn main() {
    headroom_base::allocator::use_one_malloc_arena();
    // The toolkit reads these once, when the first window opens; they are set here, before any
    // thread exists that could read the environment at the same time.
    let window = window_rendering::plan(
        |name| std::env::var_os(name),
        &window_rendering::render_nodes(Path::new("/dev/dri")),
    );
    for (name, value) in &window.variables {
        std::env::set_var(name, value);
    }
    headroom_desktop::run(window);
}
