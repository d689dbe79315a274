// fxprof share: sending a finished profile to other people and other systems.
//
//  - upload_public(): the Firefox Profiler's own Upload button, done from the command line: POST the gzip
//    of a self-contained Gecko profile to <origin>/compressed-store (firefox-devtools/profiler-server); the
//    answer is a JWT whose payload's "profileToken" names the profile at <profiler>/public/<token>/.
//  - put_profile(): a private store instead: PUT the same bytes to a URL the user gives (a presigned S3/GCS
//    URL, any HTTP store that takes a PUT); the Firefox Profiler opens it through /from-url/.
//  - push_pyroscope() / push_parca(): pprof to a fleet engine: Grafana Pyroscope's Push API
//    (push.v1.PusherService/Push over the Connect protocol: unary, a plain protobuf body, where Pyroscope
//    moves its pushers), its older /ingest (push_pyroscope_ingest), or Parca's
//    ProfileStoreService/WriteRaw (gRPC-Web, the protocol Parca's own UI speaks on its HTTP port).
//    One request may carry many series (`fxprof agent`: a series per process and profile type a window).
// Each returns what the user needs next (a link) or one line saying what the service answered.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace fxprof::share {

inline constexpr const char* kDefaultUploadOrigin = "https://api.profiler.firefox.com";
// profiler-server refuses larger bodies (its documented limit); said before trying.
inline constexpr uint64_t kUploadLimitBytes = 150ull * 1000 * 1000;

// Uploads `gzip` (a gzip'd, self-contained Gecko profile) and returns the profile's token.
Result<std::string> upload_public(const std::string& upload_origin, std::string_view gzip);

// The token inside a compressed-store answer (a JWT: header.payload.signature, payload {"profileToken"}).
Result<std::string> token_from_jwt(std::string_view jwt);

// <profiler origin>/public/<token>/
std::string public_link(const std::string& token);

// PUTs `body` to `url` with `headers` ("Name: value"); any 2xx is success.
Status put_profile(const std::string& url, std::string_view body, const std::vector<std::string>& headers);

using Labels = std::vector<std::pair<std::string, std::string>>;

struct PushOptions {
  std::string app;                   // Pyroscope's application name / Parca's service_name label
  Labels labels;                     // --label k=v
  std::vector<std::string> headers;  // --header "Name: value" (auth, tenants)
  uint64_t from_unix_s = 0, until_unix_s = 0;
  long deadline_s = 0;  // the request's deadline (0: share/http.h's, by size); the agent's is its window
};

// One series of a push: its labels (__name__ and service_name included) and its pprof (gzipped or not).
struct Series {
  Labels labels;
  std::string pprof;
};

// The series name of a CPU profile in both engines (Pyroscope's process_cpu:cpu:nanoseconds:cpu:nanoseconds
// profile type) and of off-CPU time (a type of its own: off_cpu:off_cpu:nanoseconds:cpu:nanoseconds).
inline constexpr const char* kCpuSeries = "process_cpu";
inline constexpr const char* kOffCpuSeries = "off_cpu";

// {__name__=NAME, service_name=options.app, options.labels...}
Labels series_labels(std::string_view name, const PushOptions& options);

// Pyroscope's Push API: PushRequest{series[{labels[{name, value}], samples[{raw_profile, ID}]}]} POSTed
// to URL/push.v1.PusherService/Push as a Connect unary call (Content-Type application/proto).
Status push_pyroscope_series(const std::string& url, const std::vector<Series>& series,
                             const PushOptions& options);
// One pprof as one series (__name__=process_cpu, service_name=APP, labels).
Status push_pyroscope(const std::string& url, std::string_view pprof, const PushOptions& options);
// The PushRequest message (protobuf), for the tests' stand-in to check and for push_pyroscope_series.
std::string pyroscope_push_request(const std::vector<Series>& series);

// --pyroscope-ingest: POST URL/ingest?name=APP{k=v,...}&from=&until=&format=pprof, the pprof as the
// multipart field "profile" (Pyroscope before the Push API, and servers speaking its old protocol).
Status push_pyroscope_ingest(const std::string& url, std::string_view pprof, const PushOptions& options);

// Parca: WriteRawRequest{series[{labels {__name__, service_name=APP, k=v...}, samples[{raw_profile}]}],
// normalized} to ADDR/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw as gRPC-Web.
Status push_parca(const std::string& address, std::string_view pprof, const PushOptions& options);
Status push_parca_series(const std::string& address, const std::vector<Series>& series,
                         const PushOptions& options);

// The WriteRawRequest message (protobuf), for the tests' stand-in to check and for push_parca.
std::string parca_write_raw_request(std::string_view pprof, const PushOptions& options);
std::string parca_write_raw_request(const std::vector<Series>& series);

// A label name as both engines accept it ([A-Za-z_][A-Za-z0-9_]*), or an error naming it.
Status check_label_name(std::string_view name);

}  // namespace fxprof::share
