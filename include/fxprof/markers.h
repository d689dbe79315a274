/* fxprof markers: what your program says it is doing, on the profile's timeline (C and C++, one header, no
 * library to link; copy it into your project).
 *
 *   #include "fxprof/markers.h"
 *   void handle(Request& r) {
 *     FXPROF_SCOPE("request");                       // an interval marker from here to the end of the scope
 *     ...
 *   }
 *   fxprof_mark_begin("db", "query");                 // C: begin/end pairs, nested, per thread
 *   fxprof_mark_end();
 *   fxprof_field f[] = {fxprof_num("rows", 12), fxprof_str("table", "users")};
 *   fxprof_mark_instant("db", "commit", f, 2);       // an instant marker with a category and two fields
 *
 * Under `fxprof record` (which sets FXPROF_MARKERS to a folder of its own for the program it launches) each
 * thread writes its markers to FXPROF_MARKERS/fxprof-markers-PID-TID-N.txt, a file it maps: the mapping is
 * how the recorder finds the file (and the thread), and what the thread wrote is in the file at once, so a
 * program that crashes keeps its markers. Without FXPROF_MARKERS every call is one test of a thread-local
 * and writes nothing.
 *
 * The file: one line per marker, samply's marker-file line (START_NS END_NS NAME, CLOCK_MONOTONIC
 * nanoseconds) followed by TAB-separated extras that samply does not know of, hence the other file name
 * (samply reads marker-PID-TID.txt files, taking everything after END_NS as the name):
 *     START_NS SP END_NS SP NAME [TAB .cat=CATEGORY] [TAB .instant] [TAB KEY=VALUE]...
 * VALUE is a number, or a string in double quotes; TAB and newlines in names and values become spaces.
 * Unwritten room at the end of a mapped window is NUL bytes; a line that does not fit is preceded by
 * newlines up to the window's end.
 *
 * Cost (bench/markers_bench.cpp, README "Markers"): when not recording under 1 ns per call; recording
 * 0.3-0.6 us of CPU per marker (clock reads, a line copied into the mapped file, its page faults).
 *
 * Strings given to fxprof_mark_begin and FXPROF_SCOPE (name, category, string values) must stay valid
 * until the marker ends (string literals do). Threads and fork: each thread has its own file; a forked
 * child starts its own. Not async-signal-safe. Linux only. */
#ifndef FXPROF_MARKERS_H
#define FXPROF_MARKERS_H

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A marker field: a number (str == NULL) or a string. */
typedef struct fxprof_field {
  const char* key;
  const char* str;
  double num;
} fxprof_field;

static inline fxprof_field fxprof_num(const char* key, double value) {
  fxprof_field f = {key, NULL, value};
  return f;
}
static inline fxprof_field fxprof_str(const char* key, const char* value) {
  fxprof_field f = {key, value ? value : "", 0};
  return f;
}

#define FXPROF_MAX_DEPTH 32      /* open fxprof_mark_begin()s kept per thread (deeper ones are not written) */
#define FXPROF_WINDOW (1u << 20) /* bytes of the file mapped at a time */
#define FXPROF_LINE_MAX 1024     /* longer lines are cut */

struct fxprof_open_marker {
  const char *category, *name;
  uint64_t start_ns;
};

/* Per thread (weak: one per program however many files include this header). */
struct fxprof_thread {
  int state;    /* 0: not looked at yet, 1: recording, 2: not recording */
  unsigned gen; /* the fork generation its file belongs to */
  int fd;
  char* window; /* the mapped part of the file */
  uint64_t window_off;
  uint32_t used;
  int depth;
  struct fxprof_open_marker open[FXPROF_MAX_DEPTH];
};

struct fxprof_process {
  pthread_once_t once;
  int recording; /* FXPROF_MARKERS is set */
  unsigned gen;  /* incremented in a forked child */
  const char* dir;
};

__attribute__((weak)) __thread struct fxprof_thread fxprof__thread;
__attribute__((weak)) struct fxprof_process fxprof__process = {PTHREAD_ONCE_INIT, 0, 0, NULL};

static inline uint64_t fxprof_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void fxprof__forked(void) { __atomic_add_fetch(&fxprof__process.gen, 1, __ATOMIC_RELAXED); }

