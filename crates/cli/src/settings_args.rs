//! The collector's options of `lockmeter run`, derived from `lockmeter_core::settings`.
//!
//! Each setting with a `Cli::Flag` becomes a flag here, validated by the setting itself, and what
//! the user gave is forwarded to the collector as the setting's environment variable. Nothing is
//! parsed here that the collector does not receive.

use clap::{Arg, ArgMatches, Command};
use lockmeter_core::settings::{Cli, SETTINGS, Setting};

/// The collector settings given on the command line, in table order.
#[derive(Debug, Clone, Default)]
pub(crate) struct CollectorArgs {
    given: Vec<(&'static Setting, String)>,
}

impl CollectorArgs {
    /// Settings as if given on the command line (for `demo` and `overhead`).
    pub(crate) fn with(given: &[(&'static Setting, &str)]) -> Self {
        CollectorArgs { given: given.iter().map(|&(s, v)| (s, v.to_string())).collect() }
    }

    /// The value given for `s`, if any.
    pub(crate) fn get(&self, s: &Setting) -> Option<&str> {
        self.given.iter().find(|(g, _)| g.env == s.env).map(|(_, v)| v.as_str())
    }

    /// Sets each given setting's environment variable on `cmd`.
    pub(crate) fn apply(&self, cmd: &mut std::process::Command) {
        for (s, v) in &self.given {
            cmd.env(s.env, v);
        }
    }
}

/// The clap id (and long name) of a flag.
fn id(flag: &'static str) -> &'static str {
    flag.trim_start_matches('-')
}

impl clap::FromArgMatches for CollectorArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let given = SETTINGS
            .iter()
            .filter_map(|s| match s.cli {
                Cli::Flag(f) => m.get_one::<String>(id(f)).map(|v| (s, v.clone())),
                _ => None,
            })
            .collect();
        Ok(CollectorArgs { given })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for CollectorArgs {
    fn augment_args(cmd: Command) -> Command {
        SETTINGS.iter().fold(cmd, |cmd, s: &'static Setting| match s.cli {
            Cli::Flag(f) => cmd.arg(
                Arg::new(id(f))
                    .long(id(f))
                    .value_name(s.value_name)
                    .help(format!("{} [default: {}] [env: {}]", s.help, s.default, s.env))
                    .value_parser(move |v: &str| s.validate(v).map(|()| v.to_string())),
            ),
            Cli::Own(_) | Cli::None => cmd,
        })
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{FromArgMatches, Parser};
    use lockmeter_core::settings::{self, Value};

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        c: CollectorArgs,
    }

    #[test]
    fn every_flag_setting_is_a_flag_and_forwarded() {
        let mut argv = vec!["t".to_string()];
        for s in SETTINGS {
            if let Cli::Flag(f) = s.cli {
                let v = match s.value {
                    Value::Count { min, .. } => min.to_string(),
                    Value::Size { min, .. } => lockmeter_core::settings::show_size(min),
                    Value::Hold => "off".into(),
                    Value::Clock => "monotonic".into(),
                    Value::Text => "x".into(),
                    Value::Switch => "1".into(),
                    Value::Duration => "2s".into(),
                    Value::Choice(names) => names[names.len() - 1].into(),
                };
                argv.push(f.to_string());
                argv.push(v);
            }
        }
        let t = T::try_parse_from(&argv).unwrap();
        let mut cmd = std::process::Command::new("true");
        t.c.apply(&mut cmd);
        let envs: Vec<_> = cmd.get_envs().map(|(k, _)| k.to_string_lossy().into_owned()).collect();
        for s in SETTINGS.iter().filter(|s| matches!(s.cli, Cli::Flag(_))) {
            assert!(envs.iter().any(|e| e == s.env), "{} not forwarded", s.env);
        }
        assert_eq!(t.c.get(&settings::HOLD), Some("off"));
    }

    #[test]
    fn out_of_range_is_refused_with_the_range() {
        let e = T::try_parse_from(["t", "--frames", "99"]).unwrap_err().to_string();
        assert!(e.contains("from 0 to 64"), "{e}");
        let e = T::try_parse_from(["t", "--hold", "maybe"]).unwrap_err().to_string();
        assert!(e.contains("on, off or sample:N"), "{e}");
    }

    #[test]
    fn nothing_given_forwards_nothing() {
        let m = <T as clap::CommandFactory>::command().get_matches_from(["t"]);
        let c = CollectorArgs::from_arg_matches(&m).unwrap();
        assert!(c.given.is_empty());
    }
}

/// The README's settings section is the settings table. `LOCKMETER_UPDATE_README=1 cargo test`
/// rewrites it after a change to `lockmeter_core::settings`.
#[cfg(test)]
mod readme {
    #[test]
    fn readme_settings_section_matches_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).unwrap();
        let begin = readme.find("<!-- settings:begin").expect("README lacks <!-- settings:begin");
        let begin = begin + readme[begin..].find('\n').unwrap() + 1;
        let end = readme.find("<!-- settings:end -->").expect("README lacks <!-- settings:end -->");
        let want = lockmeter_core::settings::markdown_table();
        if readme[begin..end] != want && std::env::var_os("LOCKMETER_UPDATE_README").is_some() {
            let new = format!("{}{want}{}", &readme[..begin], &readme[end..]);
            std::fs::write(path, new).unwrap();
            return;
        }
        assert_eq!(
            readme[begin..end],
            want,
            "README's settings section is out of date: run LOCKMETER_UPDATE_README=1 cargo test -p lockmeter readme"
        );
    }
}
