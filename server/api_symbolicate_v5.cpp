// POST /symbolicate/v5: the Firefox Profiler's (and Tecken's) batch symbolication. The request is parsed
// into jobs, each job's addresses are resolved per library by the symbolizer, and the answer is written in
// request order. Names come as the library's JSON literals, made once, so writing a frame copies bytes.
#include <string>
#include <utility>
#include <vector>

#include "base/json_writer.h"
#include "server/internal.h"

namespace fxprof::server {
namespace {

using internal::error_response;

struct Job {
  std::vector<std::pair<std::string_view, std::string_view>> modules;  // (debugName, breakpadId)
  std::vector<std::vector<std::pair<int64_t, uint64_t>>> stacks;       // (module index or -1, address)
};

// ---- Request

// Validates one job; an error message (for the 400 answer) or "".
std::string parse_job(simdjson::dom::element el, Job& job) {
  simdjson::dom::object obj;
  if (el.get_object().get(obj)) return "a job is not an object";
  simdjson::dom::array mm, stacks;
  if (obj["memoryMap"].get_array().get(mm)) return "job.memoryMap is missing or not an array";
  if (obj["stacks"].get_array().get(stacks)) return "job.stacks is missing or not an array";
  for (auto entry : mm) {
    simdjson::dom::array pair;
    if (entry.get_array().get(pair) || pair.size() != 2)
      return "memoryMap entries must be [debugName, breakpadId]";
    std::string_view name, id;
    if (pair.at(0).get_string().get(name) || pair.at(1).get_string().get(id))
      return "memoryMap entries must be two strings";
    job.modules.emplace_back(name, id);
  }
  for (auto st : stacks) {
    simdjson::dom::array frames;
    if (st.get_array().get(frames)) return "a stack is not an array";
    auto& out = job.stacks.emplace_back();
    out.reserve(frames.size());
    for (auto f : frames) {
      simdjson::dom::array pair;
      if (f.get_array().get(pair) || pair.size() != 2) return "frames must be [moduleIndex, address]";
      int64_t mod;
      uint64_t addr;
      if (pair.at(0).get_int64().get(mod)) return "a frame's module index is not an integer";
      if (pair.at(1).get_uint64().get(addr)) return "a frame's address is not a non-negative integer";
      if (mod < -1 || mod >= static_cast<int64_t>(job.modules.size()))
        return "a frame's module index is out of range";
      out.emplace_back(mod, addr);
    }
  }
  return {};
}

// The jobs of a request (its "jobs" array, or the request itself as the one job, as v5 allows); an error
// message or "". The views point into `parser`'s document.
std::string parse_request(simdjson::dom::parser& parser, simdjson::padded_string_view body,
                          std::vector<Job>& jobs) {
  simdjson::dom::element root;
  if (std::string e = internal::parse_object(parser, body, root); !e.empty()) return e;
  simdjson::dom::object obj = root.get_object().value_unsafe();
  simdjson::dom::array jobs_el;
  if (!obj["jobs"].get_array().get(jobs_el)) {
    for (auto j : jobs_el)
      if (std::string e = parse_job(j, jobs.emplace_back()); !e.empty()) return e;
  } else if (obj["memoryMap"].error() == simdjson::SUCCESS) {
    if (std::string e = parse_job(root, jobs.emplace_back()); !e.empty()) return e;
  } else {
    return "request has no \"jobs\" array";
  }
  size_t total = 0;
  for (const auto& j : jobs)
    for (const auto& s : j.stacks) total += s.size();
  if (total > (size_t{1} << 22)) return "too many addresses in one request";
  return {};
}

// ---- Resolution: each module's addresses together (in address order, by the symbolizer), then handed out
// in request order.

struct Module {
  std::vector<uint64_t> addrs;
  Result<symbolizer::Resolution> resolved = Err("not asked");
  std::string name_json;  // debugName as a JSON literal, once per job
  size_t next = 0;        // next answer to hand out, in request order
};

std::vector<Module> resolve_job(symbolizer::Symbolizer& symbols, const Job& job) {
  std::vector<Module> mods(job.modules.size());
  for (const auto& stack : job.stacks)
    for (auto [mod, addr] : stack)
      if (mod >= 0) mods[static_cast<size_t>(mod)].addrs.push_back(addr);
  for (size_t m = 0; m < mods.size(); ++m) {
    append_json_string(mods[m].name_json, job.modules[m].first);
    mods[m].resolved = symbols.resolve(job.modules[m].first, job.modules[m].second, mods[m].addrs);
  }
  return mods;
}

// ---- Response

// The answer's size, so the string grows once (growing an 8 MB string by doubling copies it twice over).
size_t estimate_size(const std::vector<Module>& mods) {
  size_t n = 256;
  for (const Module& m : mods) {
    n += m.addrs.size() * (64 + m.name_json.size());
    if (!m.resolved) continue;
    for (const auto& a : m.resolved->addresses) {
      if (!a.found) continue;
      n += 96 + a.function->json.size() + (a.file ? a.file->json.size() : 0);
      for (uint32_t k = 0; k < a.inline_count; ++k) {
        const auto& in = m.resolved->inlines[a.inline_begin + k];
        n += 48 + (in.function ? in.function->json.size() : 0) + (in.file ? in.file->json.size() : 0);
      }
    }
  }
  return n;
}

void write_frame(JsonWriter& w, size_t index, uint64_t addr, Module* mod) {
  w.begin_object().key("frame").value(static_cast<uint64_t>(index)).key("module_offset").hex_value(addr);
  if (mod == nullptr) {
    w.end_object();
    return;
  }
  w.key("module").raw(mod->name_json);
  size_t i = mod->next++;
  if (!mod->resolved || !mod->resolved->addresses[i].found) {
    w.end_object();
    return;
  }
  const symbolizer::Resolution& r = *mod->resolved;
  const symbolizer::Resolution::Address& a = r.addresses[i];
  w.key("function").raw(a.function->json).key("function_offset").hex_value(a.function_offset);
  if (a.function_size != 0) w.key("function_size").hex_value(a.function_size);
  if (a.file != nullptr) w.key("file").raw(a.file->json);
  if (a.line != 0) w.key("line").value(static_cast<uint64_t>(a.line));
  if (a.inline_count != 0) {
    w.key("inlines").begin_array();
    for (uint32_t k = 0; k < a.inline_count; ++k) {
      const symbolizer::Resolution::Frame& in = r.inlines[a.inline_begin + k];
      w.begin_object();
      if (in.function != nullptr) w.key("function").raw(in.function->json);
      if (in.file != nullptr) w.key("file").raw(in.file->json);
      if (in.line != 0) w.key("line").value(static_cast<uint64_t>(in.line));
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
}

void write_result(JsonWriter& w, const Job& job, std::vector<Module>& mods) {
  w.begin_object().key("stacks").begin_array();
  for (const auto& stack : job.stacks) {
    w.begin_array();
    for (size_t fi = 0; fi < stack.size(); ++fi) {
      auto [mod, addr] = stack[fi];
      write_frame(w, fi, addr, mod < 0 ? nullptr : &mods[static_cast<size_t>(mod)]);
    }
    w.end_array();
  }
  w.end_array();
  auto key_of = [&](size_t m) {
    return std::string(job.modules[m].first) + "/" + std::string(job.modules[m].second);
  };
  w.key("found_modules").begin_object();
  for (size_t m = 0; m < mods.size(); ++m) w.key(key_of(m)).value(mods[m].resolved.ok());
  w.end_object();
  bool any_error = false;
  for (size_t m = 0; m < mods.size(); ++m) {
    if (mods[m].resolved) continue;
    if (!any_error) w.key("module_errors").begin_object();
    any_error = true;
    w.key(key_of(m)).begin_array().begin_object();
    w.key("name").value("NotFound").key("message").value(mods[m].resolved.error());
    w.end_object().end_array();
  }
  if (any_error) w.end_object();
  w.end_object();
}

}  // namespace

ApiResponse internal::symbolicate_v5(symbolizer::Symbolizer& symbols, simdjson::padded_string_view body) {
  simdjson::dom::parser parser;
  std::vector<Job> jobs;
  if (std::string e = parse_request(parser, body, jobs); !e.empty()) return error_response(400, e);
  ApiResponse resp;
  JsonWriter w(resp.body);
  w.begin_object().key("results").begin_array();
  for (const Job& job : jobs) {
    std::vector<Module> mods = resolve_job(symbols, job);
    resp.body.reserve(resp.body.size() + estimate_size(mods));
    write_result(w, job, mods);
  }
  w.end_array().end_object();
  return resp;
}

ApiResponse symbolicate_v5(symbolizer::Symbolizer& symbols, std::string_view request_json) {
  return internal::symbolicate_v5(symbols, simdjson::padded_string(request_json));
}

}  // namespace fxprof::server
