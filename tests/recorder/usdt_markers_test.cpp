// `record --usdt`'s requests and their hits as markers (recorder/usdt_markers.h): the FORMAT syntax, the
// pair names, and nesting per thread, on hits made here.
#include "recorder/usdt_markers.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace fxprof;
using recorder::UsdtField;
using recorder::UsdtRole;

TEST_CASE("usdt requests: PROVIDER:NAME[=FORMAT]") {
  auto r = recorder::parse_usdt_request("python:function__entry=file:%s,name:%s,line:%d");
  REQUIRE(r);
  CHECK(r->provider == "python");
  CHECK(r->name == "function__entry");
  REQUIRE(r->format.size() == 3);
  CHECK(r->format[1].key == "name");
  CHECK(r->format[2].kind == UsdtField::Kind::Signed);
  CHECK(recorder::usdt_string_mask(*r) == 0b011);
  auto plain = recorder::parse_usdt_request("fxtest:tick");
  REQUIRE(plain);
  CHECK_FALSE(plain->formatted);
  auto skip = recorder::parse_usdt_request("a:b=-,%x,%u");
  REQUIRE(skip);
  CHECK(skip->format[0].kind == UsdtField::Kind::Skip);
  CHECK(!recorder::parse_usdt_request("tick"));
  CHECK(!recorder::parse_usdt_request("a:b=%q"));
  CHECK(!recorder::parse_usdt_request("a:b=%s,%s,%s,%s"));  // four strings: three at most
  CHECK(!recorder::parse_usdt_request("a:b=category:%d"));  // the provider's field
  CHECK(!recorder::parse_usdt_request("a:b=type:%d"));      // the Gecko payload's schema name
}

TEST_CASE("usdt pairs: __entry/__return and start/done") {
  auto e = recorder::usdt_pair_name("function__entry");
  REQUIRE(e);
  CHECK(e->role == UsdtRole::Begin);
  CHECK(e->partner == "function__return");
  CHECK(e->base == "function");
  auto d = recorder::usdt_pair_name("request__done");
  REQUIRE(d);
  CHECK(d->role == UsdtRole::End);
  CHECK(d->partner == "request__start");
  CHECK(d->base == "request");
  auto gc = recorder::usdt_pair_name("gcstart");
  REQUIRE(gc);
  CHECK(gc->base == "gc");
  CHECK(!recorder::usdt_pair_name("tick"));
  CHECK(!recorder::usdt_pair_name("start"));
}

TEST_CASE("usdt hits: nested pairs per thread, instants, other processes left out") {
  model::Profile p;
  p.processes.resize(1);
  p.processes[0].pid = 10;
  p.processes[0].threads.resize(2);
  p.processes[0].threads[0].tid = 10;
  p.processes[0].threads[1].tid = 11;
  auto entry = recorder::parse_usdt_request("py:function__entry=-,name:%s");
  auto ret = recorder::parse_usdt_request("py:function__return");
  auto tick = recorder::parse_usdt_request("py:tick=n:%d");
  REQUIRE((entry && ret && tick));
  std::vector<recorder::UsdtProbeUse> probes{{*entry, "/bin/py", UsdtRole::Begin, "py:function"},
                                             {*ret, "/bin/py", UsdtRole::End, "py:function"},
                                             {*tick, "/bin/py", UsdtRole::Instant, ""}};
  recorder::UsdtHits h;
  h.strings = {"outer", "inner", "other"};
  auto hit = [&](uint64_t t, uint32_t pid, uint32_t tid, uint32_t probe, std::vector<int64_t> args) {
    h.hits.push_back({t, pid, tid, probe, static_cast<uint32_t>(args.size()), h.args.size()});
    h.args.insert(h.args.end(), args.begin(), args.end());
  };
  hit(100, 10, 10, 0, {7, 0});  // outer on thread 10
  hit(150, 10, 11, 0, {7, 2});  // other on thread 11, ended after thread 10's inner began
  hit(200, 10, 10, 0, {7, 1});  // inner
  hit(250, 10, 10, 2, {42});
  hit(300, 10, 10, 1, {7, 1});
  hit(320, 10, 11, 1, {7, 2});
  hit(400, 10, 10, 1, {7, 0});
  hit(410, 10, 10, 1, {7, 0});  // an end without its begin
  hit(120, 99, 99, 0, {7, 0});  // another process running the binary
  const auto st = recorder::add_usdt_markers(p, probes, h);
  CHECK(st.hits == 8);
  CHECK(st.markers == 4);
  CHECK(st.unmatched == 1);
  const auto& t10 = p.processes[0].threads[0].markers;
  REQUIRE(t10.size() == 3);
  auto named = [&](const model::Marker& m) { return std::string(p.strings.get(m.name)); };
  CHECK(named(t10[0]) == "py:tick");
  CHECK(named(t10[1]) == "inner");
  CHECK((t10[1].start_ns == 200 && t10[1].end_ns == 300));
  CHECK(named(t10[2]) == "outer");
  CHECK((t10[2].start_ns == 100 && t10[2].end_ns == 400));
  const auto& t11 = p.processes[0].threads[1].markers;
  REQUIRE(t11.size() == 1);
  CHECK(named(t11[0]) == "other");
  CHECK((t11[0].start_ns == 150 && t11[0].end_ns == 320));
}
