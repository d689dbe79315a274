// Symbolizer test program (Rust): a function in a module and a generic instance, compiled with both manglings.
pub mod engine {
    pub struct Gear<T> {
        pub teeth: T,
    }
    impl<T: Copy + Into<u64>> Gear<T> {
        #[inline(never)]
        pub fn spin(&self, turns: u64) -> u64 {
            std::hint::black_box(self.teeth.into()) * turns + 1
        }
    }
    #[inline(never)]
    pub fn rust_hot_function(x: u64) -> u64 {
        let mut s = 0u64;
        for i in 0..x {
            s = s.wrapping_add(std::hint::black_box(i) * 3);
        }
        s
    }
}

fn main() {
    let n = std::env::args().count() as u64 + 10;
    let g = engine::Gear { teeth: 7u32 };
    println!("{} {}", engine::rust_hot_function(n), g.spin(n));
}
