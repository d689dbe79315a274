// The URLs the server prints and the token in them.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdlib>

#include "base/url.h"
#include "server/http_impl.h"

namespace fxprof::server {

std::string host_for_url(const std::string& address) {
  // An unspecified address is not a place a browser can go: name one of this machine's own addresses
  // (the first non-loopback one; loopback when there is none).
  if (address == "0.0.0.0" || address.empty() || address == "::" || address == "[::]") {
    bool v6 = address == "::" || address == "[::]";
    std::string found;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
        if (!a->ifa_addr || (a->ifa_flags & IFF_LOOPBACK) || !(a->ifa_flags & IFF_UP)) continue;
        char buf[INET6_ADDRSTRLEN] = {};
        if (a->ifa_addr->sa_family == AF_INET) {
          inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
          found = buf;
        }
      }
      freeifaddrs(list);
    }
    if (!found.empty()) return found;
    return v6 ? "[::1]" : "127.0.0.1";
  }
  if (address.find(':') != std::string::npos && address.front() != '[') return "[" + address + "]";
  return address;
}

std::string random_token() {
  unsigned char bytes[24];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::abort();  // no entropy source on Linux >= 3.17 is not a state we can serve safely in
    }
    got += static_cast<size_t>(n);
  }
  // 32 symbols that read unambiguously in a URL (nix's choice of dropping e, o, t, u).
  static constexpr char kAlphabet[] = "0123456789abcdfghijklmnpqrsvwxyz";
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += kAlphabet[(buffer >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += kAlphabet[(buffer << (5 - bits)) & 31];
  return out;  // 192 bits -> 39 characters
}

std::string firefox_profiler_url(std::string_view profile_url, std::string_view symbol_server,
                                 std::string_view view) {
  std::string url = from_url_link(profile_url, "/?symbolServer=" + url_encode(symbol_server));
  if (!view.empty()) url.append("&").append(view);
  return url;
}

}  // namespace fxprof::server
