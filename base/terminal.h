// fxprof base: text from a profile file made safe to print on a terminal. Names and thread names come from
// files people send each other: an escape sequence in one would clear the screen, recolour it or write the
// clipboard (OSC 52). Every terminal printer (report, diff, record's summary) passes them through here, and
// every message line goes out through say(): nothing another party wrote (a profile, a server's answer, a
// command line) reaches the terminal as control bytes, and no URL's credentials reach it at all.
#pragma once

#include <string>
#include <string_view>

namespace fxprof {

// `text` with control characters shown escaped: C0 and DEL as \n, \t, \r, \e or \xNN; C1 (U+0080..U+009F,
// which some terminals take as CSI, OSC...) as \u0080..\u009f; bytes that are not UTF-8 as \xNN. A backslash
// stays as it is. Printable text, UTF-8 included, is unchanged.
std::string terminal_safe(std::string_view text);

// `text` with the secrets of every http(s) URL in it hidden: the query string (a presigned URL's signature,
// tokens) becomes "?<redacted>" and a user:password@ part "<redacted>@". The rest of the URL stays, so a
// message still says which host and path failed.
std::string redact_urls(std::string_view text);

// The one printer of message lines: "fxprof: " + terminal_safe(redact_urls(line)) + "\n" on stderr, written
// in one call (lines from threads do not interleave).
void say(std::string_view line);

}  // namespace fxprof
