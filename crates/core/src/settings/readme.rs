//! The README's settings section, generated from the table (a test of the CLI checks it).

use super::{Cli, SETTINGS};

/// The settings as the README's Markdown table (`run` option, variable, meaning, default).
pub fn markdown_table() -> String {
    let mut s =
        String::from("| `run` option | variable | meaning | default |\n|---|---|---|---|\n");
    for st in SETTINGS {
        let opt = match st.cli {
            Cli::Flag(f) | Cli::Own(f) => format!("`{f} {}`", st.value_name),
            Cli::None => String::new(),
        };
        s.push_str(&format!("| {opt} | `{}` | {} | {} |\n", st.env, st.help, st.default));
    }
    s
}
