// A trivial function unw_prog calls through its PLT (the PLT's CFA is a DWARF expression).
extern "C" __attribute__((noinline)) int plt_nop(int x) { return x + 1; }
