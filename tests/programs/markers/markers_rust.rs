// 20 requests of 2 ms through include/fxprof/markers.rs (Scope, instant), on the main thread.
#[path = "../../../include/fxprof/markers.rs"]
mod markers;

#[inline(never)]
fn rust_compute(ns: u64) -> u64 {
    let until = markers::now_ns() + ns;
    let mut x = 1u64;
    while markers::now_ns() < until {
        for _ in 0..100 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
    }
    x
}

fn main() {
    let mut sink = 0;
    for i in 0..20 {
        let s = markers::Scope::with_category("rust", "rust_request");
        sink ^= rust_compute(2_000_000);
        markers::instant("rust", "tick", &[("i", markers::Value::Num(i as f64))]);
        s.end_with(&[("id", markers::Value::Num(i as f64)), ("lang", markers::Value::Str("rust"))]);
    }
    println!("{}", sink & 1);
}
