// fxprof base: text from a profile file made safe to print on a terminal. Names and thread names come from
// files people send each other: an escape sequence in one would clear the screen, recolour it or write the
// clipboard (OSC 52). Every terminal printer (report, diff, record's summary) passes them through here.
#pragma once

#include <string>
#include <string_view>

namespace fxprof {

// `text` with control characters shown escaped: C0 and DEL as \n, \t, \r, \e or \xNN; C1 (U+0080..U+009F,
// which some terminals take as CSI, OSC...) as \u0080..\u009f; bytes that are not UTF-8 as \xNN. A backslash
// stays as it is. Printable text, UTF-8 included, is unchanged.
std::string terminal_safe(std::string_view text);

}  // namespace fxprof
