// fxprof base: URLs every command builds: the Firefox Profiler's origin and percent-encoding.
#pragma once

#include <string>
#include <string_view>

namespace fxprof {

// The Firefox Profiler to open profiles in: $PROFILER_URL (a self-hosted one) or
// https://profiler.firefox.com, without a trailing '/'.
std::string profiler_origin();

// Percent-encodes every byte but RFC 3986's unreserved characters (A-Z a-z 0-9 - _ . ~): safe for a
// query value and for a URL inside a URL's path (the front end's from-url/). The one encoder of fxprof;
// `keep` are more characters left as they are ("/" for a file path in a file:// URL).
std::string url_encode(std::string_view s, std::string_view keep = {});

// <profiler origin>/from-url/<url_encode(profile_url)><tail>: what opens the profile at `profile_url`;
// `tail` is the front end's path and query after it ("/", "/?symbolServer=...", "/calltree/?thread=1").
std::string from_url_link(std::string_view profile_url, std::string_view tail = "/");

}  // namespace fxprof
