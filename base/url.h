// fxprof base: URLs every command builds: the Firefox Profiler's origin and percent-encoding.
#pragma once

#include <string>
#include <string_view>

namespace fxprof {

// The Firefox Profiler to open profiles in: $PROFILER_URL (a self-hosted one) or
// https://profiler.firefox.com, without a trailing '/'.
std::string profiler_origin();

// Percent-encodes every byte but RFC 3986's unreserved characters (A-Z a-z 0-9 - _ . ~): safe for a
// query value and for a URL inside a URL's path (the front end's from-url/).
std::string url_encode(std::string_view s);

}  // namespace fxprof
