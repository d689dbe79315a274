// Pushing pprof to fleet engines: Grafana Pyroscope's Push API and /ingest, Parca's WriteRaw (share/share.h).
#include <cctype>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <protozero/pbf_writer.hpp>
#include <random>

#include "base/terminal.h"
#include "base/url.h"
#include "share/http.h"
#include "share/share.h"

namespace fxprof::share {
namespace {

std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// Pyroscope's series name: APP{k=v,...} (its "name" parameter), values escaped as its parser reads them.
std::string pyroscope_name(const PushOptions& o) {
  std::string name = o.app + "{";
  for (size_t i = 0; i < o.labels.size(); ++i) {
    if (i) name += ',';
    name += o.labels[i].first + "=" + o.labels[i].second;
  }
  return name + "}";
}

std::string boundary() {
  std::random_device rd;
  std::string b = "fxprof-";
  for (int i = 0; i < 4; ++i) b += std::to_string(rd());
  return b;
}

// POSTs `body` with the user's headers and these, within the push's deadline.
Result<HttpResponse> post(std::string url, std::string body, std::initializer_list<const char*> headers,
                          const PushOptions& o) {
  HttpRequest req;
  req.url = std::move(url);
  req.headers = o.headers;
  for (const char* h : headers) req.headers.push_back(h);
  req.body = std::move(body);
  req.deadline_s = o.deadline_s;
  return send(req);
}

// common.v1.LabelPair {name = 1, value = 2}, each as field `field` of `msg` (both engines' label shape).
void add_labels(protozero::pbf_writer& msg, protozero::pbf_tag_type field, const Labels& labels) {
  for (const auto& [k, v] : labels) {
    protozero::pbf_writer l(msg, field);
    l.add_string(1, k);
    l.add_string(2, v);
  }
}

// gRPC-Web's status: in the answer's headers (a trailers-only answer) or in its trailer frame (flag 0x80,
// "grpc-status: N\r\ngrpc-message: ...").
struct GrpcStatus {
  int code = -1;
  std::string message;
};
void read_status_line(std::string_view line, GrpcStatus& st) {
  auto value_of = [&](std::string_view key) -> std::optional<std::string_view> {
    if (line.size() <= key.size() || line[key.size()] != ':') return std::nullopt;
    for (size_t i = 0; i < key.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(line[i])) != key[i]) return std::nullopt;
    std::string_view v = line.substr(key.size() + 1);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    return v;
  };
  if (auto v = value_of("grpc-status")) st.code = std::atoi(std::string(*v).c_str());
  if (auto v = value_of("grpc-message")) st.message = std::string(*v);
}
GrpcStatus grpc_web_status(const HttpResponse& res) {
  GrpcStatus st;
  for (const auto& h : res.headers) read_status_line(h, st);
  std::string_view body = res.body;
  while (body.size() >= 5) {
    const auto flags = static_cast<uint8_t>(body[0]);
    const uint32_t len = (static_cast<uint32_t>(static_cast<uint8_t>(body[1])) << 24) |
                         (static_cast<uint32_t>(static_cast<uint8_t>(body[2])) << 16) |
                         (static_cast<uint32_t>(static_cast<uint8_t>(body[3])) << 8) |
                         static_cast<uint32_t>(static_cast<uint8_t>(body[4]));
    if (len > body.size() - 5) break;
    std::string_view frame = body.substr(5, len);
    if (flags & 0x80) {
      while (!frame.empty()) {
        const size_t eol = frame.find("\r\n");
        read_status_line(frame.substr(0, eol), st);
        if (eol == std::string_view::npos) break;
        frame.remove_prefix(eol + 2);
      }
    }
    body.remove_prefix(5 + len);
  }
  return st;
}

}  // namespace

Status check_label_name(std::string_view name) {
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char ch : name) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
  if (!ok)
    return Err("label name '" + std::string(name) +
               "' must be letters, digits and '_', not starting with a digit");
  return {};
}

Labels series_labels(std::string_view name, const PushOptions& o) {
  Labels labels{{"__name__", std::string(name)}, {"service_name", o.app}};
  labels.insert(labels.end(), o.labels.begin(), o.labels.end());
  return labels;
}

