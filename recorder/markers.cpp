// Marker files: their names, their lines, and following them while they grow (recorder/markers.h).
#include "recorder/markers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

#include "base/path.h"
#include "model/markers.h"
#include "recorder/jit.h"

namespace fxprof::recorder {

namespace {

bool parse_u64(std::string_view s, uint64_t& v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// "KEY=VALUE" of an fxprof line into a field (or the category, or the instant flag); false when malformed.
bool parse_extra(std::string_view item, model::Profile& p, model::Marker& m) {
  if (item == ".instant") {
    m.phase = model::MarkerPhase::Instant;
    return true;
  }
  const size_t eq = item.find('=');
  if (eq == 0 || eq == std::string_view::npos) return false;
  std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
  model::MarkerField f;
  if (key == ".cat") {
    key = model::kMarkerCategoryKey;
  } else if (key[0] == '.' || key == model::kMarkerCategoryKey || key == model::kProgramMarkerKey) {
    return true;  // a later version's extra, or a reserved key: not a field of ours
  }
  f.key = p.strings.intern(key);
  if (key == model::kMarkerCategoryKey ||
      (value.size() >= 2 && value.front() == '"' && value.back() == '"')) {
    if (key != model::kMarkerCategoryKey) value = value.substr(1, value.size() - 2);
    f.is_string = true;
    f.string = p.strings.intern(value);
  } else {
    auto r = std::from_chars(value.data(), value.data() + value.size(), f.number);
    if (value.empty() || r.ec != std::errc() || r.ptr != value.data() + value.size()) {
      f.is_string = true;  // a bare word: kept as the string it is
      f.string = p.strings.intern(value);
    }
  }
  m.fields.push_back(f);
  return true;
}

}  // namespace

MarkerFileKind marker_file_kind(std::string_view path, uint32_t* pid) {
  const std::string_view base = base_name(path);
  MarkerFileKind kind = MarkerFileKind::None;
  std::string_view rest;
  if (base.starts_with("marker-")) {
    kind = MarkerFileKind::Samply;
    rest = base.substr(7);
  } else if (base.starts_with("fxprof-markers-")) {
    kind = MarkerFileKind::Fxprof;
    rest = base.substr(15);
  }
  if (kind == MarkerFileKind::None || !rest.ends_with(".txt")) return MarkerFileKind::None;
  rest.remove_suffix(4);
  const size_t dash = rest.find('-');
  uint64_t v = 0;
  if (!parse_u64(rest.substr(0, dash), v) || v == 0 || v > UINT32_MAX) return MarkerFileKind::None;
  if (kind == MarkerFileKind::Fxprof && dash == std::string_view::npos) return MarkerFileKind::None;
  if (pid) *pid = static_cast<uint32_t>(v);
  return kind;
}

bool parse_marker_line(std::string_view line, MarkerFileKind kind, model::Profile& p, model::Marker& out) {
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return false;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return false;
  uint64_t start = 0, end = 0;
  if (!parse_u64(line.substr(0, sp1), start) || !parse_u64(line.substr(sp1 + 1, sp2 - sp1 - 1), end))
    return false;
  std::string_view name = line.substr(sp2 + 1), extras;
  if (kind == MarkerFileKind::Fxprof) {
    const size_t tab = name.find('\t');
    if (tab != std::string_view::npos) {
      extras = name.substr(tab + 1);
      name = name.substr(0, tab);
    }
  }
  if (name.empty() || start == 0) return false;
  model::Marker m;
  m.program = true;
  m.category = model::Category::User;
  m.phase = model::MarkerPhase::Interval;
  m.name = p.strings.intern(name);
  while (!extras.empty()) {
    const size_t tab = extras.find('\t');
    if (!parse_extra(extras.substr(0, tab), p, m)) return false;
    extras = tab == std::string_view::npos ? std::string_view() : extras.substr(tab + 1);
  }
  if (m.phase == model::MarkerPhase::Interval && end < start) return false;
  m.start_ns = start;
  m.end_ns = m.phase == model::MarkerPhase::Interval ? end : 0;
  out = std::move(m);
  return true;
}

void MarkerFileFollower::poll(const std::function<void(std::string_view)>& line, bool last) {
  if (refused_) return;
  if (!fd_.valid()) {
    struct stat st {};
    auto fd = open_regular(path_, st, uids_, &untrusted_);
    if (!fd) {
      refused_ = !untrusted_.empty();  // another user's: never read (a file not there yet: looked for again)
      return;
    }
    fd_ = std::move(*fd);
  }
  // Owner and mode again: a file that became another user's, or writable by others, is not read further.
  struct stat now {};
  if (fstat(fd_.get(), &now) == 0) {
    if (std::string message = untrusted_file(path_, now, uids_); !message.empty()) {
      untrusted_ = std::move(message);
      refused_ = true;
      fd_ = UniqueFd();
      return;
    }
  }
  // Reads from the first line not handed over, up to the end of what was written (EOF or the first NUL),
  // in pieces that grow while the file has more.
  for (size_t piece = 4096;;) {
    const size_t had = buf_.size();
    buf_.resize(had + piece);
    ssize_t n = ::pread(fd_.get(), buf_.data() + had, piece, static_cast<off_t>(offset_ + had));
    if (n < 0 && errno == EINTR) {
      buf_.resize(had);
      continue;
    }
    buf_.resize(had + static_cast<size_t>(n > 0 ? n : 0));
    const size_t nul = buf_.find('\0', had);
    const bool more = n == static_cast<ssize_t>(piece) && nul == std::string::npos;
    if (nul != std::string::npos) buf_.resize(nul);
    size_t from = 0;
    for (size_t nl; (nl = buf_.find('\n', from)) != std::string::npos; from = nl + 1)
      if (nl > from) line(std::string_view(buf_).substr(from, nl - from));
    offset_ += from;
    buf_.erase(0, from);
    if (buf_.size() >= kMaxMarkerLine) {  // no newline in sight: not a marker file's line
      ++too_long_;
      offset_ += buf_.size();
      buf_.clear();
    }
    if (!more) break;
    piece = std::min<size_t>(piece * 2, 1 << 20);
  }
  if (last && !buf_.empty()) {
    line(buf_);
    offset_ += buf_.size();
  }
  buf_.clear();  // an incomplete last line is read again, whole, next time
}

}  // namespace fxprof::recorder
