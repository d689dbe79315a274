// fxprof gecko (internal to the Gecko reader): a profile file's JSON text as a stream of chunks, and a
// small structural scanner over it.
//
//  - TextSource: the text in chunks: a plain file read() a chunk at a time (never mapped: a mapped file's
//    pages count as the reader's memory), gzip inflated a chunk at a time (zlib streaming, several members,
//    the gzip-bomb caps of gecko_reader.h), or text in memory handed out `chunk` bytes at a time (tests put a
//    chunk border at every byte with 1).
//  - JsonStream: walks the outline of the document (the top-level object, `threads`, `processes`) byte by
//    byte across chunk borders, tracking strings, escapes and nesting, and either skips a value or copies it
//    whole into a PieceBuffer, where simdjson parses it on its own. So only one member of the outline is
//    ever held as text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace fxprof::gecko::internal {

class TextSource {
 public:
  virtual ~TextSource() = default;
  // Up to `cap` bytes of text into `buf`; 0 at the end. Errors are one line, without the file name.
  virtual Result<size_t> read(char* buf, size_t cap) = 0;
};

// `path` checked early (a regular file, not empty, gzip or '{' in its first bytes) and opened as a source;
// `gzip` tells which it is. Errors name the file.
struct OpenedSource {
  std::unique_ptr<TextSource> source;
  bool gzip = false;
};
Result<OpenedSource> open_profile_source(const std::string& path);
std::unique_ptr<TextSource> memory_source(std::string_view text, size_t chunk);
// A '{' after optional whitespace and a UTF-8 byte order mark.
bool starts_like_json_object(std::string_view bytes);

// Bytes with at least `padding` readable bytes after size() (simdjson's padding), growing in place
// (mremap: no copy). Move-only.
class PieceBuffer {
 public:
  explicit PieceBuffer(size_t padding) : padding_(padding) {}
  Status append(const char* data, size_t n);
  void clear() { size_ = 0; }
  const char* data() const { return static_cast<const char*>(map_.data()); }
  size_t size() const { return size_; }
  size_t capacity() const { return map_.size(); }  // at least size() + padding once anything is appended
  std::string_view view() const { return {data(), size_}; }

 private:
  Mapping map_;
  size_t size_ = 0;
  size_t padding_;
};

class JsonStream {
 public:
  // `max_string`: the longest string or number value() takes (kMaxJsonStringBytes; the fuzzer tries less).
  JsonStream(TextSource& source, size_t chunk_bytes, size_t max_string);

  // Reads until at least `n` bytes are buffered or the text ends; what is buffered (for the first bytes'
  // checks). False on a source error.
  bool prefetch(size_t n);
  std::string_view buffered() const { return {buf_.data() + pos_, end_ - pos_}; }
  void skip_bom() {  // a UTF-8 byte order mark at the start
    if (buffered().substr(0, 3) == "\xEF\xBB\xBF") pos_ += 3;
  }

  // Skips whitespace; the next byte, or -1 at the end of the text or on an error (failed() tells).
  int peek();
  void take() { ++pos_; }  // consumes the byte peek() returned
  // A string (the next byte is '"'), raw (escapes as written); bytes beyond `max` are dropped (and the
  // outline's keys are short: a long one is only skipped, never held).
  bool string(std::string& out, size_t max);
  // One value (the next byte starts it), copied into `out` when given, else skipped. The text may not end
  // inside it, a scalar's included: every value read is inside the top-level object.
  bool value(PieceBuffer* out);

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }   // "truncated JSON", a source's error...
  uint64_t offset() const { return consumed_ + pos_; }  // of the next byte in the text

 private:
  bool fill();  // reads the next chunk into the buffer (dropping what was consumed); false at the end
  bool fail(std::string message);
  bool too_long(const char* what, uint64_t from);  // a string or number beyond max_string_
  bool copy(PieceBuffer* out, size_t from, size_t to);
  bool scalar(PieceBuffer* out);     // value()'s number, true, false or null: up to the next delimiter
  bool composite(PieceBuffer* out);  // value()'s string, object or array: to its closing quote or bracket

  TextSource& source_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  uint64_t consumed_ = 0;  // text bytes before buf_[0]
  bool eof_ = false;
  size_t max_string_;
  std::string error_;
};

}  // namespace fxprof::gecko::internal