static inline void fxprof__init_process(void) {
  const char* dir = getenv("FXPROF_MARKERS");
  fxprof__process.dir = dir;
  fxprof__process.recording = dir != NULL && dir[0] != '\0';
  if (fxprof__process.recording) pthread_atfork(NULL, NULL, fxprof__forked);
}

/* Maps the window of the file at `off` (the file grows by a window each time). 0 on success. */
static inline int fxprof__map(struct fxprof_thread* t, uint64_t off) {
  void* p;
  if (t->window) munmap(t->window, FXPROF_WINDOW);
  t->window = NULL;
  if (ftruncate(t->fd, (off_t)(off + FXPROF_WINDOW)) != 0) return -1;
  p = mmap(NULL, FXPROF_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, (off_t)off);
  if (p == MAP_FAILED) return -1;
  t->window = (char*)p;
  t->window_off = off;
  t->used = 0;
  return 0;
}

/* This thread's file: opened on its first marker (and again in a forked child). 1 when it can write. */
static __attribute__((noinline, unused)) int fxprof__start(struct fxprof_thread* t) {
  char path[4096];
  long tid = syscall(SYS_gettid);
  int n;
  pthread_once(&fxprof__process.once, fxprof__init_process);
  if (t->state == 1) { /* a forked child: the parent's file and mapping are not ours */
    if (t->window) munmap(t->window, FXPROF_WINDOW);
    if (t->fd >= 0) close(t->fd);
  }
  t->window = NULL;
  t->fd = -1;
  t->depth = 0;
  t->gen = __atomic_load_n(&fxprof__process.gen, __ATOMIC_RELAXED);
  t->state = 2;
  if (!fxprof__process.recording) return 0;
  for (n = 0; n < 100 && t->fd < 0; ++n) { /* a name of its own (two copies of this header in a thread) */
    snprintf(path, sizeof path, "%s/fxprof-markers-%ld-%ld-%d.txt", fxprof__process.dir, (long)getpid(), tid,
             n);
    t->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (t->fd < 0 || fxprof__map(t, 0) != 0) return 0;
  t->state = 1;
  return 1;
}

/* Whether this thread's markers are written (the fast test of every call). */
static inline int fxprof__on(void) {
  struct fxprof_thread* t = &fxprof__thread;
  if (__builtin_expect(t->state == 2, 1) && __builtin_expect(t->gen == fxprof__process.gen, 1)) return 0;
  if (t->state == 1 && t->gen == fxprof__process.gen) return 1;
  return fxprof__start(t);
}

static inline char* fxprof__u64(char* p, uint64_t v) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *p++ = digits[--n];
  return p;
}

/* Copies `s` (TAB and newlines as spaces, at most up to `end`). */
static inline char* fxprof__text(char* p, char* end, const char* s) {
  for (; *s && p < end; ++s) *p++ = (*s == '\t' || *s == '\n' || *s == '\r') ? ' ' : *s;
  return p;
}

