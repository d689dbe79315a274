// Demangling. C++ goes through the C++ runtime's own demangler; Rust legacy symbols are decoded here (they
// are Itanium-shaped but carry a hash and $-escapes the C++ demangler would print raw); Rust v0 symbols are
// decoded by a small recursive-descent parser of the grammar in Rust RFC 2603, printed like rustc-demangle's
// alternate form (no crate disambiguators, no hashes).
#include "symbolizer/demangle.h"

#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <memory>

namespace fxprof::symbolizer {
namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// ---- Rust legacy: _ZN <len><ident>... E, the last ident being h<16 hex digits>.
bool rust_legacy(std::string_view s, std::string& out) {
  if (s.size() < 5 || s.substr(0, 3) != "_ZN") return false;
  size_t i = 3;
  std::string_view parts[64];
  size_t n = 0;
  while (i < s.size() && s[i] != 'E') {
    size_t len = 0;
    if (s[i] < '0' || s[i] > '9') return false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      len = len * 10 + static_cast<size_t>(s[i] - '0');
      if (len > s.size()) return false;
      ++i;
    }
    if (len == 0 || i + len > s.size() || n == 64) return false;
    parts[n++] = s.substr(i, len);
    i += len;
  }
  if (i >= s.size() || n < 2) return false;
  std::string_view hash = parts[n - 1];
  if (hash.size() != 17 || hash[0] != 'h') return false;
  for (char c : hash.substr(1))
    if (!is_hex(c)) return false;
  out.clear();
  for (size_t k = 0; k + 1 < n; ++k) {
    if (k) out += "::";
    std::string_view p = parts[k];
    if (p.size() >= 2 && p[0] == '_' && p[1] == '$') p.remove_prefix(1);
    for (size_t j = 0; j < p.size();) {
      if (p[j] == '$') {
        size_t end = p.find('$', j + 1);
        if (end == std::string_view::npos) return false;
        std::string_view esc = p.substr(j + 1, end - j - 1);
        static constexpr std::pair<std::string_view, char> kEsc[] = {{"SP", '@'}, {"BP", '*'}, {"RF", '&'},
                                                                     {"LT", '<'}, {"GT", '>'}, {"LP", '('},
                                                                     {"RP", ')'}, {"C", ','}};
        bool done = false;
        for (auto [k2, c] : kEsc)
          if (esc == k2) {
            out += c;
            done = true;
          }
        if (!done) {
          if (esc.size() < 2 || esc[0] != 'u') return false;
          uint32_t cp = 0;
          for (char c : esc.substr(1)) {
            if (!is_hex(c)) return false;
            cp = cp * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
          }
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
        }
        j = end + 1;
      } else if (p[j] == '.' && j + 1 < p.size() && p[j + 1] == '.') {
        out += "::";
        j += 2;
      } else {
        out += p[j++];
      }
    }
  }
  return true;
}

// ---- Rust v0.
class V0 {
 public:
  explicit V0(std::string_view s) : s_(s) {}

