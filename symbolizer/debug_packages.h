// fxprof symbolizer: which Debian package to install for the debug files fxprof found missing. A binary
// without its debug file is named from its symbol table only (no files, lines or inlined frames); the user
// wants the package's name, once, not the folders that were searched (those stay in the data-quality notes).
#pragma once

#include <span>
#include <string>
#include <vector>

namespace fxprof::symbolizer {

// The packages that hold the debug files of `binaries` (absolute paths), sorted and once each: the package
// that owns each binary in dpkg's file lists, as "<package>-dbgsym" (Debian's debian-debug archive), libc6's
// own "libc6-dbg". A binary no package owns (built here, a container's) has none. The lists are read
// directly (~9 MB, ~25 ms here; `dpkg-query -S` took 400 ms); a list that is not a regular file owned by root
// and writable only by it is not trusted.
std::vector<std::string> debug_packages(std::span<const std::string> binaries,
                                        const std::string& dpkg_info = "/var/lib/dpkg/info");

}  // namespace fxprof::symbolizer
