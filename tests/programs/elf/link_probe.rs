// The Rust twin of link_probe.cpp (linked with lld): `addr` prints elf_probe_hot's address and waits for
// stdin to close; `spin MS` burns MS ms of CPU time in elf_probe_hot through elf_probe_outer.
use std::io::Read;

static mut SINK: u64 = 0;

fn cpu_ms() -> u64 {
    let mut ts = std::mem::MaybeUninit::<[i64; 2]>::uninit();
    // clock_gettime(CLOCK_THREAD_CPUTIME_ID = 3)
    extern "C" {
        fn clock_gettime(clk: i32, ts: *mut [i64; 2]) -> i32;
    }
    let ts = unsafe {
        clock_gettime(3, ts.as_mut_ptr());
        ts.assume_init()
    };
    (ts[0] as u64) * 1000 + (ts[1] as u64) / 1_000_000
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn elf_probe_hot(ms: u64) {
    let end = cpu_ms() + ms;
    let mut x: u64 = 1;
    while cpu_ms() < end {
        for _ in 0..100000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
    }
    unsafe { std::ptr::write_volatile(std::ptr::addr_of_mut!(SINK), x) };
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn elf_probe_outer(ms: u64) {
    elf_probe_hot(ms);
    unsafe {
        let v = std::ptr::read_volatile(std::ptr::addr_of!(SINK));
        std::ptr::write_volatile(std::ptr::addr_of_mut!(SINK), v + 1);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() >= 2 && args[1] == "addr" {
        println!("{:p}", elf_probe_hot as *const ());
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        return;
    }
    if args.len() >= 3 && args[1] == "spin" {
        elf_probe_outer(args[2].parse().unwrap_or(100));
        return;
    }
    eprintln!("usage: link_probe addr | spin MS");
    std::process::exit(2);
}
