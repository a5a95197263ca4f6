//! The settings file, `config.toml` (`Config`'s TOML parsing, as `Config::from_file` does it),
//! and the checks and conversions the binaries run on what was read.

#![no_main]

#[path = "alloc_guard.rs"]
mod alloc_guard;

use headroom_core::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(mut config) = toml::from_str::<Config>(text) else {
        return;
    };
    config.apply_env(|_| None);
    let _ = config.check();
    let _ = config.text_lane();
    let _ = config.audio_lane();
    let _ = config.retry();
    let _ = config.llm.api_key();
    // What `Config::save` writes.
    if let Ok(table) = toml::Table::try_from(&config) {
        let _ = table.to_string();
    }
});
