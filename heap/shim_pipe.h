// fxprof heap shim (heap/shim.cpp): the recorder's pipe, which the program may close or reuse.
// Compiled into libfxprof_heap.so only; nothing here allocates.
//
// The descriptor number comes from FXPROF_HEAP_FD and the pipe's identity (st_dev, st_ino) from
// FXPROF_HEAP_PIPE (heap/wire.h). Every chunk is written only after fstat says the number is still that pipe
// (one call per 4 KiB chunk, nothing per allocation): a program that closed its inherited descriptors and
// opened files, or dup2'd a log over them, gets nothing of ours in them. Once the check or a write fails, the
// stream is cut for good (the number may hold the program's file by the next chunk) and the recorder, which
// then gets no Bye from the process, says so. Writes block SIGPIPE in the writing thread: a recorder killed
// mid-run makes the shim stop sending, never kills the program.
#pragma once

#include <atomic>
#include <cstddef>

namespace fxprof::heap::shim {

extern int pipe_fd;  // -1: nothing to send to
extern std::atomic<bool>
    pipe_cut;  // the pipe stopped being ours (or its reader is gone): nothing more is sent

// Takes the pipe from the environment, if the number given is the pipe named (else nothing is recorded: after
// an exec the number may hold one of the program's files).
void pipe_open();

// Writes `n` bytes as one write(2) (a chunk of at most PIPE_BUF bytes: atomic); false (and the stream cut)
// when the descriptor is no longer our pipe or the write fails.
bool pipe_write(const void* data, size_t n);

// Moves both ends of a pipe just made to descriptor numbers far above those the program's own open() calls
// get (close-on-exec): libunwind's memory-validation pipe, which it reads, writes and, after an error, closes
// and reopens by number, so that a program that closed its low descriptors and opened files under them never
// has libunwind's bytes in them or its files closed.
void move_high(int fds[2]);

// Whether events are still recorded: not once the stream is cut (their chunks could never be sent).
inline bool sending() { return pipe_fd >= 0 && !pipe_cut.load(std::memory_order_relaxed); }

}  // namespace fxprof::heap::shim
