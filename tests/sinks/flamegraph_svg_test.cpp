// The flame graph SVG: well-formed XML (xmllint), every function name present, box widths that add up
// (children side by side within their parent, parent = self + children), icicle orientation, the script.
#include "sinks/flamegraph_svg.h"

#include <catch2/catch.hpp>
#include <map>
#include <regex>

#include "tests/sinks/sink_models.h"
#include "tests/support/support.h"

using namespace fxprof;

namespace {

struct Box {
  std::string name;
  uint64_t samples = 0, x = 0;
  uint32_t depth = 0;
  double px = 0, pw = 0, py = 0;
};

std::vector<Box> boxes(const std::string& svg) {
  std::vector<Box> out;
  static const std::regex g(
      R"re(<g class="f" data-n="([^"]*)" data-s="(\d+)" data-x="(\d+)" data-d="(\d+)"[^>]*><title>[^<]*</title><rect x="([0-9.]+)" y="([0-9.]+)" width="([0-9.]+)")re");
  for (std::sregex_iterator it(svg.begin(), svg.end(), g), end; it != end; ++it) {
    Box b;
    b.name = (*it)[1];
    b.samples = std::stoull((*it)[2]);
    b.x = std::stoull((*it)[3]);
    b.depth = static_cast<uint32_t>(std::stoul((*it)[4]));
    b.px = std::stod((*it)[5]);
    b.py = std::stod((*it)[6]);
    b.pw = std::stod((*it)[7]);
    out.push_back(b);
  }
  return out;
}

std::string svg_of(const model::Profile& p, const sinks::SvgOptions& o, test::TempDir& dir) {
  REQUIRE(sinks::write_flamegraph_svg(p, dir.file("fg.svg"), o));
  auto lint = test::run({"xmllint", "--noout", dir.file("fg.svg")});
  INFO(lint.err);
  CHECK(lint.status == 0);
  return test::read_profile_text(dir.file("fg.svg"));
}

}  // namespace

TEST_CASE("flame graph SVG: XML, every function, widths that add up") {
  test::TempDir dir;
  sinks::SvgOptions o;
  o.min_width = 0;
  std::string svg = svg_of(test::sink_profile(), o, dir);
  auto bs = boxes(svg);
  REQUIRE(bs.size() == 9);  // all + 8 call-tree nodes
  CHECK(bs[0].name == "all");
  CHECK(bs[0].samples == 20);
  for (const char* name : {"main", "compute", "helper", "rec", "ksys_read", "libdemo.so+0x2234"}) {
    INFO(name);
    CHECK(std::any_of(bs.begin(), bs.end(), [&](const Box& b) { return b.name == name; }));
  }
  // Pixel widths are proportional to samples; children lie within their parent and add up to at most it.
  const double scale = bs[0].pw / 20.0;
  for (const auto& b : bs) CHECK(b.pw == Approx(b.samples * scale).margin(0.002));
  for (size_t i = 1; i < bs.size(); ++i) {
    const Box& b = bs[i];
    // The parent: the closest earlier box one level down (depth-first order).
    const Box* parent = nullptr;
    for (size_t j = i; j-- > 0;)
      if (bs[j].depth + 1 == b.depth) {
        parent = &bs[j];
        break;
      }
    REQUIRE(parent);
    CHECK(b.x >= parent->x);
    CHECK(b.x + b.samples <= parent->x + parent->samples);
    CHECK(b.py < parent->py);  // flames grow upwards
  }
  // main's children: compute 14, helper 2, libdemo 2, rec 2 = 20 = main (no self).
  uint64_t under_main = 0;
  for (const auto& b : bs)
    if (b.depth == 2) under_main += b.samples;
  CHECK(under_main == 20);
  // The viewer's pieces are there.
  for (const char* piece : {"id=\"search\"", "id=\"unzoom\"", "id=\"details\"", "id=\"matched\"", "<script"})
    CHECK(svg.find(piece) != std::string::npos);
  CHECK(svg.find("http://www.w3.org/2000/svg") != std::string::npos);
  CHECK(svg.find("https://") == std::string::npos);  // nothing loaded from the network
}

TEST_CASE("flame graph SVG: icicle, categories, narrow boxes left out, escaping") {
  test::TempDir dir;
  sinks::SvgOptions o;
  o.icicle = true;
  o.min_width = 0;
  auto bs = boxes(svg_of(test::sink_profile(), o, dir));
  REQUIRE(bs.size() == 9);
  for (size_t i = 1; i < bs.size(); ++i) CHECK(bs[i].py > bs[0].py);  // callees below

  std::string svg = test::read_profile_text(dir.file("fg.svg"));
  // Kernel frames are orange-brown (blue component 40), labels grey.
  std::smatch m;
  REQUIRE(
      std::regex_search(svg, m, std::regex(R"(data-n="ksys_read"[^>]*data-fill="rgb\((\d+),(\d+),(\d+)\))")));
  CHECK(m[3] == "40");

  // A 25 px wide graph has 5 px for 20 samples (0.25 px each): a 1-sample box is under a 0.3 px minimum.
  o.width = 25;
  o.min_width = 0.3;
  auto narrow = boxes(svg_of(test::sink_profile(), o, dir));
  CHECK(std::none_of(narrow.begin(), narrow.end(), [](const Box& b) { return b.name == "ksys_read"; }));

  model::Profile p;
  auto& t = p.processes.emplace_back().threads.emplace_back();
  std::vector<model::FrameId> path{p.label_frame("std::vector<int> operator<<(a&b, \"q\")")};
  t.samples.push_back({1, p.stacks.intern_path(path), -1});
  std::string esc = svg_of(p, {}, dir);
  CHECK(esc.find("std::vector&lt;int&gt; operator&lt;&lt;(a&amp;b, &quot;q&quot;)") != std::string::npos);
}

// The viewer runs in a real browser (Debian's chromium, headless, no network): the page's own script lays out
// the boxes and a search from the address (?s=) colours the matches and reports the share they cover.
TEST_CASE("flame graph SVG: the viewer searches in headless Chromium") {
  test::TempDir dir;
  sinks::SvgOptions o;
  o.min_width = 0;
  auto bs = boxes(svg_of(test::sink_profile(), o, dir));
  // The expected share from the boxes themselves: `compute` is one box.
  REQUIRE(std::count_if(bs.begin(), bs.end(), [](const Box& b) { return b.name == "compute"; }) == 1);
  const Box& compute = *std::find_if(bs.begin(), bs.end(), [](const Box& b) { return b.name == "compute"; });
  char expected[64];
  std::snprintf(expected, sizeof expected, "Matched: %.1f%%", 100.0 * compute.samples / bs[0].samples);
  auto r = test::run({"chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                      "file://" + dir.file("fg.svg") + "?s=%5Ecompute%24"});
  INFO(r.err);
  REQUIRE(r.status == 0);
  INFO(r.out);
  // The page's script ran: the share is reported and exactly one box is painted the match colour.
  CHECK(r.out.find(expected) != std::string::npos);
  size_t painted = 0;
  for (size_t at = r.out.find("fill=\"rgb(230,0,230)\""); at != std::string::npos;
       at = r.out.find("fill=\"rgb(230,0,230)\"", at + 1))
    ++painted;
  CHECK(painted == 1);
}
