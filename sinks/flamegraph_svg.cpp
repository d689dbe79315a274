#include "sinks/flamegraph_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sinks/output.h"

namespace fxprof::sinks {
namespace {

constexpr double kFrameHeight = 16, kFontSize = 12, kCharWidth = 0.59 * kFontSize, kPad = 10;
constexpr double kTop = 60, kBottom = 40;  // title and buttons above, details line below

void append_xml(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';  // not allowed in XML 1.0
        out.push_back(c);
    }
  }
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

uint32_t name_hash(std::string_view s) {
  uint32_t h = 2166136261u;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return h;
}

std::string colour(const Function& f, bool inlined, double delta) {
  char buf[64];
  if (!std::isnan(delta)) {
    // White for no change, towards red (grew) or blue (shrank); saturates at +-100% of the change scale.
    const double d = std::clamp(delta, -1.0, 1.0);
    const int fade = static_cast<int>(255 - std::fabs(d) * 200);
    if (d >= 0)
      std::snprintf(buf, sizeof buf, "rgb(255,%d,%d)", fade, fade);
    else
      std::snprintf(buf, sizeof buf, "rgb(%d,%d,255)", fade, fade);
    return buf;
  }
  const uint32_t h = name_hash(f.name);
  const double v1 = (h & 0xff) / 255.0, v2 = ((h >> 8) & 0xff) / 255.0;
  if (f.kind == FunctionKind::Label) {
    std::snprintf(buf, sizeof buf, "rgb(%d,%d,%d)", 180 + static_cast<int>(v1 * 30),
                  180 + static_cast<int>(v1 * 30), 180 + static_cast<int>(v1 * 30));
  } else if (f.kind == FunctionKind::Kernel) {
    std::snprintf(buf, sizeof buf, "rgb(%d,%d,%d)", 200 + static_cast<int>(v1 * 40),
                  110 + static_cast<int>(v2 * 50), 40);
  } else if (inlined) {
    std::snprintf(buf, sizeof buf, "rgb(%d,%d,%d)", 80 + static_cast<int>(v1 * 60),
                  190 + static_cast<int>(v2 * 50), 205 + static_cast<int>(v1 * 40));
  } else {
    std::snprintf(buf, sizeof buf, "rgb(%d,%d,%d)", 205 + static_cast<int>(v1 * 50),
                  static_cast<int>(v2 * 230), static_cast<int>(v1 * 55));
  }
  return buf;
}

// The viewer: plain DOM scripting, no library. Layout state is the zoomed box (x, s, depth) in samples.
constexpr const char* kScript = R"JS(
(function () {
  var svg = document.documentElement, W = +svg.getAttribute('data-width'), PAD = +svg.getAttribute('data-pad');
  var TOTAL = +svg.getAttribute('data-total'), ICICLE = svg.getAttribute('data-icicle') === '1';
  var CW = +svg.getAttribute('data-charw');
  var frames = Array.prototype.slice.call(document.querySelectorAll('g.f'));
  var details = document.getElementById('details'), matched = document.getElementById('matched');
  var unzoomBtn = document.getElementById('unzoom'), searchBtn = document.getElementById('search');
  var zoomed = null, searchRe = null;
  function fit(g, w) {
    var t = g.querySelector('text'), name = g.getAttribute('data-n');
    if (w < 3 * CW) { t.textContent = ''; return; }
    var n = Math.floor((w - 6) / CW);
    t.textContent = name.length <= n ? name : name.substring(0, Math.max(n - 2, 0)) + '..';
  }
  function layout() {
    var x0 = zoomed ? +zoomed.getAttribute('data-x') : 0, s0 = zoomed ? +zoomed.getAttribute('data-s') : TOTAL;
    var d0 = zoomed ? +zoomed.getAttribute('data-d') : 0, scale = (W - 2 * PAD) / s0;
    frames.forEach(function (g) {
      var x = +g.getAttribute('data-x'), s = +g.getAttribute('data-s'), d = +g.getAttribute('data-d');
      var r = g.querySelector('rect'), t = g.querySelector('text'), nx, nw;
      if (d < d0) {  // an ancestor of the zoomed box spans the whole width (others at that depth vanish)
        if (x <= x0 && x + s >= x0 + s0) { nx = PAD; nw = W - 2 * PAD; } else { g.style.display = 'none'; return; }
        g.classList.add('parent');
      } else if (x >= x0 && x + s <= x0 + s0) {
        nx = PAD + (x - x0) * scale; nw = s * scale; g.classList.remove('parent');
      } else { g.style.display = 'none'; return; }
      g.style.display = '';
      r.setAttribute('x', nx.toFixed(2)); r.setAttribute('width', nw.toFixed(2));
      t.setAttribute('x', (nx + 3).toFixed(2));
      fit(g, nw);
    });
    unzoomBtn.style.opacity = zoomed ? '1' : '0.3';
  }
  function zoom(g) { zoomed = g; layout(); }
  function describe(g) {
    var s = +g.getAttribute('data-s');
    var pct = (100 * s / TOTAL).toFixed(2);
    return g.getAttribute('data-n') + ' (' + s + ' sample' + (s === 1 ? '' : 's') + ', ' + pct + '%' +
      (g.getAttribute('data-extra') || '') + ')';
  }
  function search(re) {
    searchRe = re;
    var spans = [];
    frames.forEach(function (g) {
      var r = g.querySelector('rect');
      if (re && re.test(g.getAttribute('data-n'))) {
        r.setAttribute('fill', 'rgb(230,0,230)');
        spans.push([+g.getAttribute('data-x'), +g.getAttribute('data-s')]);
      } else {
        r.setAttribute('fill', g.getAttribute('data-fill'));
      }
    });
    if (!re) { matched.textContent = ''; searchBtn.style.opacity = '0.6'; return; }
    // A match inside another match covers no new samples: merge the intervals.
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var covered = 0, end = -1;
    spans.forEach(function (sp) {
      var a = sp[0], b = sp[0] + sp[1];
      if (a >= end) { covered += b - a; end = b; } else if (b > end) { covered += b - end; end = b; }
    });
    matched.textContent = 'Matched: ' + (100 * covered / TOTAL).toFixed(1) + '%';
    searchBtn.style.opacity = '1';
  }
  function askSearch() {
    var term = prompt('Search for (regular expression; empty clears)', searchRe ? searchRe.source : '');
    if (term === null) return;
    if (term === '') { search(null); return; }
    try { search(new RegExp(term)); } catch (e) { alert('Not a regular expression: ' + e.message); }
  }
  svg.addEventListener('click', function (e) {
    var g = e.target.closest ? e.target.closest('g.f') : null;
    if (g) zoom(g);
  });
  svg.addEventListener('mouseover', function (e) {
    var g = e.target.closest ? e.target.closest('g.f') : null;
    details.textContent = g ? describe(g) : ' ';
  });
  unzoomBtn.addEventListener('click', function (e) { e.stopPropagation(); zoom(null); });
  searchBtn.addEventListener('click', function (e) { e.stopPropagation(); askSearch(); });
  window.addEventListener('keydown', function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); askSearch(); }
    if (e.key === 'Escape') { search(null); zoom(null); }
  });
  // Test and automation hooks: fxprofSearch('re') returns the matched percentage.
  window.fxprofSearch = function (re) { search(re ? new RegExp(re) : null); return matched.textContent; };
  window.fxprofZoom = function (name) {
    var g = frames.filter(function (f) { return f.getAttribute('data-n') === name; })[0];
    zoom(g || null); return !!g;
  };
  layout();
  // ?s=RE in the address searches at load, as inferno's viewer does: a link can point at a function.
  var q = /[?&]s=([^&]*)/.exec(location.search);
  if (q) { try { search(new RegExp(decodeURIComponent(q[1]))); } catch (e) {} }
})();
)JS";

