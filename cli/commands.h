// fxprof command line: one function per subcommand; each parses its options by its table (cli/options.h),
// prints `fxprof: <message>` on errors and returns the process exit status.
#pragma once

#include <span>

namespace fxprof::cli {

int cmd_record(std::span<char*> args);       // cli/cmd_record.cpp
int cmd_import(std::span<char*> args);       // cli/cmd_import.cpp
int cmd_load(std::span<char*> args);         // cli/cmd_load.cpp
int cmd_symbolicate(std::span<char*> args);  // cli/cmd_symbolicate.cpp
int cmd_export(std::span<char*> args);       // cli/cmd_export.cpp
int cmd_report(std::span<char*> args);       // cli/cmd_report.cpp
int cmd_diff(std::span<char*> args);         // cli/cmd_diff.cpp
int cmd_share(std::span<char*> args);        // cli/cmd_share.cpp
int cmd_push(std::span<char*> args);         // cli/cmd_push.cpp
int cmd_stat(std::span<char*> args);         // cli/cmd_stat.cpp
int cmd_probes(std::span<char*> args);       // cli/cmd_probes.cpp
int cmd_agent(std::span<char*> args);        // cli/cmd_agent.cpp

}  // namespace fxprof::cli
