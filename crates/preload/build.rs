//! Keeps the hooks' usual paths together: functions placed in `.text.hot.*` go to one output
//! section (`.text.hot`) instead of being spread over `.text` in the order of the codegen units,
//! so that an uncontended lock+unlock pair runs code from one page, a few cache lines, where a
//! program like memcached evicts the collector's code between two lock calls.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,keep-text-section-prefix");
}