// Writes one flame graph: its head (size, style, title, buttons), a group per frame, then the script.
class SvgWriter {
 public:
  SvgWriter(const CallTree& tree, const SvgOptions& options, OutputFile& out)
      : tree_(tree),
        options_(options),
        out_(out),
        total_(std::max<uint64_t>(tree.total_samples(), 1)),
        width_(options.width),
        scale_((width_ - 2 * kPad) / static_cast<double>(total_)),
        x_of_(tree.nodes().size(), 0) {
    // Deepest visible node decides the height.
    uint32_t max_depth = 0;
    for (const auto& n : tree.nodes())
      if (static_cast<double>(n.total) * scale_ >= options.min_width)
        max_depth = std::max(max_depth, n.depth);
    height_ = kTop + (max_depth + 1) * kFrameHeight + kBottom;
    s_.reserve(1 << 18);
  }

  void head();
  // Frames: the root ("all") then a depth-first walk, each child starting where its previous sibling ended.
  void frames(const FunctionTable& functions);
  void finish() {
    s_ += "<script type=\"text/ecmascript\"><![CDATA[";
    s_ += kScript;
    s_ += "]]></script>\n</svg>\n";
    out_.write(s_);
  }

 private:
  double frame_y(uint32_t depth) const {
    return options_.icicle ? kTop + depth * kFrameHeight : height_ - kBottom - (depth + 1) * kFrameHeight;
  }
  void flush() {
    if (s_.size() >= (1 << 18)) {
      out_.write(s_);
      s_.clear();
    }
  }
  void frame(uint32_t n, std::string_view name, const Function* f);

