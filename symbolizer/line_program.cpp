#include "symbolizer/line_program.h"

#include <cstring>
#include <filesystem>

#include "base/byte_reader.h"

namespace fxprof::symbolizer {
namespace {

using Reader = ByteReader;  // any overrun sets `bad` and yields zeros

const char* string_at(std::span<const uint8_t> sec, uint64_t off) {
  if (off >= sec.size()) return nullptr;
  const char* s = reinterpret_cast<const char*>(sec.data() + off);
  if (std::memchr(s, 0, sec.size() - off) == nullptr) return nullptr;
  return s;
}

// DWARF forms used in v5 directory/file entry formats.
constexpr uint64_t kFormBlock2 = 0x03, kFormBlock4 = 0x04, kFormData2 = 0x05, kFormData4 = 0x06,
                   kFormData8 = 0x07, kFormString = 0x08, kFormBlock = 0x09, kFormBlock1 = 0x0a,
                   kFormData1 = 0x0b, kFormSdata = 0x0d, kFormStrp = 0x0e, kFormUdata = 0x0f,
                   kFormData16 = 0x1e, kFormLineStrp = 0x1f;
constexpr uint64_t kLnctPath = 1, kLnctDirectoryIndex = 2;

// Reads one attribute value of an entry format; strings come back in `str`, numbers in `num`.
bool read_form(Reader& r, uint64_t form, bool dwarf64, const LineSections& sec, const char*& str,
               uint64_t& num) {
  str = nullptr;
  num = 0;
  switch (form) {
    case kFormString:
      str = r.cstr();
      break;
    case kFormLineStrp:
      str = string_at(sec.line_str, r.fixed(dwarf64 ? 8 : 4));
      if (!str) return false;
      break;
    case kFormStrp:
      str = string_at(sec.str, r.fixed(dwarf64 ? 8 : 4));
      if (!str) return false;
      break;
    case kFormUdata:
      num = r.uleb();
      break;
    case kFormSdata:
      num = static_cast<uint64_t>(r.sleb());
      break;
    case kFormData1:
      num = r.fixed(1);
      break;
    case kFormData2:
      num = r.fixed(2);
      break;
    case kFormData4:
      num = r.fixed(4);
      break;
    case kFormData8:
      num = r.fixed(8);
      break;
    case kFormData16:
      r.skip(16);
      break;
    case kFormBlock:
      r.skip(r.uleb());
      break;
    case kFormBlock1:
      r.skip(r.fixed(1));
      break;
    case kFormBlock2:
      r.skip(r.fixed(2));
      break;
    case kFormBlock4:
      r.skip(r.fixed(4));
      break;
    default:
      return false;  // strx forms etc.: let libdw do it
  }
  return !r.bad;
}

// The unit header's fields the program needs; read_header() leaves the reader at the file tables, its end at
// the unit's end.
struct LineHeader {
  uint16_t version = 0;
  bool dwarf64 = false;
  const uint8_t* program = nullptr;
  const uint8_t* unit_end = nullptr;
  uint8_t min_inst = 0;
  int8_t line_base = 0;
  uint8_t line_range = 0, opcode_base = 0;
  std::vector<uint8_t> std_lengths;  // operands of each standard opcode
};

bool read_header(Reader& r, LineHeader& h) {
  uint64_t unit_length = r.fixed(4);
  if (unit_length == 0xffffffff) {
    h.dwarf64 = true;
    unit_length = r.fixed(8);
  }
  if (r.bad || unit_length > static_cast<uint64_t>(r.end - r.p)) return false;
  h.unit_end = r.p + unit_length;
  r.end = h.unit_end;
  h.version = static_cast<uint16_t>(r.fixed(2));
  if (h.version < 2 || h.version > 5) return false;
  uint8_t address_size = 8;
  if (h.version >= 5) {
    address_size = r.u8();
    r.u8();  // segment selector size
    if (address_size != 4 && address_size != 8) return false;
  }
  uint64_t header_length = r.fixed(h.dwarf64 ? 8 : 4);
  if (r.bad || header_length > static_cast<uint64_t>(r.end - r.p)) return false;
  h.program = r.p + header_length;
  h.min_inst = r.u8();
  if (h.version >= 4) r.u8();  // maximum operations per instruction (VLIW): treated as 1
  r.u8();                      // default_is_stmt
  h.line_base = static_cast<int8_t>(r.u8());
  h.line_range = r.u8();
  h.opcode_base = r.u8();
  if (r.bad || h.line_range == 0 || h.opcode_base == 0) return false;
  h.std_lengths.assign(h.opcode_base, 0);
  for (uint8_t i = 1; i < h.opcode_base; ++i) h.std_lengths[i] = r.u8();
  return true;
}

// Directories and files: dir + "/" + name unless name is absolute, then absolute_source_path().
class FileTable {
 public:
  FileTable(const char* comp_dir, std::deque<std::string>& store, std::vector<const char*>& files)
      : comp_dir_(comp_dir), store_(store), files_(files) {}

