// Issue 21 item 1: a hot function whose first instruction takes page faults. touch_page's first instruction
// writes to a fresh page, so nearly all of the program's time is the kernel's page-fault handler under that
// instruction, and before_touch ends right before it: a lookup one byte early (the return-address nudge)
// names before_touch. Written in assembly so the layout is fixed; CFI lets the DWARF unwinder walk out.
// Usage: fault_first [MIB] (default 1024): touches that many MiB of fresh anonymous memory, 64 MiB at a time.
#include <stdlib.h>
#include <sys/mman.h>

void before_touch(void);
void touch_page(char* p);

__asm__(
    ".text\n"
    ".globl before_touch\n.type before_touch,@function\n"
    "before_touch:\n .cfi_startproc\n nop\n ret\n .cfi_endproc\n.size before_touch, .-before_touch\n"
    ".globl touch_page\n.type touch_page,@function\n"
    "touch_page:\n .cfi_startproc\n movb $1, (%rdi)\n ret\n .cfi_endproc\n.size touch_page, .-touch_page\n");

int main(int argc, char** argv) {
  const long mib = argc > 1 ? atol(argv[1]) : 1024;
  const size_t chunk = 64ul << 20;
  for (long done = 0; done < mib; done += 64) {
    char* p = mmap(NULL, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    before_touch();
    for (size_t off = 0; off < chunk; off += 4096) touch_page(p + off);
    munmap(p, chunk);
  }
  return 0;
}
