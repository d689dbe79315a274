// Symbolizer test program (Rust): a function in a module and a generic instance, compiled with both manglings.
pub mod engine {
    // std::hint::black_box is stable only since Rust 1.66; Debian 12's rustc is 1.63.
    #[inline(always)]
    fn opaque<T: Copy>(v: T) -> T {
        unsafe { std::ptr::read_volatile(&v) }
    }
    pub struct Gear<T> {
        pub teeth: T,
    }
    impl<T: Copy + Into<u64>> Gear<T> {
        #[inline(never)]
        pub fn spin(&self, turns: u64) -> u64 {
            opaque(self.teeth.into()) * turns + 1
        }
    }
    #[inline(never)]
    pub fn rust_hot_function(x: u64) -> u64 {
        let mut s = 0u64;
        for i in 0..x {
            s = s.wrapping_add(opaque(i) * 3);
        }
        s
    }
}

fn main() {
    let n = std::env::args().count() as u64 + 10;
    let g = engine::Gear { teeth: 7u32 };
    println!("{} {}", engine::rust_hot_function(n), g.spin(n));
}
