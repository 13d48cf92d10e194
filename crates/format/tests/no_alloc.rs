//! The encoder allocates nothing: a counting global allocator, armed on this thread only,
//! sees zero allocations while a whole profile is streamed into fixed buffers.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use lockmeter_format::*;

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn encoder_does_not_allocate() {
    let mut out = vec![0u8; 1 << 20];
    let mut stats = Stats { acquisitions: 3, ..Stats::default() };
    for (i, b) in stats.wait_hist.iter_mut().enumerate() {
        *b = i as u64;
    }
    stats.hold_hist = stats.wait_hist;
    let record = Record { thread: 1, lock: 2, site: 3, mode: Mode::Write, stats: stats.clone() };
    let long = [b'p'; 9000];

    ARMED.with(|a| a.set(true));
    let r = (|| -> Result<usize, EncodeError> {
        let sink = BufSink::<_, 512>::new(SliceSink::new(&mut out));
        let mut e = Encoder::begin(sink)?;
        e.header(&HeaderRef {
            collector: "preload",
            lockmeter_version: "0.1.0",
            cmdline: b"./a\0-x\0",
            exe: &long,
            end_reason: EndReason::Signal(15),
            hold_timing: HoldTiming::Sampled(8),
            ..HeaderRef::default()
        })?;
        let m =
            MapRef::parse_line(b"1000-2000 r-xp 00000000 08:01 1 /lib/x.so\n").unwrap_or_default();
        e.map(&m)?;
        e.map_line(0, 1, 2, b"rw-p", b"[heap]")?;
        e.thread(1, 100, b"main")?;
        e.lock(2, 0xdead, 1, LockKind::RwLock, Some(b"cache"))?;
        e.lock(3, 0xbeef, 0, LockKind::Mutex, None)?;
        for _ in 0..100 {
            e.record(&record)?;
            e.stats(1, 3, 4, Mode::Exclusive, &stats)?;
        }
        e.cpu(&CpuStats { cpu: 0, acquisitions: 1, contended: 1, wait_ns: 1 })?;
        e.dropped(&Dropped::default())?;
        e.overhead(&Overhead::default())?;
        let sink = e.finish()?;
        Ok(sink.into_inner()?.len())
    })();
    ARMED.with(|a| a.set(false));

    assert_eq!(ALLOCS.load(Ordering::Relaxed), 0, "the encoder allocated");
    let len = r.unwrap();
    let p = read_profile(&out[..len]).unwrap();
    assert_eq!(p.records.len(), 200);
    assert_eq!(p.records[0], record);
    assert_eq!(p.header.exe.len(), 9000);
}

/// The encoder fits a small stack (signal handlers may run on a small alternate stack). The
/// thread's stack also holds the test harness's frames, so this is an upper bound.
#[test]
fn encoder_fits_a_small_stack() {
    let t = std::thread::Builder::new()
        .stack_size(16 * 1024) // PTHREAD_STACK_MIN on x86_64
        .spawn(|| {
            // Output and input on the heap: only the encoder's frames use the stack.
            let mut out = vec![0u8; 8192];
            let mut s = Box::new(Stats::default());
            s.wait_hist = [1; 65];
            s.hold_hist = [2; 65];
            let mut e = Encoder::begin(SliceSink::new(&mut out)).unwrap();
            e.header(&HeaderRef { cmdline: &[b'a'; 3000], ..HeaderRef::default() }).unwrap();
            e.stats(1, 2, 3, Mode::Read, &s).unwrap();
            e.lock(1, 2, 3, LockKind::Mutex, Some(b"x")).unwrap();
            e.finish().unwrap().len()
        })
        .unwrap();
    assert!(t.join().unwrap() > 4000);
}
