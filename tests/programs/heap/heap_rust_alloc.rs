// Heap test program (Rust) with a #[global_allocator] of its own, for tests/heap/ownalloc_test.cpp. Built
// three ways: `heap_rust_bump` hands out blocks of a static arena (never calling malloc: only uprobes on its
// __rust_alloc family see them), without optimisation, so that every call goes through __rust_alloc;
// `heap_rust_bump_opt` the same optimised (rustc >= 1.79 inlines the allocator into the crate's own
// functions: those calls cannot be probed); `heap_rust_system` (--cfg system, unoptimised) counts and
// forwards to std::alloc::System, i.e. malloc, which the heap library sees too (each block must count once).
//   heap_rust_bump N   N rounds: a vector grown by push (reallocs), a formatted string, every 10th round a
//                      64-byte box leaked; prints its allocator's truth, every call since the program started:
//                      "allocations A bytes B frees F leaked L blocks, LB bytes" (a realloc is a free and an
//                      allocation of its new size)
use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counts {
    allocations: AtomicUsize,
    bytes: AtomicUsize,
    frees: AtomicUsize,
    live_bytes: AtomicUsize,
}

impl Counts {
    fn alloc(&self, size: usize) {
        self.allocations.fetch_add(1, Relaxed);
        self.bytes.fetch_add(size, Relaxed);
        self.live_bytes.fetch_add(size, Relaxed);
    }
    fn free(&self, size: usize) {
        self.frees.fetch_add(1, Relaxed);
        self.live_bytes.fetch_sub(size, Relaxed);
    }
}

#[cfg(not(system))]
mod backend {
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    const ARENA: usize = 32 << 20;
    pub struct Arena(UnsafeCell<[u8; ARENA]>, AtomicUsize);
    unsafe impl Sync for Arena {}
    pub static ARENA_MEMORY: Arena = Arena(UnsafeCell::new([0; ARENA]), AtomicUsize::new(0));
    pub unsafe fn alloc(size: usize, align: usize) -> *mut u8 {
        let mut at = ARENA_MEMORY.1.load(Relaxed);
        loop {
            let start = (at + align - 1) & !(align - 1);
            if start + size > ARENA {
                return std::ptr::null_mut();
            }
            match ARENA_MEMORY.1.compare_exchange(at, start + size, Relaxed, Relaxed) {
                Ok(_) => return (ARENA_MEMORY.0.get() as *mut u8).add(start),
                Err(now) => at = now,
            }
        }
    }
    pub unsafe fn free(_p: *mut u8) {}
}

#[cfg(system)]
mod backend {
    use std::alloc::{GlobalAlloc, Layout, System};
    pub unsafe fn alloc(size: usize, align: usize) -> *mut u8 {
        System.alloc(Layout::from_size_align_unchecked(size, align))
    }
    pub unsafe fn free(p: *mut u8) {
        System.dealloc(p, Layout::from_size_align_unchecked(1, 1))
    }
}

struct Counted(Counts);

unsafe impl GlobalAlloc for Counted {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = backend::alloc(l.size(), l.align());
        if !p.is_null() {
            self.0.alloc(l.size());
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        self.0.free(l.size());
        backend::free(p)
    }
    // Always moves: a new block, the old bytes copied, the old block freed.
    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        let q = backend::alloc(size, l.align());
        if q.is_null() {
            return q;
        }
        std::ptr::copy_nonoverlapping(p, q, l.size().min(size));
        self.0.alloc(size);
        self.0.free(l.size());
        backend::free(p);
        q
    }
}

#[global_allocator]
static GLOBAL: Counted = Counted(Counts {
    allocations: AtomicUsize::new(0),
    bytes: AtomicUsize::new(0),
    frees: AtomicUsize::new(0),
    live_bytes: AtomicUsize::new(0),
});

static SINK: AtomicUsize = AtomicUsize::new(0);

#[inline(never)]
fn round(i: usize) {
    let mut v: Vec<u32> = Vec::new();
    for k in 0..100 {
        v.push(k);
    }
    let s = format!("round {} of the churn", i);
    SINK.fetch_add(v.len() + s.len() + v.as_ptr() as usize, Relaxed);
    if i % 10 == 0 {
        let b: &'static mut [u8; 64] = Box::leak(Box::new([i as u8; 64]));
        SINK.fetch_add(b.as_ptr() as usize, Relaxed);
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(0);
    for i in 0..n {
        round(i);
    }
    let c = &GLOBAL.0;
    let (a, b, f, lb) =
        (c.allocations.load(Relaxed), c.bytes.load(Relaxed), c.frees.load(Relaxed), c.live_bytes.load(Relaxed));
    println!("allocations {} bytes {} frees {} leaked {} blocks, {} bytes", a, b, f, a - f, lb);
}
