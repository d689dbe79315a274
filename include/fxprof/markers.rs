//! fxprof markers for Rust: what your program says it is doing, on the profile's timeline. One file, std
//! only (no crate to add): copy it into your project as a module.
//!
//! ```ignore
//! #[path = "fxprof_markers.rs"] mod markers;
//! fn handle(id: u64) {
//!     let _s = markers::Scope::new("request");              // an interval marker until the end of the scope
//!     markers::instant("db", "commit", &[("rows", markers::Value::Num(12.0))]);
//!     let s = markers::Scope::with_category("db", "query");
//!     s.end_with(&[("table", markers::Value::Str("users"))]); // ends it, with fields
//! }
//! ```
//!
//! Under `fxprof record` (FXPROF_MARKERS names a folder of its own) each thread writes its markers to
//! FXPROF_MARKERS/fxprof-markers-PID-TID-N.txt, a file it maps: the format of include/fxprof/markers.h (one
//! line a marker: `START_NS END_NS NAME`, then TAB-separated `.cat=CATEGORY`, `.instant`, `KEY=VALUE`).
//! Without FXPROF_MARKERS each call tests one thread-local and writes nothing.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;

extern "C" {
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
    fn munmap(addr: *mut u8, len: usize) -> i32;
    fn clock_gettime(clock: i32, ts: *mut [i64; 2]) -> i32;
    fn gettid() -> i32;
}

const WINDOW: usize = 1 << 20; // bytes of the file mapped at a time
const LINE_MAX: usize = 1024;

/// A field's value.
pub enum Value<'a> {
    Num(f64),
    Str(&'a str),
}

/// CLOCK_MONOTONIC in nanoseconds (the clock of the profile's samples).
pub fn now_ns() -> u64 {
    let mut ts = [0i64; 2];
    unsafe { clock_gettime(1, &mut ts) };
    ts[0] as u64 * 1_000_000_000 + ts[1] as u64
}

// Read when a thread writes its first marker (and in a forked child): not on every call.
fn folder() -> Option<String> {
    std::env::var("FXPROF_MARKERS").ok().filter(|d| !d.is_empty())
}

struct Writer {
    file: File,
    window: *mut u8,
    offset: u64,
    used: usize,
    pid: u32,
}

impl Writer {
    fn open(dir: &str) -> Option<Writer> {
        let pid = std::process::id();
        let tid = unsafe { gettid() };
        for n in 0..100 {
            let path = format!("{}/fxprof-markers-{}-{}-{}.txt", dir, pid, tid, n);
            let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path);
            if let Ok(file) = file {
                let mut w = Writer { file, window: std::ptr::null_mut(), offset: 0, used: 0, pid };
                return if w.map(0) { Some(w) } else { None };
            }
        }
        None
    }

    // Maps the window at `offset` (the file grows by a window each time).
    fn map(&mut self, offset: u64) -> bool {
        if !self.window.is_null() {
            unsafe { munmap(self.window, WINDOW) };
            self.window = std::ptr::null_mut();
        }
        if self.file.set_len(offset + WINDOW as u64).is_err() {
            return false;
        }
        let p = unsafe { mmap(std::ptr::null_mut(), WINDOW, 3, 1, self.file.as_raw_fd(), offset as i64) };
        if p as isize == -1 {
            return false;
        }
        self.window = p;
        self.offset = offset;
        self.used = 0;
        true
    }

    fn write(&mut self, line: &[u8]) -> bool {
        if self.used + line.len() + 1 > WINDOW {
            unsafe { std::ptr::write_bytes(self.window.add(self.used), b'\n', WINDOW - self.used) };
            if !self.map(self.offset + WINDOW as u64) {
                return false;
            }
        }
        unsafe {
            std::ptr::copy_nonoverlapping(line.as_ptr(), self.window.add(self.used), line.len());
            // The newline last: a reader that sees it sees the whole line.
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            std::ptr::write_volatile(self.window.add(self.used + line.len()), b'\n');
        }
        self.used += line.len() + 1;
        true
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.window.is_null() {
            unsafe { munmap(self.window, WINDOW) };
        }
    }
}

