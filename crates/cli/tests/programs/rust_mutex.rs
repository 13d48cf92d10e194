// Rust std locks (futex-based, no pthread call): a hot `static Mutex` and a `static RwLock`
// that several threads fight over. Prints how often each was taken, the upper bound of its
// contended acquisitions. Usage: rust_mutex THREADS ITERATIONS
use std::sync::{Mutex, RwLock};

static HOT: Mutex<u64> = Mutex::new(0);
static TABLE: RwLock<u64> = RwLock::new(0);

fn spin(n: u32) {
    for i in 0..n {
        std::hint::black_box(i);
    }
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let threads = args.first().copied().unwrap_or(4);
    let iters = args.get(1).copied().unwrap_or(20_000);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..iters {
                    {
                        let mut g = HOT.lock().unwrap();
                        *g += 1;
                        spin(300);
                    }
                    if (i + t) % 4 == 0 {
                        let mut w = TABLE.write().unwrap();
                        *w += 1;
                        spin(300);
                    } else {
                        let r = TABLE.read().unwrap();
                        std::hint::black_box(*r);
                        spin(100);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    println!("HOT {} TABLE {}", *HOT.lock().unwrap(), threads * iters);
}
