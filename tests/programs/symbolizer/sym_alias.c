// Symbol aliases as C libraries and the kernel define them, built without DWARF so that the symbol table
// names every function: lookup must pick the name perf shows (global over local over weak, then fewer
// leading underscores), whatever the order of the aliases in .symtab (locals always come first).
#include <stdio.h>
#include <stdlib.h>

// One body, four names: the local definition, a global alias, an underscored global alias, a weak one.
__attribute__((noinline)) static int impl_local(int x) { return x * 3 + 1; }
int api_global(int x) __attribute__((alias("impl_local")));
int __api_internal(int x) __attribute__((alias("impl_local")));
int api_weak(int x) __attribute__((weak, alias("impl_local")));

// A local definition with only a weak alias: the local name wins (a weak one can be overridden).
__attribute__((noinline)) static int other_local(int x) { return x * 5 + 2; }
int other_weak(int x) __attribute__((weak, alias("other_local")));

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1;
  printf("%d\n", api_global(n) + other_weak(n));
  return 0;
}
