// fxprof heap wire format: what the interposition library (heap/shim.cpp) writes into the recorder's pipe.
//
// The stream is a sequence of chunks of at most PIPE_BUF (4096) bytes, each written with one write(2), so
// that chunks from many threads and processes sharing the pipe never interleave. A chunk is a ChunkHeader
// then records, each starting with its Kind byte: an allocation is a packed 29-byte AllocRecord, a free an
// 18-byte FreeRecord (the events, millions of them), the rest 32-byte Records; a StackDef record is followed
// by `addr` 8-byte return addresses, leaf first, the stack's inner frames: its `size` outer frames are the
// outer ones of the same thread's previous definition (0 for the first; cc1plus's new stacks share 26 of 45
// frames on average with the one before). Stack ids are
// scoped to (pid, tid): each thread interns its own call sites, so a definition always precedes its uses in
// the stream (they travel in the same thread's chunks, in order) without any lock between threads. Numbers:
// an allocation and its free are 47 bytes (64 with 32-byte records: python's 5.2M allocations were 355 MB
// of pipe traffic, each byte copied in and out of the pipe and held until the program ends).
#pragma once

#include <cstdint>

namespace fxprof::heap::wire {

inline constexpr uint32_t kChunkMax = 4096;  // PIPE_BUF on Linux: one write(2) stays atomic
inline constexpr uint32_t kMaxFrames = 64;
inline constexpr const char* kFdEnv = "FXPROF_HEAP_FD";  // the pipe's write end, inherited
// "DEV:INO" of that pipe (fstat): the shim writes to the descriptor only while it is still this pipe, as the
// program may close it and reuse the number for its own files (or dup2 a log over it).
inline constexpr const char* kPipeEnv = "FXPROF_HEAP_PIPE";
inline constexpr const char* kModeEnv = "FXPROF_HEAP_MODE";  // "full" or "sampled"
inline constexpr const char* kRateEnv = "FXPROF_HEAP_RATE";  // mean bytes between samples (sampled mode)
inline constexpr const char* kLibEnv = "FXPROF_HEAP_LIB";    // the shim's path (so children keep LD_PRELOAD)
inline constexpr const char* kNoTscEnv = "FXPROF_HEAP_NO_TSC";  // set: CLOCK_MONOTONIC times (tests)
inline constexpr const char* kSeedEnv = "FXPROF_HEAP_SEED";     // sampled mode's random seed (tests)
// "DEV:INO:START-END,..." (hex addresses in the file): functions of that executable recorded with uprobes;
// an allocation with one of them on its stack is theirs (heap/shim_frames.h), not the library's to count.
inline constexpr const char* kProbedEnv = "FXPROF_HEAP_PROBED";

struct ChunkHeader {
  uint32_t magic;  // kMagic: a reader that lost sync stops rather than misreads
  uint32_t pid;
  uint32_t tid;
  uint32_t bytes;  // records after this header
};
inline constexpr uint32_t kMagic = 0x48505846;  // "FXPH"

// Clock: where the CPU's time-stamp counter is invariant, the shim times events with it (a cheaper read
// than clock_gettime) and every chunk opens and closes with a Clock record (time: CLOCK_MONOTONIC ns, addr:
// the TSC read with it). The recorder maps all ticks through one increasing function of the pairs of every
// chunk, so events keep their order across threads and processes (a free after its allocation on another
// thread). A chunk without Clock records has CLOCK_MONOTONIC times.
//
// A thread's first chunk is sent as soon as the thread is first recorded, before its first event is timed
// (only a Clock record, or no records in a stream of CLOCK_MONOTONIC times), and its last one ends with an
// End record: so the recorder's worker knows every thread that may still send events earlier than what it
// folds, and stops waiting on a thread that has exited (heap/source.cpp).
//
// A process's shim ends its stream with a Bye record, alone in a chunk, once it flushed every thread's chunk
// at exit (exit, _exit): a process that sent no Bye had its stream cut (it closed or replaced the pipe's
// descriptor, it was killed, or it outlived the recording), and the recorder says so (Summary::cuts).
enum class Kind : uint8_t { Alloc = 1, Free = 2, StackDef = 3, Lost = 4, Clock = 5, End = 6, Bye = 7 };

struct Record {
  uint8_t kind;
  uint8_t pad[3];
  uint32_t stack;  // Alloc/StackDef: the thread-scoped stack id
  uint64_t time;   // CLOCK_MONOTONIC ns (as perf's samples), or TSC ticks in a chunk with Clock records
  uint64_t addr;   // Alloc/Free: the block; StackDef: number of frames following
  uint64_t size;   // Lost: count; StackDef: outer frames shared with the thread's previous definition
};
static_assert(sizeof(Record) == 32);

// Alloc and Free, packed: written and read with memcpy, field by field at these offsets.
struct __attribute__((packed)) AllocRecord {
  uint8_t kind;  // Kind::Alloc
  uint32_t stack;
  uint64_t time;
  uint64_t addr;
  uint64_t size;  // the block's bytes (the recorder weighs sampled ones)
};
static_assert(sizeof(AllocRecord) == 29);
struct __attribute__((packed)) FreeRecord {
  uint8_t kind;  // Kind::Free
  uint64_t time;
  uint64_t addr;
  uint8_t temporary;  // sampled mode: 1 when the thread allocated and freed nothing else since the block
};
static_assert(sizeof(FreeRecord) == 18);

// The shim's stack ids count from 0 in each thread (dense: the reader indexes a vector with them); the calls
// recorded outside the shim (uprobes, heap/external.cpp) use ids from here up, in the same threads.
inline constexpr uint32_t kExternalStackIds = uint32_t{1} << 31;

}  // namespace fxprof::heap::wire
