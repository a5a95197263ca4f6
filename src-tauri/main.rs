// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    headroom_base::allocator::use_one_malloc_arena();
    headroom_desktop::run();
}