  const CallTree& tree_;
  const SvgOptions& options_;
  OutputFile& out_;
  const uint64_t total_;
  const double width_, scale_;
  double height_ = 0;
  std::vector<uint64_t> x_of_;  // each node's first sample, in the root's
  std::string s_;
};

void SvgWriter::head() {
  std::string& s = s_;
  const double W = width_, H = height_;
  s += "<?xml version=\"1.0\" standalone=\"no\"?>\n";
  s += "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", W) +
       "\" height=\"" + fmt("%.0f", H) + "\" viewBox=\"0 0 " + fmt("%.0f", W) + " " + fmt("%.0f", H) +
       "\" data-width=\"" + fmt("%.0f", W) + "\" data-pad=\"" + fmt("%.0f", kPad) + "\" data-total=\"" +
       std::to_string(total_) + "\" data-icicle=\"" + (options_.icicle ? "1" : "0") + "\" data-charw=\"" +
       fmt("%.3f", kCharWidth) + "\" data-scale=\"" + fmt("%.9g", scale_) + "\">\n";
  s += "<style>text{font-family:Verdana,'DejaVu Sans',sans-serif;font-size:" + fmt("%.0f", kFontSize) +
       "px;fill:#000}g.f text{pointer-events:none}g.f:hover rect{stroke:#000;stroke-width:0.5;cursor:pointer}"
       "g.parent rect{opacity:0.55}#title{font-size:17px;text-anchor:middle}#subtitle{text-anchor:middle;"
       "fill:#555}.button{cursor:pointer;fill:#222}.button:hover{text-decoration:underline}"
       "#matched{text-anchor:end}</style>\n";
  s += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#f8f8f8\"/>\n";
  s += "<text id=\"title\" x=\"" + fmt("%.1f", W / 2) + "\" y=\"24\">";
  append_xml(s, options_.title);
  s += "</text>\n";
  if (!options_.subtitle.empty()) {
    s += "<text id=\"subtitle\" x=\"" + fmt("%.1f", W / 2) + "\" y=\"44\">";
    append_xml(s, options_.subtitle);
    s += "</text>\n";
  }
  s += "<text id=\"unzoom\" class=\"button\" x=\"" + fmt("%.0f", kPad) +
       "\" y=\"24\" style=\"opacity:0.3\">"
       "Reset zoom</text>\n";
  s += "<text id=\"search\" class=\"button\" x=\"" + fmt("%.0f", W - kPad - 60) +
       "\" y=\"24\" style=\"opacity:0.6\">Search</text>\n";
  s +=
      "<text id=\"matched\" x=\"" + fmt("%.0f", W - kPad) + "\" y=\"" + fmt("%.0f", H - 12) + "\"> </text>\n";
  s += "<text id=\"details\" x=\"" + fmt("%.0f", kPad) + "\" y=\"" + fmt("%.0f", H - 12) + "\"> </text>\n";
  if (!options_.detail_suffix_doc.empty()) {
    s += "<text x=\"" + fmt("%.0f", kPad) + "\" y=\"44\" style=\"fill:#555\">";
    append_xml(s, options_.detail_suffix_doc);
    s += "</text>\n";
  }
}