static __attribute__((noinline, unused)) void fxprof__line(uint64_t start, uint64_t end, const char* category,
                                                           const char* name, int instant,
                                                           const fxprof_field* fields, int n) {
  struct fxprof_thread* t = &fxprof__thread;
  char line[FXPROF_LINE_MAX];
  char *p = line, *stop = line + FXPROF_LINE_MAX - 64;
  uint32_t len;
  int i;
  p = fxprof__u64(p, start);
  *p++ = ' ';
  p = fxprof__u64(p, end);
  *p++ = ' ';
  p = fxprof__text(p, stop, name && *name ? name : "marker");
  if (category && *category) {
    memcpy(p, "\t.cat=", 6);
    p = fxprof__text(p + 6, stop, category);
  }
  if (instant) {
    memcpy(p, "\t.instant", 9);
    p += 9;
  }
  for (i = 0; i < n && p < stop; ++i) {
    *p++ = '\t';
    p = fxprof__text(p, stop, fields[i].key && fields[i].key[0] != '.' ? fields[i].key : "field");
    *p++ = '=';
    if (fields[i].str) {
      *p++ = '"';
      p = fxprof__text(p, stop, fields[i].str);
      *p++ = '"';
    } else if (fields[i].num == (double)(int64_t)fields[i].num) {
      int64_t v = (int64_t)fields[i].num;
      if (v < 0) *p++ = '-';
      p = fxprof__u64(p, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
    } else {
      p += snprintf(p, 32, "%.17g", fields[i].num);
    }
  }
  len = (uint32_t)(p - line);
  if (t->used + len + 1 > FXPROF_WINDOW) { /* the rest of this window: empty lines; then the next window */
    memset(t->window + t->used, '\n', FXPROF_WINDOW - t->used);
    if (fxprof__map(t, t->window_off + FXPROF_WINDOW) != 0) {
      t->state = 2;
      return;
    }
  }
  memcpy(t->window + t->used, line, len);
  /* The newline last: a reader that sees it sees the whole line. */
  __atomic_store_n(t->window + t->used + len, '\n', __ATOMIC_RELEASE);
  t->used += len + 1;
}

/* An interval marker with times of your own (fxprof_now()). */
static inline void fxprof_mark_interval(const char* category, const char* name, uint64_t start_ns,
                                        uint64_t end_ns, const fxprof_field* fields, int n) {
  if (fxprof__on()) fxprof__line(start_ns, end_ns, category, name, 0, fields, n);
}

/* An instant marker, now. */
static inline void fxprof_mark_instant(const char* category, const char* name, const fxprof_field* fields,
                                       int n) {
  if (fxprof__on()) {
    uint64_t now = fxprof_now();
    fxprof__line(now, now, category, name, 1, fields, n);
  }
}

/* An interval from now to the matching fxprof_mark_end() on this thread (begin/end pairs nest). */
static inline void fxprof_mark_begin(const char* category, const char* name) {
  struct fxprof_thread* t = &fxprof__thread;
  if (!fxprof__on()) return;
  if (t->depth < FXPROF_MAX_DEPTH) {
    t->open[t->depth].category = category;
    t->open[t->depth].name = name;
    t->open[t->depth].start_ns = fxprof_now();
  }
  ++t->depth;
}

/* Ends the innermost open fxprof_mark_begin() of this thread, with fields. */
static inline void fxprof_mark_end_with(const fxprof_field* fields, int n) {
  struct fxprof_thread* t = &fxprof__thread;
  if (!fxprof__on() || t->depth == 0) return;
  if (--t->depth < FXPROF_MAX_DEPTH) {
    const struct fxprof_open_marker* m = &t->open[t->depth];
    fxprof__line(m->start_ns, fxprof_now(), m->category, m->name, 0, fields, n);
  }
}

static inline void fxprof_mark_end(void) { fxprof_mark_end_with(NULL, 0); }

/* Whether markers are being recorded (FXPROF_MARKERS is set and this thread's file could be made). */
static inline int fxprof_enabled(void) { return fxprof__on(); }

#ifdef __cplusplus
} /* extern "C" */

namespace fxprof {

/* An interval marker over a C++ scope: FXPROF_SCOPE("name") or FXPROF_SCOPE("name", "category"); fields with
 * FXPROF_SCOPE_NAMED(s, "name").field("rows", 12). At most 8 fields. */
class Scope {
 public:
  explicit Scope(const char* name, const char* category = nullptr) noexcept
      : name_(name), category_(category), start_(fxprof__on() ? fxprof_now() : 0) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope() {
    if (start_ != 0 && fxprof__on()) fxprof__line(start_, fxprof_now(), category_, name_, 0, fields_, n_);
  }
  Scope& field(const char* key, double value) noexcept {
    if (n_ < 8) fields_[n_++] = fxprof_num(key, value);
    return *this;
  }
  Scope& field(const char* key, const char* value) noexcept {
    if (n_ < 8) fields_[n_++] = fxprof_str(key, value);
    return *this;
  }

 private:
  const char *name_, *category_;
  uint64_t start_;
  fxprof_field fields_[8];
  int n_ = 0;
};

}  // namespace fxprof

#define FXPROF__CAT2(a, b) a##b
#define FXPROF__CAT(a, b) FXPROF__CAT2(a, b)
#define FXPROF_SCOPE(...) ::fxprof::Scope FXPROF__CAT(fxprof_scope_, __COUNTER__)(__VA_ARGS__)
#define FXPROF_SCOPE_NAMED(var, ...) ::fxprof::Scope var(__VA_ARGS__)
#endif /* __cplusplus */

#endif /* FXPROF_MARKERS_H */