  // The header's tables: DWARF 2-4's lists, or DWARF 5's entry formats.
  bool read(Reader& r, const LineHeader& h, const LineSections& sec) {
    return h.version < 5 ? read_v4(r) : read_v5(r, h.dwarf64, sec);
  }
  void add_file(const char* name, uint64_t dir) {
    if (name == nullptr) {
      files_.push_back(nullptr);
      return;
    }
    std::string joined;
    if (name[0] != '/' && dir < dirs_.size() && dirs_[dir] != nullptr) {
      joined = dirs_[dir];
      joined += '/';
    }
    joined += name;
    std::string path = absolute_source_path(joined, comp_dir_);
    if (path == name) {
      files_.push_back(name);
      return;
    }
    files_.push_back(store_.emplace_back(std::move(path)).c_str());
  }

 private:
  bool read_v4(Reader& r) {
    dirs_.push_back(comp_dir_);
    for (;;) {
      const char* d = r.cstr();
      if (r.bad) return false;
      if (*d == '\0') break;
      dirs_.push_back(d);
    }
    files_.push_back(nullptr);  // file numbers start at 1
    for (;;) {
      const char* name = r.cstr();
      if (r.bad) return false;
      if (*name == '\0') break;
      uint64_t dir = r.uleb();
      r.uleb();  // mtime
      r.uleb();  // length
      add_file(name, dir);
    }
    return true;
  }
  bool read_v5(Reader& r, bool dwarf64, const LineSections& sec) {
    for (int pass = 0; pass < 2; ++pass) {  // 0: directories, 1: files
      uint8_t nformats = r.u8();
      std::vector<std::pair<uint64_t, uint64_t>> formats(nformats);
      for (auto& f : formats) {
        f.first = r.uleb();
        f.second = r.uleb();
      }
      uint64_t count = r.uleb();
      if (r.bad || count > static_cast<uint64_t>(r.end - r.p)) return false;
      for (uint64_t i = 0; i < count; ++i) {
        const char* path = nullptr;
        uint64_t dir = 0;
        for (auto [type, form] : formats) {
          const char* s;
          uint64_t n;
          if (!read_form(r, form, dwarf64, sec, s, n)) return false;
          if (type == kLnctPath) path = s;
          if (type == kLnctDirectoryIndex) dir = n;
        }
        if (pass == 0)
          dirs_.push_back(path);
        else
          add_file(path, dir);
      }
    }
    return true;
  }

  const char* comp_dir_;
  std::deque<std::string>& store_;
  std::vector<const char*>& files_;
  std::vector<const char*> dirs_;
};

// The line number program's registers and the rows it emits.
struct LineState {
  std::vector<DecodedRow>& rows;
  uint64_t addr = 0;
  uint64_t file = 1;
  int64_t line = 1;
  size_t seq_start = 0;