  bool run(std::string& out) {
    // "_R" already checked by the caller; an optional encoding version (decimal) follows.
    pos_ = 2;
    if (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') return false;  // only version 0 exists
    out_ = &out;
    if (!path(true)) return false;
    // An instantiating crate may follow (a path, not printed); then an optional vendor suffix.
    if (pos_ < s_.size() && s_[pos_] >= 'A' && s_[pos_] <= 'Z') {
      std::string ignored;
      std::string* saved = out_;
      out_ = &ignored;
      bool ok = path(false);
      out_ = saved;
      if (!ok) return false;
    }
    return pos_ == s_.size() || s_[pos_] == '.' || s_[pos_] == '$';
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  std::string* out_ = nullptr;
  int depth_ = 0;
  uint32_t bound_lifetimes_ = 0;

  struct Guard {
    explicit Guard(V0& v) : v_(v) { ++v_.depth_; }
    ~Guard() { --v_.depth_; }
    V0& v_;
  };

  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  char next() { return pos_ < s_.size() ? s_[pos_++] : '\0'; }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void put(std::string_view t) { out_->append(t); }

  bool base62(uint64_t& v) {
    if (eat('_')) {
      v = 0;
      return true;
    }
    uint64_t x = 0;
    for (;;) {
      char c = next();
      if (c == '_') break;
      uint64_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<uint64_t>(c - '0');
      else if (c >= 'a' && c <= 'z')
        d = 10 + static_cast<uint64_t>(c - 'a');
      else if (c >= 'A' && c <= 'Z')
        d = 36 + static_cast<uint64_t>(c - 'A');
      else
        return false;
      if (x > (UINT64_MAX - d) / 62) return false;
      x = x * 62 + d;
    }
    if (x == UINT64_MAX) return false;
    v = x + 1;
    return true;
  }
  bool opt_base62(char tag, uint64_t& v) {
    v = 0;
    if (!eat(tag)) return true;
    if (!base62(v)) return false;
    ++v;
    return true;
  }
  bool decimal(uint64_t& v) {
    char c = peek();
    if (c < '0' || c > '9') return false;
    v = 0;
    if (c == '0') {
      ++pos_;
      return true;
    }
    while (peek() >= '0' && peek() <= '9') {
      if (v > UINT64_MAX / 10 - 9) return false;
      v = v * 10 + static_cast<uint64_t>(next() - '0');
    }
    return true;
  }
  // undisambiguated-identifier; sets `punycode` when it is Punycode-encoded (printed raw).
  bool ident(std::string_view& name, bool& punycode) {
    punycode = eat('u');
    uint64_t len;
    if (!decimal(len)) return false;
    eat('_');
    if (len > s_.size() - pos_) return false;
    name = s_.substr(pos_, len);
    pos_ += len;
    return true;
  }
  void put_ident(std::string_view name, bool punycode) {
    if (punycode) {
      put("punycode{");
      put(name);
      put("}");
    } else {
      put(name);
    }
  }

  // Follows a backref: runs `f` with the position moved to the target, then restores it.
  template <class F>
  bool backref(F&& f) {
    size_t start = pos_ - 1;  // at 'B'
    uint64_t target;
    if (!base62(target)) return false;
    target += 2;                        // offsets count from after "_R"
    if (target >= start) return false;  // only backwards references
    size_t saved = pos_;
    pos_ = static_cast<size_t>(target);
    bool ok = f();
    pos_ = saved;
    return ok;
  }

  bool path(bool in_value) {
    Guard g(*this);
    if (depth_ > 200) return false;
    char tag = next();
    switch (tag) {
      case 'C': {
        uint64_t dis;
        if (!opt_base62('s', dis)) return false;
        std::string_view name;
        bool puny;
        if (!ident(name, puny)) return false;
        put_ident(name, puny);
        return true;
      }
      case 'N': {
        char ns = next();
        if (!((ns >= 'a' && ns <= 'z') || (ns >= 'A' && ns <= 'Z'))) return false;
        if (!path(in_value)) return false;
        uint64_t dis;
        if (!opt_base62('s', dis)) return false;
        std::string_view name;
        bool puny;
        if (!ident(name, puny)) return false;
        if (ns >= 'A' && ns <= 'Z') {
          put("::{");
          if (ns == 'C')
            put("closure");
          else if (ns == 'S')
            put("shim");
          else
            out_->push_back(ns);
          if (!name.empty()) {
            put(":");
            put_ident(name, puny);
          }
          put("#");
          put(std::to_string(dis));
          put("}");
        } else if (!name.empty()) {
          put("::");
          put_ident(name, puny);
        }
        return true;
      }
      case 'M': {
        uint64_t dis;
        if (!opt_base62('s', dis)) return false;
        if (!skip_path()) return false;
        put("<");
        if (!type()) return false;
        put(">");
        return true;
      }
      case 'X': {
        uint64_t dis;
        if (!opt_base62('s', dis)) return false;
        if (!skip_path()) return false;
        [[fallthrough]];
      }
      case 'Y': {
        put("<");
        if (!type()) return false;
        put(" as ");
        if (!path(false)) return false;
        put(">");
        return true;
      }
      case 'I': {
        if (!path(in_value)) return false;
        if (in_value) put("::");
        put("<");
        for (int i = 0; !eat('E'); ++i) {
          if (pos_ >= s_.size()) return false;
          if (i) put(", ");
          if (!generic_arg()) return false;
        }
        put(">");
        return true;
      }
      case 'B':
        return backref([&] { return path(in_value); });
      default:
        return false;
    }
  }

  // Parses a path without printing it (the impl-path of M and X, which rustc-demangle does not print).
  bool skip_path() {
    std::string ignored;
    std::string* saved = out_;
    out_ = &ignored;
    bool ok = path(false);
    out_ = saved;
    return ok;
  }

  bool lifetime_name(uint64_t lt) {
    if (lt == 0) {
      put("'_");
      return true;
    }
    if (lt > bound_lifetimes_) return false;
    uint64_t depth = bound_lifetimes_ - lt;
    if (depth < 26) {
      put("'");
      out_->push_back(static_cast<char>('a' + depth));
    } else {
      put("'_");
      put(std::to_string(depth));
    }
    return true;
  }

  bool generic_arg() {
    if (eat('L')) {
      uint64_t lt;
      return base62(lt) && lifetime_name(lt);
    }
    if (eat('K')) return constant();
    return type();
  }

  // binder = "G" base62: that many lifetimes become bound for the following item.
  bool binder(uint32_t& added) {
    uint64_t n;
    added = 0;
    if (!opt_base62('G', n)) return false;
    if (n > 1000) return false;
    added = static_cast<uint32_t>(n);
    if (n) {
      put("for<");
      for (uint32_t i = 0; i < n; ++i) {
        if (i) put(", ");
        ++bound_lifetimes_;
        lifetime_name(1);
      }
      put("> ");
    }
    return true;
  }

  static const char* basic(char c) {
    switch (c) {
      case 'a':
        return "i8";
      case 'b':
        return "bool";
      case 'c':
        return "char";
      case 'd':
        return "f64";
      case 'e':
        return "str";
      case 'f':
        return "f32";
      case 'h':
        return "u8";
      case 'i':
        return "isize";
      case 'j':
        return "usize";
      case 'l':
        return "i32";
      case 'm':
        return "u32";
      case 'n':
        return "i128";
      case 'o':
        return "u128";
      case 's':
        return "i16";
      case 't':
        return "u16";
      case 'u':
        return "()";
      case 'v':
        return "...";
      case 'x':
        return "i64";
      case 'y':
        return "u64";
      case 'z':
        return "!";
      case 'p':
        return "_";
      default:
        return nullptr;
    }
  }

  bool type() {
    Guard g(*this);
    if (depth_ > 200) return false;
    char c = peek();
    if (const char* b = basic(c)) {
      ++pos_;
      put(b);
      return true;
    }
    switch (c) {
      case 'R':
      case 'Q': {
        ++pos_;
        put(c == 'R' ? "&" : "&mut ");
        if (eat('L')) {
          uint64_t lt;
          if (!base62(lt)) return false;
          if (lt != 0) {
            if (!lifetime_name(lt)) return false;
            put(" ");
          }
        }
        // "&mut " already has its space; a lifetime goes between & and mut in Rust, close enough here.
        return type();
      }
      case 'P':
      case 'O':
        ++pos_;
        put(c == 'P' ? "*const " : "*mut ");
        return type();
      case 'A':
        ++pos_;
        put("[");
        if (!type()) return false;
        put("; ");
        if (!constant()) return false;
        put("]");
        return true;
      case 'S':
        ++pos_;
        put("[");
        if (!type()) return false;
        put("]");
        return true;
      case 'T': {
        ++pos_;
        put("(");
        int n = 0;
        for (; !eat('E'); ++n) {
          if (pos_ >= s_.size()) return false;
          if (n) put(", ");
          if (!type()) return false;
        }
        if (n == 1) put(",");
        put(")");
        return true;
      }
      case 'F': {
        ++pos_;
        uint32_t saved = bound_lifetimes_;
        uint32_t added;
        if (!binder(added)) return false;
        if (eat('U')) put("unsafe ");
        if (eat('K')) {
          put("extern \"");
          if (eat('C')) {
            put("C");
          } else {
            std::string_view abi;
            bool puny;
            if (!ident(abi, puny)) return false;
            for (char ch : abi) out_->push_back(ch == '_' ? '-' : ch);
          }
          put("\" ");
        }
        put("fn(");
        for (int n = 0; !eat('E'); ++n) {
          if (pos_ >= s_.size()) return false;
          if (n) put(", ");
          if (!type()) return false;
        }
        put(")");
        if (eat('u')) {
          // unit return type: not printed
        } else {
          put(" -> ");
          if (!type()) return false;
        }
        bound_lifetimes_ = saved;
        return true;
      }
      case 'D': {
        ++pos_;
        put("dyn ");
        uint32_t saved = bound_lifetimes_;
        uint32_t added;
        if (!binder(added)) return false;
        for (int n = 0; !eat('E'); ++n) {
          if (pos_ >= s_.size()) return false;
          if (n) put(" + ");
          if (!dyn_trait()) return false;
        }
        bound_lifetimes_ = saved;
        if (!eat('L')) return false;
        uint64_t lt;
        if (!base62(lt)) return false;
        if (lt != 0) {
          put(" + ");
          if (!lifetime_name(lt)) return false;
        }
        return true;
      }
      case 'B':
        ++pos_;
        return backref([&] { return type(); });
      default:
        return path(false);
    }
  }

  bool dyn_trait() {
    // A path, possibly generic ("I ... E"), followed by associated type bindings printed inside its <>.
    size_t before = out_->size();
    if (!path(false)) return false;
    bool open = false;
    while (eat('p')) {
      if (!open) {
        if (!out_->empty() && out_->size() > before && out_->back() == '>') {
          out_->pop_back();
          put(", ");
        } else {
          put("<");
        }
        open = true;
      } else {
        put(", ");
      }
      std::string_view name;
      bool puny;
      if (!ident(name, puny)) return false;
      put_ident(name, puny);
      put(" = ");
      if (!type()) return false;
    }
    if (open) put(">");
    return true;
  }

  bool constant() {
    Guard g(*this);
    if (depth_ > 200) return false;
    if (eat('p')) {
      put("_");
      return true;
    }
    if (eat('B')) return backref([&] { return constant(); });
    char t = next();
    switch (t) {
      case 'h':
      case 't':
      case 'm':
      case 'y':
      case 'o':
      case 'j':
      case 'a':
      case 's':
      case 'l':
      case 'x':
      case 'n':
      case 'i': {
        bool neg = eat('n');
        uint64_t v = 0;
        size_t digits = 0;
        while (peek() != '_') {
          char c = next();
          if (!is_hex(c)) return false;
          if (++digits > 16) return false;  // wider than 64 bits: give up rather than print wrong digits
          v = v * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        ++pos_;
        if (neg) put("-");
        put(std::to_string(v));
        return true;
      }
      case 'b': {
        if (eat('0') && eat('_')) {
          put("false");
          return true;
        }
        if (eat('1') && eat('_')) {
          put("true");
          return true;
        }
        return false;
      }
      case 'c': {
        uint64_t v = 0;
        while (peek() != '_') {
          char c = next();
          if (!is_hex(c)) return false;
          v = v * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
          if (v > 0x10FFFF) return false;
        }
        ++pos_;
        put("'");
        if (v >= 0x20 && v < 0x7f && v != '\'' && v != '\\') {
          out_->push_back(static_cast<char>(v));
        } else {
          char buf[16];
          std::snprintf(buf, sizeof buf, "\\u{%llx}", static_cast<unsigned long long>(v));
          put(buf);
        }
        put("'");
        return true;
      }
      default:
        return false;
    }
  }
};

std::string cxx_demangle(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                &std::free);
  if (status == 0 && d) return d.get();
  return {};
}

}  // namespace

std::string demangle_rust_v0(std::string_view mangled) {
  if (mangled.size() < 3 || mangled.substr(0, 2) != "_R") return {};
  std::string out;
  V0 v0(mangled);
  if (!v0.run(out)) return {};
  return out;
}

std::string demangle(std::string_view mangled) {
  std::string_view suffix;
  if (mangled.size() > 4 && mangled.substr(mangled.size() - 4) == "@plt") {
    suffix = "@plt";
    mangled.remove_suffix(4);
  }
  std::string out;
  if (mangled.size() > 2 && mangled[0] == '_' && mangled[1] == 'R') {
    out = demangle_rust_v0(mangled);
  } else if (mangled.size() > 3 && mangled.substr(0, 3) == "_ZN") {
    // Legacy Rust symbols may carry an LLVM suffix (".llvm.123") after the final E.
    if (!rust_legacy(mangled, out)) {
      out.clear();
      for (size_t dot = mangled.find("E."); dot != std::string_view::npos;
           dot = mangled.find("E.", dot + 1)) {
        if (rust_legacy(mangled.substr(0, dot + 1), out)) break;
        out.clear();
      }
    }
  }
  if (out.empty() && mangled.size() > 2 && mangled[0] == '_' && mangled[1] == 'Z') {
    std::string z(mangled);
    out = cxx_demangle(z.c_str());
  }
  if (out.empty()) out.assign(mangled);
  out.append(suffix);
  return out;
}

}  // namespace fxprof::symbolizer
