// fxprof recorder: the machine a recording ran on, for the profile's meta: the Firefox Profiler's Gecko
// importer keeps CPUName, physicalCPUs, logicalCPUs, oscpu and platform and shows them in the Profile Info
// panel ("Platform"); mainMemory and arguments are written too (the processed format has them; the Gecko
// importer of today drops them, and `fxprof report` prints them).
#pragma once

#include <string_view>

#include "model/profile.h"

namespace fxprof::recorder {

// Fills meta.machine from the texts of /proc/cpuinfo and /proc/meminfo (either may be empty) and uname.
void describe_machine(std::string_view cpuinfo, std::string_view meminfo, model::Meta& meta);

}  // namespace fxprof::recorder