// push.proto: PushRequest.series = 1; RawProfileSeries.labels = 1 (common.v1.LabelPair{name = 1,
// value = 2}), .samples = 2; RawSample.raw_profile = 1, .ID = 2 (a fresh id per profile).
std::string pyroscope_push_request(const std::vector<Series>& series) {
  std::string out;
  protozero::pbf_writer request(out);
  std::random_device rd;
  for (const Series& one : series) {
    protozero::pbf_writer s(request, 1);
    add_labels(s, 1, one.labels);
    protozero::pbf_writer sample(s, 2);
    sample.add_bytes(1, one.pprof);
    char id[40];
    std::snprintf(id, sizeof id, "%08x-%04x-4%03x-%04x-%04x%08x", rd(), rd() & 0xffff, rd() & 0xfff,
                  (rd() & 0x3fff) | 0x8000, rd() & 0xffff, rd());
    sample.add_string(2, id);
  }
  return out;
}

Status push_pyroscope_series(const std::string& url, const std::vector<Series>& series,
                             const PushOptions& o) {
  auto res = post(trim_slash(url) + "/push.v1.PusherService/Push", pyroscope_push_request(series),
                  {"Content-Type: application/proto", "Connect-Protocol-Version: 1"}, o);
  if (!res) return std::move(res).take_error();
  // Connect: 200 and a PushResponse; an error is another status with {"code", "message"} as JSON.
  if (res->status != 200) return Err("Pyroscope refused the profile: " + describe_answer(*res));
  return {};
}

Status push_pyroscope(const std::string& url, std::string_view pprof, const PushOptions& o) {
  return push_pyroscope_series(url, {{series_labels(kCpuSeries, o), std::string(pprof)}}, o);
}

Status push_pyroscope_ingest(const std::string& url, std::string_view pprof, const PushOptions& o) {
  const std::string b = boundary();
  std::string body = "--" + b +
                     "\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n";
  body.append(pprof);
  body += "\r\n--" + b + "--\r\n";
  const std::string type = "Content-Type: multipart/form-data; boundary=" + b;
  auto res = post(trim_slash(url) + "/ingest?name=" + url_encode(pyroscope_name(o)) +
                      "&from=" + std::to_string(o.from_unix_s) + "&until=" + std::to_string(o.until_unix_s) +
                      "&format=pprof&spyName=fxprof",
                  std::move(body), {type.c_str()}, o);
  if (!res) return std::move(res).take_error();
  if (res->status < 200 || res->status > 299)
    return Err("Pyroscope refused the profile: " + describe_answer(*res));
  return {};
}

std::string parca_write_raw_request(const std::vector<Series>& series) {
  std::string out;
  protozero::pbf_writer request(out);
  for (const Series& one : series) {
    protozero::pbf_writer s(request, 2);  // WriteRawRequest.series
    {
      protozero::pbf_writer set(s, 1);  // RawProfileSeries.labels (LabelSet)
      add_labels(set, 1, one.labels);   // LabelSet.labels
    }
    protozero::pbf_writer sample(s, 2);  // RawProfileSeries.samples (RawSample)
    sample.add_bytes(1, one.pprof);      // RawSample.raw_profile
  }
  request.add_bool(3, false);  // normalized: the pprof's addresses are the processes' own
  return out;
}

std::string parca_write_raw_request(std::string_view pprof, const PushOptions& o) {
  return parca_write_raw_request({{series_labels("fxprof", o), std::string(pprof)}});
}

Status push_parca(const std::string& address, std::string_view pprof, const PushOptions& o) {
  return push_parca_series(address, {{series_labels("fxprof", o), std::string(pprof)}}, o);
}

Status push_parca_series(const std::string& address, const std::vector<Series>& series,
                         const PushOptions& o) {
  std::string url = trim_slash(address);
  if (url.find("://") == std::string::npos) url = "http://" + url;
  const std::string message = parca_write_raw_request(series);
  std::string frame(5, '\0');
  const auto n = static_cast<uint32_t>(message.size());
  frame[1] = static_cast<char>(n >> 24);
  frame[2] = static_cast<char>(n >> 16);
  frame[3] = static_cast<char>(n >> 8);
  frame[4] = static_cast<char>(n);
  frame += message;
  auto res = post(
      url + "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw", std::move(frame),
      {"Content-Type: application/grpc-web+proto", "Accept: application/grpc-web+proto", "X-Grpc-Web: 1"}, o);
  if (!res) return std::move(res).take_error();
  if (res->status < 200 || res->status > 299)
    return Err("Parca refused the profile: " + describe_answer(*res));
  const GrpcStatus st = grpc_web_status(*res);
  if (st.code == -1) return Err("Parca's answer has no gRPC status; is " + url + " a Parca server?");
  if (st.code != 0)
    return Err("Parca refused the profile: gRPC status " + std::to_string(st.code) +
               (st.message.empty() ? "" : ": " + terminal_safe(st.message.substr(0, 200))));
  return {};
}

}  // namespace fxprof::share
