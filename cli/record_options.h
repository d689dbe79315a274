// fxprof command line: `fxprof record`'s options, their table and the checks between them.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cli/publish.h"
#include "recorder/recorder.h"
#include "recorder/usdt_markers.h"
#include "server/server.h"

namespace fxprof::cli {

struct RecordArgs {
  recorder::Options rec;
  server::ServeOptions serve;
  std::string output = "profile.json.gz";
  bool save_only = false;
  int symbolicate = -1;  // -1: default (yes with --save-only, no when serving)
  bool share = false;
  ShareOptions share_options;
  PushTargets push;
  std::vector<std::string> exports;  // folded, pprof, svg
  bool quiet = false;
  std::vector<recorder::UsdtRequest> usdt;  // --usdt
  bool usdt_pair = false;                   // --usdt-pair

  bool sharing() const { return share || !share_options.share_to.empty(); }
};

// Parses and checks record's arguments: nullopt to record, else the exit status (after --help or an error,
// printed).
std::optional<int> parse_record_args(std::span<char*> args, RecordArgs& a);

}  // namespace fxprof::cli
