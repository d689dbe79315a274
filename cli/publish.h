// fxprof command line: sending a saved profile on (`fxprof share`, `fxprof push`, and `record --share`,
// `--share-to`, `--push`, which call the same functions once the profile is written).
#pragma once

#include <string>
#include <vector>

#include "cli/profile_input.h"
#include "model/profile.h"
#include "share/share.h"

namespace fxprof::cli {

struct ShareOptions {
  bool yes = false;  // upload without asking
  std::string upload_origin = share::kDefaultUploadOrigin;
  std::string share_to;              // PUT here instead (a private store)
  std::vector<std::string> headers;  // extra request headers for --share-to
  bool strip_args = false;           // --strip-args: upload the program's name, not its arguments
};

// Bakes symbols into `path`'s profile, gzips it and uploads it (or PUTs it); prints the link on stdout.
// Returns the exit status (0, or 1 with one line on stderr).
int share_profile(const std::string& path, const InputOptions& input, const ShareOptions& options);

// The same for a profile in memory whose frames are already named (`record --share`: the model it recorded,
// named by the symbolizer it loaded while the program ran). Marks it self-contained; --strip-args strips it.
// The upload is gzipped in memory: no file is written or read back.
int share_profile(model::Profile& profile, const ShareOptions& options);

struct PushTargets {
  std::string pyroscope, parca;   // URLs; at least one
  bool pyroscope_ingest = false;  // --pyroscope-ingest: Pyroscope's /ingest instead of its Push API
  share::PushOptions options;     // app "" = the program's name
  bool strip_args = false;        // --strip-args
};

// --strip-args: the command line without its arguments, everywhere a profile holds it (meta.arguments,
// meta.product, which the Gecko writer also gives each process): "fxprof: /usr/bin/app". An attach
// ("-p PIDS") has no arguments to strip.
void strip_arguments(model::Profile& profile);

// Symbolicates `path`'s profile, writes it as pprof and pushes it to each target.
int push_profile(const std::string& path, const InputOptions& input, PushTargets targets);

// The same for a profile in memory whose frames are already named (`record --push`); the pprof is made in
// memory. --strip-args strips the profile.
int push_profile(model::Profile& profile, PushTargets targets);

// Parses "k=v" into `labels` (both engines' label-name rule); an error message otherwise.
std::string add_label(const std::string& kv, share::Labels& labels);

}  // namespace fxprof::cli
