// fxprof gecko, the Gecko reader: a thread's stack and frame tables, and its frames as the model's.
#include <algorithm>
#include <string>

#include "base/hex.h"
#include "gecko/gecko.h"
#include "gecko/gecko_reader_internal.h"

namespace fxprof::gecko::internal {

struct Reader::StackRow {
  ThreadTables& tt;
  Reader& r;
  int64_t cp, cf;
  int64_t prefix = -1, frame = -1;
  void begin() { prefix = frame = -1; }
  bool cell(size_t i, od::value c) {
    const auto ii = static_cast<int64_t>(i);
    if (ii == cp) return r.integer(c, prefix);
    if (ii == cf) return r.integer(c, frame);
    return true;
  }
  bool end() {
    // Out of 32 bits: a prefix that is not before its stack, a frame out of range (finish_thread says so).
    const auto narrow = [](int64_t v) {
      return v < 0 ? -1 : static_cast<int32_t>(std::min<int64_t>(v, INT32_MAX));
    };
    tt.stacks.emplace_back(narrow(prefix), frame > INT32_MAX ? -1 : narrow(frame));
    return true;
  }
};

// Streamed in batches of rows (a --heap=full profile's 1M stacks: 17 MB of text).
bool Reader::stacks(ThreadTables& tt) {
  return table(tt.stack_schema, [&] {
    StackRow row{tt, *this, tt.stack_schema.at("prefix"), tt.stack_schema.at("frame")};
    if (row.cp < 0 || row.cf < 0) return bad("a stackTable without prefix or frame columns");
    return batched_rows(row, [&](size_t n) {
      if (tt.stacks.capacity() < tt.stacks.size() + n)
        tt.stacks.reserve(std::max(tt.stacks.size() + n, tt.stacks.capacity() * 2));
    });
  });
}

bool Reader::read_frames(od::value v, ThreadTables& tt) {
  return fields(v, [&](std::string_view k, od::value f) {
    if (k == "schema") return schema(f, tt.frame_schema);
    if (k != "data") return true;
    const Schema& s = tt.frame_schema;
    if (s.at("location") < 0) return bad("a frameTable without a location column");
    struct Row {
      Reader& r;
      ThreadTables& tt;
      int64_t cl, cline, ccat, cfile, cdepth, caddr;
      LocalFrame fr;
      void begin() { fr = {}; }
      bool cell(size_t i, od::value c) {
        const auto ii = static_cast<int64_t>(i);
        if (ii == cl) return r.integer(c, fr.location);
        if (ii == cline) return r.integer(c, fr.line, 0);
        if (ii == ccat) return r.integer(c, fr.category, -1);
        if (ii == cfile) return r.integer(c, fr.file, -1);
        if (ii == cdepth) return r.integer(c, fr.depth, 0);
        if (ii == caddr) {
          od::json_type ty;
          if (auto e = c.type().get(ty)) return r.set(e);
          if (ty != od::json_type::number) return true;
          fr.has_address = true;
          return r.u64(c, fr.address);
        }
        return true;
      }
      bool end() {
        tt.frames.push_back(fr);
        return true;
      }
    } row{*this,
          tt,
          s.at("location"),
          s.at("line"),
          s.at("category"),
          s.at(kFileColumn),
          s.at(kInlineDepthColumn),
          s.at(kAddressColumn),
          {}};
    return rows(f, s, row);
  });
}

// The binary a process's lib named `name` belongs to (a new one if the process has no such lib).
model::BinaryId Reader::binary_named(const model::Process& proc, std::string_view name) {
  for (const model::Lib& l : proc.libs)
    if (l.name == name || (l.name.empty() && l.debug_name == name)) return p_.intern_binary(l);
  model::Lib l;
  l.name = name;
  return p_.intern_binary(l);
}

// "0x..." (the prefix is what tells an unsymbolicated address from a name).
bool Reader::parse_address(std::string_view s, uint64_t& out) {
  return s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && parse_hex(s, out);
}

model::FrameId Reader::make_frame(const model::Process& proc, const ThreadTables& tt, const LocalFrame& lf) {
  std::string_view loc = tt.strings[static_cast<size_t>(lf.location)];
  model::Frame f;
  f.category = static_cast<model::Category>(lf.category >= 0 && lf.category < 256 ? lf.category : 0);
  uint64_t addr = 0;
  if (parse_address(loc, addr)) {
    f.kind = model::FrameKind::Native;
    f.address = addr;
    return p_.frames.intern(f);
  }
  // "name (in lib)": kernel frames, pre-symbolicated native ones, unresolved "0x<rel> (in lib)".
  if (loc.size() > 6 && loc.back() == ')') {
    size_t in = loc.rfind(" (in ");
    if (in != std::string_view::npos) {
      std::string_view fn = loc.substr(0, in), lib = loc.substr(in + 5, loc.size() - in - 6);
      if (lib == "[kernel.kallsyms]") {
        f.kind = model::FrameKind::Kernel;
        f.name = p_.strings.intern(fn);
        return p_.frames.intern(f);
      }
      f.kind = model::FrameKind::Native;
      f.binary = binary_named(proc, lib);
      if (parse_address(fn, addr)) {
        f.address = addr;
      } else {
        f.name = p_.strings.intern(fn);
        f.address = lf.has_address ? lf.address : 0;
        f.line = lf.line > 0 && lf.line < UINT32_MAX ? static_cast<uint32_t>(lf.line) : 0;
        if (lf.file >= 0 && static_cast<size_t>(lf.file) < tt.strings.size())
          f.file = p_.strings.intern(tt.strings[static_cast<size_t>(lf.file)]);
        f.inline_depth = static_cast<uint8_t>(std::clamp<int64_t>(lf.depth, 0, 255));
      }
      return p_.frames.intern(f);
    }
  }
  f.kind = model::FrameKind::Label;
  f.name = p_.strings.intern(loc);
  return p_.frames.intern(f);
}

}  // namespace fxprof::gecko::internal
