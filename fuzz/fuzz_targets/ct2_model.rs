//! The CTranslate2 `model.bin` reader (`Ct2Model::parse`), which sizes tensors from the
//! file's own header.

#![no_main]

#[path = "alloc_guard.rs"]
mod alloc_guard;

use headroom_speech::asr::whisper::Ct2Model;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match Ct2Model::parse(data, "fuzz/model.bin") {
        Ok(model) => {
            for (name, dims) in model.shapes() {
                assert_eq!(model.tensor(name).unwrap().dims(), dims);
            }
        }
        Err(e) => assert!(e.to_string().contains("fuzz/model.bin"), "{e}"),
    }
});