void SvgWriter::frame(uint32_t n, std::string_view name, const Function* f) {
  std::string& s = s_;
  const auto& node = tree_.node(n);
  const double w = static_cast<double>(node.total) * scale_;
  const double x = kPad + static_cast<double>(x_of_[n]) * scale_, y = frame_y(node.depth);
  const double delta = options_.delta ? options_.delta(n) : NAN;
  std::string fill =
      f ? colour(*f, node.inlined, delta)
        : (std::isnan(delta) ? std::string("rgb(230,180,120)") : colour(Function{}, false, delta));
  s += "<g class=\"f\" data-n=\"";
  append_xml(s, name);
  s += "\" data-s=\"" + std::to_string(node.total) + "\" data-x=\"" + std::to_string(x_of_[n]) +
       "\" data-d=\"" + std::to_string(node.depth) + "\" data-fill=\"" + fill + "\"";
  std::string extra = options_.extra_details ? options_.extra_details(n) : std::string();
  if (!extra.empty()) {
    s += " data-extra=\"";
    append_xml(s, extra);
    s += "\"";
  }
  s += "><title>";
  append_xml(s, name);
  s += " (" + std::to_string(node.total) + " " + options_.unit + ", " +
       fmt("%.2f", 100.0 * static_cast<double>(node.total) / static_cast<double>(total_)) + "%";
  append_xml(s, extra);
  s += ")</title><rect x=\"" + fmt("%.3f", x) + "\" y=\"" + fmt("%.1f", y) + "\" width=\"" + fmt("%.3f", w) +
       "\" height=\"" + fmt("%.1f", kFrameHeight - 1) + "\" rx=\"2\" fill=\"" + fill + "\"/><text x=\"" +
       fmt("%.2f", x + 3) + "\" y=\"" + fmt("%.1f", y + kFrameHeight - 4.5) + "\">";
  const size_t fits = w < 3 * kCharWidth ? 0 : static_cast<size_t>((w - 6) / kCharWidth);
  if (name.size() <= fits) {
    append_xml(s, name);
  } else if (fits > 2) {
    append_xml(s, name.substr(0, fits - 2));
    s += "..";
  }
  s += "</text></g>\n";
  flush();
}

void SvgWriter::frames(const FunctionTable& functions) {
  frame(0, "all", nullptr);
  std::vector<uint64_t> next_x(tree_.nodes().size(), 0);  // where the next child of a node starts
  std::vector<uint32_t> skip_below;                       // depth-first: skip subtrees of too-narrow nodes
  tree_.walk(
      0,
      [&](uint32_t n) {
        const auto& node = tree_.node(n);
        x_of_[n] = x_of_[node.parent] + next_x[node.parent];
        next_x[node.parent] += node.total;
        if (!skip_below.empty()) return;
        if (static_cast<double>(node.total) * scale_ < options_.min_width) {
          skip_below.push_back(n);
          return;
        }
        const Function& f = functions.function(node.function);
        frame(n, f.name, &f);
      },
      [&](uint32_t n) {
        if (!skip_below.empty() && skip_below.back() == n) skip_below.pop_back();
      });
}

}  // namespace

void write_flamegraph_svg(const CallTree& tree, const FunctionTable& functions, const SvgOptions& options,
                          OutputFile& out) {
  SvgWriter w(tree, options, out);
  w.head();
  w.frames(functions);
  w.finish();
}

Status write_flamegraph_svg(const model::Profile& profile, const std::string& path,
                            const SvgOptions& options) {
  FunctionTable functions(profile);
  CallTree tree = CallTree::build(profile, functions, options.tree);
  auto out = open_output(path);
  if (!out) return std::move(out).take_error();
  write_flamegraph_svg(tree, functions, options, **out);
  return (*out)->finish();
}

}  // namespace fxprof::sinks
