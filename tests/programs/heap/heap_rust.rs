// Heap test program (Rust), for tests/heap/source_test.cpp: Rust's default allocator goes through malloc, so
// `fxprof record --heap` sees its allocations unchanged.
//   heap_rust N LEAK   churn::vec_churn makes N vectors of 125 u64 (exactly N x 1000 bytes, each dropped at
//                      once); churn::string_churn formats N strings (dropped); leak_once leaks exactly LEAK
//                      bytes with Box::leak.
use std::ptr;

static mut SINK: usize = 0;

// Makes a block escape, so that LLVM cannot remove an allocation whose memory is never read (black_box is
// stable only since Rust 1.66; Debian 12's rustc is 1.63).
#[inline(always)]
fn keep<T>(p: *const T) {
    unsafe { ptr::write_volatile(ptr::addr_of_mut!(SINK), p as usize) }
}

pub mod churn {
    use super::keep;

    #[inline(never)]
    pub fn vec_churn(n: usize) -> usize {
        let mut total = 0;
        for i in 0..n {
            let mut v: Vec<u64> = Vec::with_capacity(125);
            v.push(i as u64);
            keep(v.as_ptr());
            total += v.len();
        }
        total
    }

    #[inline(never)]
    pub fn string_churn(n: usize) -> usize {
        let mut total = 0;
        for i in 0..n {
            let s = format!("string number {} of {}", i, n);
            keep(s.as_ptr());
            total += s.len();
        }
        total
    }
}

#[inline(never)]
pub fn leak_once(size: usize) -> usize {
    let b: Box<[u8]> = vec![0x5au8; size].into_boxed_slice();
    let leaked: &'static mut [u8] = Box::leak(b);
    keep(leaked.as_ptr());
    leaked.len()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: heap_rust N LEAK");
        std::process::exit(2);
    }
    let n: usize = args[1].parse().unwrap_or(0);
    let leak: usize = args[2].parse().unwrap_or(0);
    let a = churn::vec_churn(n);
    let b = churn::string_churn(n);
    let c = leak_once(leak);
    std::process::exit(if a == n && b > 0 && c == leak { 0 } else { 1 });
}
