#include "sinks/folded.h"

#include "sinks/output.h"

namespace fxprof::sinks {
namespace {

void append_name(std::string& buf, std::string_view name) {
  for (char c : name) {
    if (c == ';')
      c = ':';
    else if (c == '\n' || c == '\r')
      c = ' ';
    buf.push_back(c);
  }
}

}  // namespace

void write_folded(const CallTree& tree, const FunctionTable& functions, bool annotate, OutputFile& out) {
  std::string path;                  // the current call path
  std::vector<size_t> path_lengths;  // path size before each frame was appended
  std::string buf;                   // output, flushed in 256 KiB pieces
  buf.reserve(1 << 18);
  tree.walk(
      0,
      [&](uint32_t n) {
        const CallTree::Node& node = tree.node(n);
        const Function& f = functions.function(node.function);
        path_lengths.push_back(path.size());
        if (!path.empty()) path.push_back(';');
        append_name(path, f.name);
        if (annotate) {
          if (f.kind == FunctionKind::Kernel)
            path += "_[k]";
          else if (node.inlined)
            path += "_[i]";
        }
        if (node.self > 0) {
          buf += path;
          buf.push_back(' ');
          buf += std::to_string(node.self);
          buf.push_back('\n');
          if (buf.size() >= (1 << 18)) {
            out.write(buf);
            buf.clear();
          }
        }
      },
      [&](uint32_t) {
        path.resize(path_lengths.back());
        path_lengths.pop_back();
      });
  out.write(buf);
}

Status write_folded(const model::Profile& profile, const std::string& path, const FoldedOptions& options) {
  FunctionTable functions(profile);
  CallTree tree = CallTree::build(profile, functions, options.tree);
  auto out = open_output(path);
  if (!out) return std::move(out).take_error();
  write_folded(tree, functions, options.annotate, **out);
  return (*out)->finish();
}

}  // namespace fxprof::sinks
