//! The CLI surface: argument parsing, bad input, and tiny runs of every scenario in every
//! format (correctness only: no timing is checked).

use clap::{CommandFactory, Parser};
use lockmeter_bench::{BenchArgs, Scenario, run, smoke_args};

#[derive(Parser, Debug)]
#[command(name = "bench")]
struct Cli {
    #[command(flatten)]
    args: BenchArgs,
}

fn parse(a: &[&str]) -> BenchArgs {
    Cli::try_parse_from(std::iter::once("bench").chain(a.iter().copied())).expect("parses").args
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("lockmeter-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn command_is_well_formed() {
    Cli::command().debug_assert();
}

#[test]
fn parsing() {
    assert!(parse(&[]).scenario.is_none());
    assert!(smoke_args().common.quick);
    let a =
        parse(&["--format", "json", "contention", "--threads", "2,8", "--locks", "adaptive,std"]);
    match a.scenario {
        Some(Scenario::Contention(c)) => assert_eq!(c.threads, vec![2, 8]),
        other => panic!("{other:?}"),
    }
    assert_eq!(a.common.locks.as_deref(), Some(&["adaptive".to_string(), "std".to_string()][..]));
    assert!(Cli::try_parse_from(["bench", "contention", "--threads", "x"]).is_err());
    assert!(Cli::try_parse_from(["bench", "--format", "xml"]).is_err());
}

#[test]
fn bad_input_says_what_to_do() {
    let e = run(parse(&["uncontended", "--locks", "tas,nope"])).unwrap_err().to_string();
    assert!(e.contains("unknown lock \"nope\"") && e.contains("choose from"), "{e}");
    let e = run(parse(&["uncontended", "--locks", "futex:pause"])).unwrap_err().to_string();
    assert!(e.contains("unknown lock"), "{e}");
    let e = run(parse(&["contention", "--threads", "0"])).unwrap_err().to_string();
    assert!(e.contains("--threads"), "{e}");
    let e = run(parse(&["--runs", "0"])).unwrap_err().to_string();
    assert!(e.contains("--runs"), "{e}");
    let e = run(parse(&["--plot", "x.png"])).unwrap_err().to_string();
    assert!(e.contains(".svg"), "{e}");
    let e = run(parse(&["interference", "--policies", "spin"])).unwrap_err().to_string();
    assert!(e.contains("unknown spin policy"), "{e}");
}

#[test]
fn contention_json_and_plot() {
    let out = tmp("c.json");
    let svg = tmp("c.svg");
    run(parse(&[
        "contention",
        "--threads",
        "1,3",
        "--iters",
        "300",
        "--locks",
        "tas,mcs:park,adaptive,qrwlock,pthread-adaptive",
        "--format",
        "json",
        "-o",
        out.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
        "--runs",
        "2",
    ]))
    .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(v["machine"]["cpus"].as_u64().unwrap() >= 1);
    let s = &v["sections"][0];
    assert_eq!(s["scenario"], "contention");
    let rows = s["rows"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 10); // 5 locks x 2 thread counts; the std baseline is not listed
    assert!(rows.iter().all(|r| r["vs_baseline"].as_f64().is_some()));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("<text") && svg.contains("adaptive"));
}

#[test]
fn every_scenario_runs_in_csv_and_text() {
    let out = tmp("all.csv");
    run(parse(&[
        "uncontended",
        "-n",
        "2000",
        "--locks",
        "adaptive,clh",
        "--format",
        "csv",
        "-o",
        out.to_str().unwrap(),
    ]))
    .unwrap();
    let csv = std::fs::read_to_string(&out).unwrap();
    assert!(csv.contains("# scenario=uncontended") && csv.contains("\nadaptive,"), "{csv}");
    let out = tmp("lat.txt");
    run(parse(&[
        "latency",
        "-n",
        "300",
        "--load",
        "0,1",
        "--locks",
        "ticket,futex",
        "-o",
        out.to_str().unwrap(),
        "--runs",
        "1",
    ]))
    .unwrap();
    let t = std::fs::read_to_string(&out).unwrap();
    assert!(t.contains("== latency") && t.contains("CDF") && t.contains("ticket@1"), "{t}");
    let out = tmp("steal.csv");
    run(parse(&[
        "steal",
        "-t",
        "2,3",
        "-n",
        "500",
        "--format",
        "csv",
        "-o",
        out.to_str().unwrap(),
        "--runs",
        "1",
    ]))
    .unwrap();
    assert!(std::fs::read_to_string(&out).unwrap().contains("lsteal_cnts"));
    let out = tmp("int.json");
    run(parse(&[
        "interference",
        "--scale",
        "0.01",
        "--spinners",
        "1",
        "--policies",
        "pause,park",
        "--workloads",
        "qsort,hash",
        "--format",
        "json",
        "-o",
        out.to_str().unwrap(),
        "--runs",
        "1",
    ]))
    .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["sections"][0]["rows"].as_array().unwrap().len(), 4);
}
