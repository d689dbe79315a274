// `fxprof share FILE`: upload a profile the way the Firefox Profiler's Upload button does, or PUT it to a
// store of the user's own, and print the link.
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/publish.h"

namespace fxprof::cli {
namespace {

constexpr const char* kHelp =
    "Usage: fxprof share [OPTIONS] FILE\n"
    "\n"
    "Makes the profile FILE self-contained (symbols baked in), gzips it and uploads it to the Firefox\n"
    "Profiler's public store, as its Upload button does, then prints the link to give teammates. The link "
    "is\n"
    "unlisted but public: anyone who has it can open the profile, which holds command lines, paths of the\n"
    "program and its libraries, thread and function names. fxprof says what it holds and asks first (on a\n"
    "terminal; otherwise --yes is required). The store takes at most 150 MB.\n"
    "\n"
    "  --yes                    upload without asking\n"
    "  --upload-url ORIGIN      the store to upload to (default https://api.profiler.firefox.com)\n"
    "  --share-to URL           PUT the profile to URL instead (a presigned S3/GCS URL, any HTTP store\n"
    "                           that takes a PUT) and print the Firefox Profiler's from-url link; the store\n"
    "                           must send CORS headers\n"
    "  --header 'NAME: VALUE'   with --share-to: an extra request header (repeatable)\n"
    "  --symbol-dir DIR         also look for symbol files in DIR (repeatable)\n"
    "  -h, --help               this help\n";

constexpr std::string_view kCommand = "share";

}  // namespace

int cmd_share(std::span<char*> args) {
  InputOptions input;
  ShareOptions share;
  std::string file;
  ArgParser p(args);
  while (!p.done()) {
    if (!p.at_option()) {
      if (p.take_separator()) continue;
      if (!file.empty())
        return usage_error(kCommand, "one profile at a time ('" + std::string(p.peek()) + "')");
      file = p.take();
      continue;
    }
    if (p.flag("-h", "--help")) {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (p.flag("", "--yes")) {
      share.yes = true;
    } else if (auto v = p.option("", "--upload-url")) {
      share.upload_origin = *v;
    } else if (auto v = p.option("", "--share-to")) {
      share.share_to = *v;
    } else if (auto v = p.option("", "--header")) {
      if (v->find(':') == std::string::npos) return usage_error(kCommand, "--header needs 'NAME: VALUE'");
      share.headers.push_back(*v);
    } else if (auto v = p.option("", "--symbol-dir")) {
      input.symbols.symbol_dirs.push_back(*v);
    } else if (!p.error().empty()) {
      return usage_error(kCommand, p.error());
    } else {
      return usage_error(kCommand, "unknown option '" + std::string(p.peek()) + "'");
    }
  }
  if (!p.error().empty()) return usage_error(kCommand, p.error());
  if (file.empty()) return usage_error(kCommand, "which profile? give FILE");
  if (!share.headers.empty() && share.share_to.empty())
    return usage_error(kCommand, "--header goes with --share-to");
  return share_profile(file, input, share);
}

}  // namespace fxprof::cli
