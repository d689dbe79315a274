// CIE/FDE parsing on hand-assembled .eh_frame and .debug_frame bytes: every field, the index, and malformed
// input (every truncation of a valid section) answered without reading out of bounds.
#include "elf/cfi.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

using namespace fxprof::elf;

namespace {

struct Bytes {
  std::vector<uint8_t> b;
  void u8(uint8_t v) { b.push_back(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void s32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void uleb(uint64_t v) {
    do {
      uint8_t x = v & 0x7f;
      v >>= 7;
      b.push_back(static_cast<uint8_t>(x | (v ? 0x80 : 0)));
    } while (v);
  }
  void sleb(int64_t v) {
    for (;;) {
      uint8_t x = v & 0x7f;
      v >>= 7;
      bool done = (v == 0 && !(x & 0x40)) || (v == -1 && (x & 0x40));
      b.push_back(static_cast<uint8_t>(x | (done ? 0 : 0x80)));
      if (done) return;
    }
  }
  void patch_u32(size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
};

// .eh_frame at svma 0x2000: a "zR" CIE (pcrel|sdata4 FDE pointers, x86-64 defaults), then FDEs.
constexpr uint64_t kEhVaddr = 0x2000;

size_t add_cie(Bytes& s) {
  size_t at = s.b.size();
  s.u32(0);  // length, patched
  s.u32(0);  // CIE id
  s.u8(1);   // version
  for (char c : std::string("zR")) s.u8(static_cast<uint8_t>(c));
  s.u8(0);
  s.uleb(1);                         // code align
  s.sleb(-8);                        // data align
  s.u8(16);                          // RA register
  s.uleb(1);                         // augmentation length
  s.u8(0x1b);                        // pcrel | sdata4
  s.u8(0x0c), s.uleb(7), s.uleb(8);  // def_cfa rsp+8
  s.u8(0x90), s.uleb(1);             // offset(rip) cfa-8
  while ((s.b.size() - at) % 8) s.u8(0);
  s.patch_u32(at, static_cast<uint32_t>(s.b.size() - at - 4));
  return at;
}

size_t add_fde(Bytes& s, size_t cie_at, uint64_t pc, uint32_t len) {
  size_t at = s.b.size();
  s.u32(0);
  s.u32(static_cast<uint32_t>(s.b.size() - cie_at));  // CIE pointer: back from this field
  uint64_t field = kEhVaddr + s.b.size();
  s.s32(static_cast<int32_t>(pc - field));
  s.u32(len);
  s.uleb(0);                           // augmentation data length
  s.u8(0x41), s.u8(0x0e), s.uleb(16);  // advance 1; def_cfa_offset 16
  while ((s.b.size() - at) % 8) s.u8(0);
  s.patch_u32(at, static_cast<uint32_t>(s.b.size() - at - 4));
  return at;
}

}  // namespace

TEST_CASE("cfi: read_encoded decodes the pointer encodings x86-64 uses", "[unwind][cfi]") {
  Bytes s;
  s.u64(0x1122334455667788);  // absptr
  s.s32(-16);                 // sdata4 pcrel
  s.uleb(300);                // uleb128
  s.u32(0x40);                // udata4 datarel
  Section sec{s.b.data(), s.b.size(), 0x5000};
  PtrBase base{&sec, 0x9000};
  Cursor c{s.b.data(), s.b.data() + s.b.size()};
  uint64_t v = 0;
  REQUIRE(read_encoded(c, 0x00, base, v));
  CHECK(v == 0x1122334455667788);
  REQUIRE(read_encoded(c, 0x1b, base, v));
  CHECK(v == 0x5000 + 8 - 16);  // relative to the field's own address
  REQUIRE(read_encoded(c, 0x01, base, v));
  CHECK(v == 300);
  REQUIRE(read_encoded(c, 0x33, base, v));
  CHECK(v == 0x9040);
  CHECK(!read_encoded(c, 0xff, base, v));  // omit
  CHECK(!read_encoded(c, 0x03, base, v));  // past the end
  CHECK(c.bad);
}

TEST_CASE("cfi: CIE and FDE fields, the FDE index and lookups", "[unwind][cfi]") {
  Bytes s;
  size_t cie = add_cie(s);
  size_t f2 = add_fde(s, cie, 0x4100, 0x40);
  size_t f1 = add_fde(s, cie, 0x4000, 0x20);
  s.u32(0);  // terminator
  Section sec{s.b.data(), s.b.size(), kEhVaddr};
  PtrBase base{&sec, 0};

  Cie c;
  REQUIRE(parse_cie(sec, cie, true, base, c));
  CHECK(c.code_align == 1);
  CHECK(c.data_align == -8);
  CHECK(c.ra_reg == kDwRip);
  CHECK(c.fde_enc == 0x1b);
  CHECK(c.aug_z);
  CHECK(!c.signal);
  CHECK(c.insns_end - c.insns >= 5);

  Fde f;
  REQUIRE(parse_fde(sec, f1, true, base, f));
  CHECK(f.pc_begin == 0x4000);
  CHECK(f.pc_end == 0x4020);
  REQUIRE(parse_fde(sec, f2, true, base, f));
  CHECK(f.pc_begin == 0x4100);
  CHECK(f.pc_end == 0x4140);
  CHECK(!parse_fde(sec, cie, true, base, f));  // a CIE is not an FDE

  auto idx = index_fdes(sec, true, base);
  REQUIRE(idx.size() == 2);
  CHECK(idx[0].pc == 0x4000);  // sorted, whatever the section order
  CHECK(idx[0].off == f1);
  uint64_t off = 0;
  REQUIRE(find_in_index(idx, 0x4130, off));
  CHECK(off == f2);
  REQUIRE(find_in_index(idx, 0x4000, off));
  CHECK(off == f1);
  CHECK(!find_in_index(idx, 0x3fff, off));
}

TEST_CASE("cfi: .debug_frame conventions (CIE id 0xffffffff, absolute addresses)", "[unwind][cfi]") {
  Bytes s;
  s.u32(0);
  s.u32(0xffffffff);
  s.u8(3);  // version 3: ULEB return-address register
  s.u8(0);  // no augmentation
  s.uleb(1), s.sleb(-8), s.uleb(16);
  s.u8(0x0c), s.uleb(7), s.uleb(8);
  while (s.b.size() % 8) s.u8(0);
  s.patch_u32(0, static_cast<uint32_t>(s.b.size() - 4));
  size_t fde = s.b.size();
  s.u32(0);
  s.u32(0);  // CIE at offset 0
  s.u64(0x401000);
  s.u64(0x80);
  s.u8(0);
  while ((s.b.size() - fde) % 8) s.u8(0);
  s.patch_u32(fde, static_cast<uint32_t>(s.b.size() - fde - 4));
  Section sec{s.b.data(), s.b.size(), 0};
  Fde f;
  REQUIRE(parse_fde(sec, fde, false, PtrBase{}, f));
  CHECK(f.pc_begin == 0x401000);
  CHECK(f.pc_end == 0x401080);
  CHECK(!parse_fde(sec, fde, true, PtrBase{&sec, 0}, f));  // as .eh_frame it makes no sense
  auto idx = index_fdes(sec, false, PtrBase{});
  REQUIRE(idx.size() == 1);
}

TEST_CASE("cfi: every truncation and corruption of a section is answered, never overrun", "[unwind][cfi]") {
  Bytes s;
  size_t cie = add_cie(s);
  add_fde(s, cie, 0x4000, 0x20);
  add_fde(s, cie, 0x4100, 0x20);
  size_t full = 0;
  {
    Section sec{s.b.data(), s.b.size(), kEhVaddr};
    full = index_fdes(sec, true, PtrBase{&sec, 0}).size();
  }
  REQUIRE(full == 2);
  for (size_t n = 0; n < s.b.size(); ++n) {
    // A heap copy of exactly n bytes, so ASan flags any read past it.
    std::vector<uint8_t> cut(s.b.begin(), s.b.begin() + static_cast<std::ptrdiff_t>(n));
    Section sec{cut.data(), cut.size(), kEhVaddr};
    auto idx = index_fdes(sec, true, PtrBase{&sec, 0});
    CHECK(idx.size() < full);
  }
  uint64_t x = 7;
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> bad = s.b;
    for (int k = 0; k < 3; ++k) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      bad[(x >> 33) % bad.size()] = static_cast<uint8_t>(x >> 20);
    }
    Section sec{bad.data(), bad.size(), kEhVaddr};
    auto idx = index_fdes(sec, true, PtrBase{&sec, 0});
    CHECK(idx.size() <= 2);
  }
}
