// Lock contention in Rust: 4 threads take one std::sync::Mutex 20 times each (in rust_lock_waiter) and
// hold it 2 ms (in rust_hold_lock). Logs each thread's measured time waiting for the lock as "wait MS" into
// the file FXPROF_TEST_CPU_LOG names (one append per line, like tests/programs/cpu_log.h).
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[inline(never)]
fn rust_hold_lock(counter: &mut u64) {
    let end = Instant::now() + Duration::from_millis(2);
    let mut x = *counter | 1;
    while Instant::now() < end {
        for _ in 0..2000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
    }
    // A volatile store keeps the loop (std::hint::black_box is too new for Debian 12's rustc).
    unsafe { std::ptr::write_volatile(counter, x) };
}

#[inline(never)]
fn rust_lock_waiter(lock: &Mutex<u64>) -> f64 {
    let mut waited = 0.0;
    for _ in 0..20 {
        let t0 = Instant::now();
        let mut guard = lock.lock().unwrap();
        waited += t0.elapsed().as_secs_f64() * 1e3;
        rust_hold_lock(&mut guard);
    }
    waited
}

fn log(label: &str, ms: f64) {
    if let Ok(path) = std::env::var("FXPROF_TEST_CPU_LOG") {
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).create(true).open(path) {
            let _ = f.write_all(format!("{} {:.3}\n", label, ms).as_bytes());
        }
    }
}

fn main() {
    let lock = Arc::new(Mutex::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let lock = Arc::clone(&lock);
            std::thread::Builder::new()
                .name(format!("rust-waiter-{}", i))
                .spawn(move || log("wait", rust_lock_waiter(&lock)))
                .unwrap()
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
