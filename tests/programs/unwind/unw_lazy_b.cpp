// 1,000 distinct functions for libunw_lazy_a.so to call through its lazily bound PLT (see unw_lazy.cpp).
#define LAZY_F(n) \
  extern "C" __attribute__((noinline)) int lazy_f##n(int x) { return x * 3 + n; }
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
