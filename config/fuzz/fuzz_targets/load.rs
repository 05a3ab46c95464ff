//! Arbitrary bytes as a rule file: loading must report diagnostics, never panic, overflow the stack or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(diagnostics) = ruleplane_config::load_str("fuzz.yaml", &text) {
        // Formatting diagnostics slices source lines at columns: exercise it too.
        let _ = diagnostics.to_string();
    }
});
