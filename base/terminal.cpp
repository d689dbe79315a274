#include "base/terminal.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace fxprof {
namespace {

void hex_byte(std::string& out, unsigned char c) {
  char buf[5];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out += buf;
}

// The length of the valid UTF-8 sequence at `s` (2-4), or 0.
size_t utf8_length(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char c = b(0);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i)
    if ((b(i) & 0xC0) != 0x80) return 0;
  // Overlong forms, surrogates and code points beyond U+10FFFF.
  if (n == 3 && ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) >= 0xA0))) return 0;
  if (n == 4 && ((c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) >= 0x90))) return 0;
  return n;
}

}  // namespace

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x80) {
      switch (c) {
        case '\n':
          out += "\\n";
          break;
        case '\t':
          out += "\\t";
          break;
        case '\r':
          out += "\\r";
          break;
        case 0x1B:
          out += "\\e";
          break;
        default:
          hex_byte(out, c);
      }
      ++i;
    } else if (const size_t n = utf8_length(text.substr(i)); n == 0) {
      hex_byte(out, c);
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(text[i + 1]));  // U+0080..U+009F
      out += buf;
      i += 2;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

namespace {

// Where the URL starting at `at` ends: at whitespace, a quote or an angle bracket (how messages quote them),
// without the punctuation of the sentence around it.
size_t url_end(std::string_view text, size_t at) {
  size_t end = at;
  while (end < text.size() && static_cast<unsigned char>(text[end]) > 0x20 && text[end] != '"' &&
         text[end] != '\'' && text[end] != '<' && text[end] != '>')
    ++end;
  while (end > at && std::string_view(".,:;)").find(text[end - 1]) != std::string_view::npos) --end;
  return end;
}

// One URL with its query and user information hidden.
std::string redact_url(std::string_view url) {
  std::string out;
  const size_t scheme = url.find("://") + 3;
  std::string_view rest = url.substr(scheme);
  out.append(url.substr(0, scheme));
  const size_t host_end = std::min(rest.find('/'), rest.find('?'));
  if (const size_t at = rest.substr(0, std::min(host_end, rest.size())).rfind('@');
      at != std::string_view::npos) {
    out += "<redacted>@";
    rest.remove_prefix(at + 1);
  }
  const size_t query = std::min(rest.find('?'), rest.find('#'));
  // "?" alone: already redacted ("?<redacted>" ends the URL at '<'), or nothing to hide.
  if (query == std::string_view::npos || query + 1 == rest.size()) return out.append(rest);
  out.append(rest.substr(0, query));
  return out += rest[query] == '?' ? "?<redacted>" : "";
}

}  // namespace

std::string redact_urls(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    size_t next = std::string_view::npos;
    for (std::string_view scheme : {"http://", "https://"}) next = std::min(next, text.find(scheme, i));
    if (next == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, next - i));
    const size_t end = url_end(text, next);
    out += redact_url(text.substr(next, end - next));
    i = end;
  }
  return out;
}

void say(std::string_view line) {
  std::string out = "fxprof: " + terminal_safe(redact_urls(line)) + "\n";
  for (std::string_view rest = out; !rest.empty();) {
    const ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n <= 0) break;
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace fxprof
