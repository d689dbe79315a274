// The Firefox Profiler's public store and a user's own store (share/share.h).
#include <simdjson.h>

#include "base/url.h"
#include "share/http.h"
#include "share/share.h"

namespace fxprof::share {
namespace {

// base64url (RFC 4648 §5) without padding, as JWTs are written; nullopt-like empty on a bad character.
bool base64url_decode(std::string_view in, std::string& out) {
  uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z')
      v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z')
      v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9')
      v = ch - '0' + 52;
    else if (ch == '-' || ch == '+')
      v = 62;
    else if (ch == '_' || ch == '/')
      v = 63;
    else if (ch == '=')
      break;
    else
      return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

}  // namespace

Result<std::string> token_from_jwt(std::string_view jwt) {
  while (!jwt.empty() && (jwt.back() == '\n' || jwt.back() == '\r' || jwt.back() == ' '))
    jwt.remove_suffix(1);
  const size_t a = jwt.find('.');
  const size_t b = a == std::string_view::npos ? a : jwt.find('.', a + 1);
  std::string payload;
  if (b == std::string_view::npos || !base64url_decode(jwt.substr(a + 1, b - a - 1), payload))
    return Err("the upload service's answer is not a token (a JWT)");
  simdjson::ondemand::parser parser;
  simdjson::padded_string text(payload);
  std::string_view token;
  auto doc = parser.iterate(text);
  if (doc.error() || doc["profileToken"].get_string().get(token) || token.empty())
    return Err("the upload service's token has no profileToken");
  for (char ch : token)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_')
      return Err("the upload service's profileToken has unexpected characters");
  return std::string(token);
}

std::string public_link(const std::string& token) { return profiler_origin() + "/public/" + token + "/"; }

Result<std::string> upload_public(const std::string& upload_origin, std::string_view gzip) {
  std::string origin = upload_origin;
  while (!origin.empty() && origin.back() == '/') origin.pop_back();
  HttpRequest req;
  req.url = origin + "/compressed-store";
  req.headers = {"Accept: application/vnd.firefox-profiler+json;version=1.0",
                 "Content-Type: application/octet-stream"};
  req.body = gzip;
  auto res = send(req);
  if (!res) return std::move(res).take_error();
  if (res->status < 200 || res->status > 299)
    return Err("upload refused by " + origin + ": " + describe_answer(*res));
  return token_from_jwt(res->body);
}

Status put_profile(const std::string& url, std::string_view body, const std::vector<std::string>& headers) {
  HttpRequest req;
  req.method = "PUT";
  req.url = url;
  req.headers = headers;
  req.headers.push_back("Content-Type: application/gzip");
  req.body = body;
  auto res = send(req);
  if (!res) return std::move(res).take_error();
  if (res->status < 200 || res->status > 299)
    return Err("the store refused the profile: " + describe_answer(*res));
  return {};
}

}  // namespace fxprof::share
