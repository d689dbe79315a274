// Linked with -z lazy: the first call of each lazy_f* goes through glibc's _dl_runtime_resolve_xsavec, whose
// CFA is computed from RBX (it realigns the stack for XSAVEC). unw_lazy.cpp dlopens this library again and
// again, so a sizeable share of its samples land inside symbol resolution.
#define LAZY_F(n) extern "C" int lazy_f##n(int x);
#define LAZY_F10(n)                                                                                       \
  LAZY_F(n##0)                                                                                            \
  LAZY_F(n##1) LAZY_F(n##2) LAZY_F(n##3) LAZY_F(n##4) LAZY_F(n##5) LAZY_F(n##6) LAZY_F(n##7) LAZY_F(n##8) \
      LAZY_F(n##9)
#define LAZY_F100(n)                                                                                       \
  LAZY_F10(n##0)                                                                                           \
  LAZY_F10(n##1) LAZY_F10(n##2) LAZY_F10(n##3) LAZY_F10(n##4) LAZY_F10(n##5) LAZY_F10(n##6) LAZY_F10(n##7) \
      LAZY_F10(n##8) LAZY_F10(n##9)
LAZY_F100(1)
LAZY_F100(2) LAZY_F100(3) LAZY_F100(4) LAZY_F100(5) LAZY_F100(6) LAZY_F100(7) LAZY_F100(8) LAZY_F100(9)
    LAZY_F100(10)
#undef LAZY_F
#define LAZY_F(n) s = lazy_f##n(s);

        extern "C" __attribute__((noinline)) int lazy_call_all(int s) {
  LAZY_F100(1)
  LAZY_F100(2) LAZY_F100(3) LAZY_F100(4) LAZY_F100(5) LAZY_F100(6) LAZY_F100(7) LAZY_F100(8) LAZY_F100(9)
      LAZY_F100(10) return s;
}
