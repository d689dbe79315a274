#include "exporter/output.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fxprof::exporter {
namespace {

class StdoutOutput final : public OutputFile {
 public:
  void write(std::string_view bytes) override {
    while (!bytes.empty() && error_.empty()) {
      ssize_t n = ::write(STDOUT_FILENO, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = std::string("standard output: ") + std::strerror(errno);
        break;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }
  Status finish() override {
    if (!error_.empty()) return Error{error_};
    return {};
  }

 private:
  std::string error_;
};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Result<std::unique_ptr<OutputFile>> open_output(const std::string& path) {
  if (path == "-") return std::unique_ptr<OutputFile>(std::make_unique<StdoutOutput>());
  return OutputFile::create(path);
}

std::string output_beside(const std::string& in, const std::string& extension) {
  std::string stem = in;
  for (std::string_view ext : {".json.gz", ".json", ".gz"})
    if (ends_with(stem, ext)) {
      stem.resize(stem.size() - ext.size());
      break;
    }
  return stem + extension;
}

}  // namespace fxprof::exporter
