//! The fuzz entry point (`lockmeter_format::fuzzing::check`, also used by `fuzz/`) on a few
//! thousand deterministic pseudo-random mutations of real profiles: runs on stable, in plain
//! `cargo test`.

mod common;

use common::{Rng, encoded};
use lockmeter_format::fuzzing::{check, frames};
use lockmeter_format::*;

fn seeds() -> Vec<Vec<u8>> {
    let mut small = Encoder::begin(Vec::new()).unwrap();
    small
        .header(&HeaderRef { collector: "x", cmdline: b"a\0b\0", ..HeaderRef::default() })
        .unwrap();
    small.lock(1, 2, 3, LockKind::SpinLock, None).unwrap();
    let mut s = Stats::default();
    s.wait_hist[1] = 1;
    s.hold_hist[2] = 2;
    small.stats(1, 1, 0, Mode::Read, &s).unwrap();
    small.dropped(&Dropped::default()).unwrap();
    let small = small.finish().unwrap();
    // A run file of two processes: mutations reach the second profile and the joint.
    let run = [encoded(), small.clone()].concat();
    vec![encoded(), small, to_bytes(&Profile::default()).unwrap(), run]
}

fn mutate(r: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut b = input.to_vec();
    for _ in 0..1 + r.below(4) {
        let n = b.len();
        match r.below(9) {
            0 if n > 0 => b[r.below(n)] ^= 1 << r.below(8),
            1 if n > 0 => b[r.below(n)] = r.next() as u8,
            2 => b.truncate(r.below(n + 1)),
            3 if n > 0 => {
                // Overwrite an aligned u32 with an interesting value (lengths, codes).
                let at = r.below(n / 4 + 1) * 4;
                let v: u32 = [0, 1, 0xff, 0xffff, u32::MAX, 16 << 20, r.next() as u32][r.below(7)];
                for (i, x) in v.to_le_bytes().iter().enumerate() {
                    if let Some(c) = b.get_mut(at + i) {
                        *c = *x;
                    }
                }
            }
            4 => {
                let at = r.below(n + 1);
                let len = r.below(16);
                let ins: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
                b.splice(at..at, ins);
            }
            5 if n > 0 => {
                let at = r.below(n);
                let end = (at + 1 + r.below(32)).min(n);
                b.drain(at..end);
            }
            6 if n > 0 => {
                // Duplicate a span (repeats records).
                let at = r.below(n);
                let end = (at + 1 + r.below(200)).min(n);
                let span = b[at..end].to_vec();
                let to = r.below(n + 1);
                b.splice(to..to, span);
            }
            7 => b = (0..r.below(64)).map(|_| r.next() as u8).collect(),
            _ if n > 0 => {
                let at = r.below(n);
                b[at] = [0, 1, 2, 3, 4, 5, 0x7f, 0x80, 0xff][r.below(9)];
            }
            _ => {}
        }
    }
    b
}

#[test]
fn reader_survives_pseudo_random_mutations() {
    let seeds = seeds();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut ok, mut total) = (0, 0);
    for i in 0..4000 {
        let seed = &seeds[i % seeds.len()];
        // Half as whole files, half as frame bodies (check() seals them, so they pass the
        // checksum and reach the record decoders).
        let input = if i % 2 == 0 { seed.as_slice() } else { frames(seed) };
        let m = mutate(&mut r, input);
        check(&m);
        total += 1;
        if read_profile(&lockmeter_format::fuzzing::seal(&m)).is_ok() {
            ok += 1;
        }
    }
    // The mutations must reach past the checksum into the decoders often enough to matter.
    assert!(ok > total / 10, "only {ok} of {total} sealed mutations decoded");
}

#[test]
fn a_run_seed_reads_as_two_processes_and_not_as_one_profile() {
    let run = seeds().pop().unwrap();
    assert_eq!(read_run(&run).unwrap().processes.len(), 2);
    assert!(read_profile(&run).unwrap_err().to_string().contains("two profiles concatenated"));
}

#[test]
fn seeds_pass_the_oracle() {
    for s in seeds() {
        check(&s);
        assert!(read_run(&s).is_ok());
    }
}

/// Writes the seeds (whole files and frame bodies) into `$LOCKMETER_FUZZ_SEEDS` when it is set,
/// to start a cargo-fuzz corpus (see fuzz/README.md). Does nothing otherwise.
#[test]
fn write_fuzz_seeds_on_request() {
    let Some(dir) = std::env::var_os("LOCKMETER_FUZZ_SEEDS") else { return };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, s) in seeds().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-file-{i}")), s).unwrap();
        std::fs::write(dir.join(format!("seed-frames-{i}")), frames(s)).unwrap();
    }
}