  void emit(bool end) {
    rows.push_back({addr, static_cast<uint32_t>(file), static_cast<uint32_t>(line < 0 ? 0 : line), end});
  }
  // Every line advance wraps: a malformed program can advance by anything (the row's line then reads as 0).
  void advance_line(int64_t by) {
    line = static_cast<int64_t>(static_cast<uint64_t>(line) + static_cast<uint64_t>(by));
  }
  void end_sequence() {
    // Rows at the end address cover nothing: mark them ended too (as libdw does), so that they never
    // shadow the first row of a sequence starting at that address.
    for (size_t k = rows.size(); k > seq_start && rows[k - 1].addr == addr && !rows[k - 1].end; --k)
      rows[k - 1].end = true;
    emit(true);
    addr = 0;
    file = 1;
    line = 1;
    seq_start = rows.size();
  }
};

// An extended opcode (after its 0): end_sequence, set_address, define_file; others are skipped.
bool extended_op(Reader& r, LineState& st, FileTable& files) {
  uint64_t len = r.uleb();
  if (r.bad || len == 0 || len > static_cast<uint64_t>(r.end - r.p)) return false;
  const uint8_t* next = r.p + len;
  uint8_t sub = r.u8();
  if (sub == 1) {  // end_sequence
    st.end_sequence();
  } else if (sub == 2) {  // set_address
    // An operand longer than 8 bytes is no x86-64 or aarch64 address (and would shift past 64 bits).
    if (len - 1 > 8) return false;
    st.addr = r.fixed(static_cast<size_t>(len - 1));
  } else if (sub == 3) {  // define_file (DWARF <= 4)
    const char* name = r.cstr();
    uint64_t dir = r.uleb();
    files.add_file(name, dir);
  }
  r.p = next;
  return true;
}

// The line number program (gcc writes about one row per 3 bytes of it: reserve, do not grow). One switch over
// the standard opcodes, which share the reader and the registers.
bool run_program(Reader& r, const LineHeader& h, FileTable& files, std::vector<DecodedRow>& rows) {
  r.p = h.program;
  rows.reserve(static_cast<size_t>(r.end - h.program) / 3 + 16);
  LineState st{rows};
  while (r.p < r.end) {
    uint8_t op = r.u8();
    if (op >= h.opcode_base) {
      uint8_t adj = static_cast<uint8_t>(op - h.opcode_base);
      st.addr += static_cast<uint64_t>(adj / h.line_range) * h.min_inst;
      st.advance_line(h.line_base + adj % h.line_range);
      st.emit(false);
      continue;
    }
    switch (op) {
      case 0:
        if (!extended_op(r, st, files)) return false;
        break;
      case 1:
        st.emit(false);
        break;  // copy
      case 2:
        st.addr += r.uleb() * h.min_inst;
        break;  // advance_pc
      case 3:
        st.advance_line(r.sleb());
        break;  // advance_line
      case 4:
        st.file = r.uleb();
        break;  // set_file
      case 5:
        r.uleb();
        break;  // set_column
      case 6:
      case 7:
      case 10:
      case 11:
        break;  // flags
      case 8:
        st.addr += static_cast<uint64_t>((255 - h.opcode_base) / h.line_range) * h.min_inst;
        break;
      case 9:
        st.addr += r.fixed(2);
        break;  // fixed_advance_pc
      case 12:
        r.uleb();
        break;  // set_isa
      default:
        for (uint8_t i = 0; i < h.std_lengths[op]; ++i) r.uleb();
        break;
    }
    if (r.bad) return false;
  }
  return true;
}

}  // namespace

std::string absolute_source_path(std::string_view path, const char* comp_dir) {
  std::filesystem::path p(path);
  if (p.is_relative()) {
    if (comp_dir == nullptr || comp_dir[0] != '/') return std::string(path);
    p = std::filesystem::path(comp_dir) / p;
  }
  return p.lexically_normal().string();
}

bool decode_line_program(const LineSections& sec, uint64_t offset, const char* comp_dir,
                         std::deque<std::string>& store, std::vector<const char*>& files,
                         std::vector<DecodedRow>& rows) {
  files.clear();
  rows.clear();
  if (offset >= sec.line.size()) return false;
  Reader r{sec.line.data() + offset, sec.line.data() + sec.line.size()};
  LineHeader h;
  if (!read_header(r, h)) return false;
  FileTable table(comp_dir, store, files);
  if (!table.read(r, h, sec)) return false;
  if (r.bad || h.program > h.unit_end) return false;
  return run_program(r, h, table, rows);
}

}  // namespace fxprof::symbolizer
