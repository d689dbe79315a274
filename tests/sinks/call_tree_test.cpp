// The function-level call tree: merged paths, self/total counts, recursion counted once in totals, roots.
#include "sinks/call_tree.h"

#include <catch2/catch.hpp>
#include <map>

#include "tests/sinks/sink_models.h"

using namespace fxprof;

namespace {

// "main;compute" -> self samples, for every node of the tree.
std::map<std::string, uint64_t> paths(const sinks::CallTree& t, const sinks::FunctionTable& fns) {
  std::map<std::string, uint64_t> out;
  std::vector<std::string> stack;
  t.walk(
      0,
      [&](uint32_t n) {
        stack.push_back((stack.empty() ? "" : stack.back() + ";") + fns.function(t.node(n).function).name);
        if (t.node(n).self) out[stack.back()] = t.node(n).self;
      },
      [&](uint32_t) { stack.pop_back(); });
  return out;
}

}  // namespace

TEST_CASE("the call tree merges stacks into function paths") {
  model::Profile p = test::sink_profile();
  sinks::FunctionTable fns(p);
  auto t = sinks::CallTree::build(p, fns, {});
  CHECK(t.total_samples() == 20);
  CHECK(t.samples_without_stack() == 1);
  auto got = paths(t, fns);
  std::map<std::string, uint64_t> want{
      {"main;compute", 10}, {"main;compute;helper", 3},    {"main;helper", 2},
      {"main;rec;rec", 2},  {"main;compute;ksys_read", 1}, {"main;libdemo.so+0x2234", 2}};
  CHECK(got == want);
  // CPU time: 16 samples of 1 ms and 4 of 2 ms, all under main.
  CHECK(t.node(t.children(0)[0]).total_cpu_ns == 24'000'000);
}

TEST_CASE("function stats count a recursive function once per sample in its total") {
  model::Profile p = test::sink_profile();
  sinks::FunctionTable fns(p);
  auto t = sinks::CallTree::build(p, fns, {});
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_name;
  for (const auto& st : t.function_stats()) by_name[fns.function(st.function).name] = {st.self, st.total};
  CHECK(by_name["main"] == std::make_pair(uint64_t{0}, uint64_t{20}));
  CHECK(by_name["compute"] == std::make_pair(uint64_t{10}, uint64_t{14}));
  CHECK(by_name["helper"] == std::make_pair(uint64_t{5}, uint64_t{5}));
  CHECK(by_name["rec"] == std::make_pair(uint64_t{2}, uint64_t{2}));
  CHECK(by_name["ksys_read"] == std::make_pair(uint64_t{1}, uint64_t{1}));
  // Sorted by self, descending.
  CHECK(fns.function(t.function_stats()[0].function).name == "compute");
}

TEST_CASE("process and thread root frames, and thread selection") {
  model::Profile p = test::sink_profile();
  sinks::FunctionTable fns(p);
  sinks::TreeOptions o;
  o.process_roots = o.thread_roots = true;
  auto t = sinks::CallTree::build(p, fns, o);
  auto got = paths(t, fns);
  CHECK(got["app (pid 10);app (tid 10);main;compute"] == 5);
  CHECK(got["app (pid 10);worker (tid 11);main;compute"] == 4);
  CHECK(got["child (pid 20);child (tid 20);main;compute"] == 1);
  CHECK(t.total_samples() == 20);

  o = {};
  o.select = [](size_t process, size_t thread) { return process == 0 && thread == 1; };
  auto only_worker = sinks::CallTree::build(p, fns, o);
  CHECK(only_worker.total_samples() == 4);
  CHECK(paths(only_worker, fns) == std::map<std::string, uint64_t>{{"main;compute", 4}});
}