const UNKNOWN: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;

thread_local! {
    static STATE: Cell<u8> = const { Cell::new(UNKNOWN) };
    static WRITER: RefCell<Option<Writer>> = const { RefCell::new(None) };
}

/// Whether markers are being recorded (FXPROF_MARKERS is set and this thread's file could be made).
pub fn enabled() -> bool {
    match STATE.with(|s| s.get()) {
        OFF => false,
        ON => true,
        _ => start(),
    }
}

#[cold]
fn start() -> bool {
    let w = folder().and_then(|d| Writer::open(&d));
    let on = w.is_some();
    WRITER.with(|x| *x.borrow_mut() = w);
    STATE.with(|s| s.set(if on { ON } else { OFF }));
    on
}

fn text(out: &mut Vec<u8>, s: &str) {
    for &b in s.as_bytes() {
        if out.len() >= LINE_MAX - 64 {
            break;
        }
        out.push(if b == b'\t' || b == b'\n' || b == b'\r' { b' ' } else { b });
    }
}

fn line(start: u64, end: u64, category: &str, name: &str, instant: bool, fields: &[(&str, Value)]) {
    use std::io::Write;
    let mut out = Vec::with_capacity(128);
    let _ = write!(out, "{} {} ", start, end);
    text(&mut out, if name.is_empty() { "marker" } else { name });
    if !category.is_empty() {
        out.extend_from_slice(b"\t.cat=");
        text(&mut out, category);
    }
    if instant {
        out.extend_from_slice(b"\t.instant");
    }
    for (key, value) in fields {
        if out.len() >= LINE_MAX - 64 {
            break;
        }
        out.push(b'\t');
        text(&mut out, if key.is_empty() || key.starts_with('.') { "field" } else { key });
        out.push(b'=');
        match value {
            Value::Num(v) if v.fract() == 0.0 && v.abs() < 9.0e15 => {
                let _ = write!(out, "{}", *v as i64);
            }
            Value::Num(v) => {
                let _ = write!(out, "{}", v);
            }
            Value::Str(s) => {
                out.push(b'"');
                text(&mut out, s);
                out.push(b'"');
            }
        }
    }
    WRITER.with(|x| {
        let mut x = x.borrow_mut();
        // A forked child: the parent's file is not its own.
        if x.as_ref().map_or(false, |w| w.pid != std::process::id()) {
            *x = folder().and_then(|d| Writer::open(&d));
        }
        let ok = match x.as_mut() {
            Some(w) => w.write(&out),
            None => false,
        };
        if !ok {
            *x = None;
            STATE.with(|s| s.set(OFF));
        }
    });
}

/// An interval marker with times of your own (now_ns()).
pub fn interval(category: &str, name: &str, start_ns: u64, end_ns: u64, fields: &[(&str, Value)]) {
    if enabled() {
        line(start_ns, end_ns, category, name, false, fields);
    }
}

/// An instant marker, now.
pub fn instant(category: &str, name: &str, fields: &[(&str, Value)]) {
    if enabled() {
        let now = now_ns();
        line(now, now, category, name, true, fields);
    }
}

/// An interval marker from its creation to its drop (or end_with()).
pub struct Scope {
    category: &'static str,
    name: &'static str,
    start: u64,
}

impl Scope {
    pub fn new(name: &'static str) -> Scope {
        Scope::with_category("", name)
    }
    pub fn with_category(category: &'static str, name: &'static str) -> Scope {
        Scope { category, name, start: if enabled() { now_ns() } else { 0 } }
    }
    /// Ends the interval now, with fields.
    pub fn end_with(mut self, fields: &[(&str, Value)]) {
        if self.start != 0 && enabled() {
            line(self.start, now_ns(), self.category, self.name, false, fields);
        }
        self.start = 0;
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if self.start != 0 && enabled() {
            line(self.start, now_ns(), self.category, self.name, false, &[]);
        }
    }
}
