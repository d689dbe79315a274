// `fxprof share FILE`: upload a profile the way the Firefox Profiler's Upload button does, or PUT it to a
// store of the user's own, and print the link.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/publish.h"

namespace fxprof::cli {
namespace {

constexpr std::string_view kUsage =
    "Usage: fxprof share [OPTIONS] FILE\n"
    "\n"
    "Makes the profile FILE self-contained (symbols baked in), gzips it and uploads it to the Firefox\n"
    "Profiler's public store, as its Upload button does, then prints the link to give teammates. The link "
    "is\n"
    "unlisted but public: anyone who has it can open the profile, which holds command lines, paths of the\n"
    "program and its libraries, thread and function names. fxprof says what it holds and asks first (on a\n"
    "terminal; otherwise --yes is required). The store takes at most 150 MB.\n"
    "\n";

constexpr std::string_view kCommand = "share";

}  // namespace

int cmd_share(std::span<char*> args) {
  InputOptions input;
  ShareOptions share;
  std::string file;
  const Command command{
      kCommand,
      kUsage,
      {
          {"", "--yes", "", "upload without asking", set(share.yes, true)},
          {"", "--upload-url", "ORIGIN", "the store to upload to (default https://api.profiler.firefox.com)",
           store(share.upload_origin)},
          {"", "--share-to", "URL",
           "PUT the profile to URL instead (a presigned S3/GCS URL, any HTTP store\n"
           "that takes a PUT) and print the Firefox Profiler's from-url link; the store\n"
           "must send CORS headers",
           store(share.share_to)},
          {"", "--strip-args", "",
           "upload the program's name without its arguments (meta.arguments,\n"
           "meta.product and each process's product)",
           set(share.strip_args, true)},
          header_option(share.headers, "with --share-to: an extra request header (repeatable)"),
          symbol_dir_option(input.symbols.symbol_dirs),
      },
      one_operand(file, "profile")};
  if (auto exit = parse_options(command, args)) return *exit;
  if (file.empty()) return usage_error(kCommand, "which profile? give FILE");
  if (!share.headers.empty() && share.share_to.empty())
    return usage_error(kCommand, "--header goes with --share-to");
  return share_profile(file, input, share);
}

}  // namespace fxprof::cli
