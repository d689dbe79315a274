#include "counters/cachesim.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "base/fd.h"
#include "base/json_writer.h"
#include "base/temp_dir.h"
#include "perf/launcher.h"

namespace fxprof::counters {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

double pct(uint64_t a, uint64_t b) { return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0; }

// Sets the counts named by `events` from `values` (missing trailing values are 0).
void add(CacheCounts& c, const std::vector<std::string>& events, const std::vector<uint64_t>& values) {
  for (size_t i = 0; i < events.size() && i < values.size(); ++i) {
    const std::string& e = events[i];
    uint64_t v = values[i];
    if (e == "Ir")
      c.ir += v;
    else if (e == "I1mr")
      c.i1mr += v;
    else if (e == "ILmr")
      c.ilmr += v;
    else if (e == "Dr")
      c.dr += v;
    else if (e == "D1mr")
      c.d1mr += v;
    else if (e == "DLmr")
      c.dlmr += v;
    else if (e == "Dw")
      c.dw += v;
    else if (e == "D1mw")
      c.d1mw += v;
    else if (e == "DLmw")
      c.dlmw += v;
  }
}

std::vector<FunctionCache> top(const CacheSim& c, bool ll, size_t limit) {
  std::vector<FunctionCache> v;
  for (const FunctionCache& f : c.functions)
    if ((ll ? f.counts.ll_misses() : f.counts.d1_misses()) > 0) v.push_back(f);
  std::sort(v.begin(), v.end(), [&](const FunctionCache& a, const FunctionCache& b) {
    const uint64_t x = ll ? a.counts.ll_misses() : a.counts.d1_misses();
    const uint64_t y = ll ? b.counts.ll_misses() : b.counts.d1_misses();
    return x != y ? x > y : a.name < b.name;
  });
  if (v.size() > limit) v.resize(limit);
  return v;
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

Result<CacheSim> parse_cachegrind(const std::string& text) {
  CacheSim out;
  std::vector<std::string> events;
  // By function name: code inlined from other files (fl=/fi= switches) counts in the function it is in.
  // Each function's file is the one with most of its instructions.
  std::map<std::string, CacheCounts> fns;
  std::map<std::string, std::map<std::string, uint64_t>> fn_files;  // name -> file -> Ir
  std::string file, fn;
  CacheCounts* cur = nullptr;
  uint64_t* cur_ir = nullptr;
  bool summary = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("desc: ", 0) == 0) {
      std::string d = line.substr(6);
      // "I1 cache:         32768 B, ..." -> single spaces
      std::string squeezed;
      for (char ch : d)
        if (!(ch == ' ' && !squeezed.empty() && squeezed.back() == ' ')) squeezed += ch;
      out.caches.push_back(squeezed);
    } else if (line.rfind("events: ", 0) == 0) {
      std::istringstream es(line.substr(8));
      std::string e;
      while (es >> e) events.push_back(e);
    } else if (line.rfind("fl=", 0) == 0) {
      file = line.substr(3);
      cur = nullptr;
    } else if (line.rfind("fi=", 0) == 0 || line.rfind("fe=", 0) == 0) {
      // inlined code: counted in the enclosing function, as cg_annotate's per-function totals do
    } else if (line.rfind("fn=", 0) == 0) {
      fn = line.substr(3);
      cur = &fns[fn];
      cur_ir = &fn_files[fn][file];
    } else if (line.rfind("summary:", 0) == 0) {
      std::istringstream vs(line.substr(8));
      std::vector<uint64_t> v;
      uint64_t x;
      while (vs >> x) v.push_back(x);
      out.total = {};
      add(out.total, events, v);
      summary = true;
    } else if (!line.empty() && line[0] >= '0' && line[0] <= '9' && cur) {
      std::istringstream vs(line);
      uint64_t lineno;
      vs >> lineno;
      std::vector<uint64_t> v;
      uint64_t x;
      while (vs >> x) v.push_back(x);
      const uint64_t before = cur->ir;
      add(*cur, events, v);
      *cur_ir += cur->ir - before;
    }
  }
  if (events.empty()) return Err("not a Cachegrind output file (no events line)");
  if (std::find(events.begin(), events.end(), "D1mr") == events.end())
    return Err("Cachegrind ran without its cache simulation (no D1mr events)");
  for (auto& [name, c] : fns) {
    std::string best;
    uint64_t most = 0;
    for (const auto& [f, ir] : fn_files[name])
      if (best.empty() || ir > most) best = f, most = ir;
    out.functions.push_back({name, best, c});
    if (!summary) {
      CacheCounts& t = out.total;
      t.ir += c.ir, t.i1mr += c.i1mr, t.ilmr += c.ilmr, t.dr += c.dr, t.d1mr += c.d1mr, t.dlmr += c.dlmr;
      t.dw += c.dw, t.d1mw += c.d1mw, t.dlmw += c.dlmw;
    }
  }
  return out;
}

Result<CacheSim> run_cache_sim(const std::vector<std::string>& command, uint64_t ll_bytes) {
  if (command.empty()) return Err("--cache-sim needs a command to run");
  const TempFolder tmp("fxprof-cachegrind");
  if (tmp.path().empty()) return Err("cannot create a temporary folder: " + errno_text(errno));
  const std::string out_path = tmp.path() + "/cachegrind.out";
  std::vector<std::string> args = {"valgrind", "--tool=cachegrind", "--cache-sim=yes", "-q",
                                   "--cachegrind-out-file=" + out_path};
  if (ll_bytes) args.push_back("--LL=" + std::to_string(ll_bytes) + ",16,64");
  args.insert(args.end(), command.begin(), command.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int errp[2];
  if (pipe2(errp, O_CLOEXEC) != 0) return Err("pipe: " + errno_text(errno));
  UniqueFd err_r(errp[0]), err_w(errp[1]);
  const uint64_t t0 = now_ns();
  const pid_t pid = fork();
  if (pid < 0) return Err("fork: " + errno_text(errno));
  if (pid == 0) {
    execvp(argv[0], argv.data());
    const int e = errno;
    if (write(err_w.get(), &e, sizeof e) < 0) _exit(127);
    _exit(127);
  }
  err_w.reset();
  int exec_err = 0;
  const bool failed = read(err_r.get(), &exec_err, sizeof exec_err) == static_cast<ssize_t>(sizeof exec_err);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (failed)
    return Err("--cache-sim needs valgrind (Cachegrind), which cannot run: " + errno_text(exec_err) +
               " (Debian: apt-get install valgrind)");
  const double elapsed = static_cast<double>(now_ns() - t0) / 1e9;
  auto text = read_file(out_path);
  if (!text || text->empty()) {
    // valgrind could not start the program (a missing command): its own message is already on stderr.
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    return Err("Cachegrind wrote no results for '" + command[0] + "'", code ? code : 1);
  }
  auto sim = parse_cachegrind(*text);
  if (!sim) return sim;
  sim->command = command;
  sim->elapsed_s = elapsed;
  sim->exit_status = perf::exit_status_of(status);
  return sim;
}

std::string format_cache_sim(const CacheSim& c, size_t limit) {
  const CacheCounts& t = c.total;
  const uint64_t drefs = t.dr + t.dw;
  std::string out = "\n Simulated caches (Cachegrind, not hardware counters; the run took " +
                    fmt("%.2f", c.elapsed_s) + " s under simulation):\n";
  for (const std::string& d : c.caches) out += "   " + d + "\n";
  char b[200];
  std::snprintf(b, sizeof b, "\n%18s  I refs\n%18s  I1 misses     # %6.2f %% I1 miss rate (simulated)\n",
                std::to_string(t.ir).c_str(), std::to_string(t.i1mr).c_str(), pct(t.i1mr, t.ir));
  out += b;
  std::snprintf(b, sizeof b, "%18s  D refs        # %s reads, %s writes\n", std::to_string(drefs).c_str(),
                std::to_string(t.dr).c_str(), std::to_string(t.dw).c_str());
  out += b;
  std::snprintf(b, sizeof b, "%18s  D1 misses     # %6.2f %% D1 miss rate (simulated)\n",
                std::to_string(t.d1_misses()).c_str(), pct(t.d1_misses(), drefs));
  out += b;
  std::snprintf(b, sizeof b, "%18s  LL misses     # %6.2f %% LL miss rate (simulated, of all references)\n",
                std::to_string(t.ll_misses()).c_str(), pct(t.ll_misses(), t.ir + drefs));
  out += b;
  std::snprintf(b, sizeof b, "%18s  LLd misses    # %6.2f %% of data references miss the last level\n",
                std::to_string(t.dlmr + t.dlmw).c_str(), pct(t.dlmr + t.dlmw, drefs));
  out += b;
  for (bool ll : {false, true}) {
    auto v = top(c, ll, limit);
    if (v.empty()) continue;
    out += std::string("\n Top functions by ") + (ll ? "LL" : "D1") + " misses (simulated):\n";
    for (const FunctionCache& f : v) {
      const uint64_t m = ll ? f.counts.ll_misses() : f.counts.d1_misses();
      std::snprintf(b, sizeof b, "%18s  %6.2f %%  ", std::to_string(m).c_str(),
                    pct(m, ll ? t.ll_misses() : t.d1_misses()));
      out += b + f.name + " (" + f.file + ")" +
             (ll ? fmt(", %.2f %% of its data references miss LL\n",
                       pct(f.counts.dlmr + f.counts.dlmw, f.counts.dr + f.counts.dw))
                 : fmt(", %.2f %% of its data references miss D1\n",
                       pct(f.counts.d1_misses(), f.counts.dr + f.counts.dw)));
    }
  }
  const double d1 = pct(t.d1_misses(), drefs), lld = pct(t.dlmr + t.dlmw, drefs);
  out += "\n What they suggest:\n";
  out += lld > 1
             ? "  - Over 1% of data references miss the last-level cache: the working set is larger than the "
               "caches; the functions above touch memory in an order the caches cannot keep up with "
               "(strided or random access, large structures).\n"
         : d1 > 5
             ? "  - Data misses D1 often but is found in the last level: the working set fits the larger "
               "caches; tighter data (smaller structures, contiguous arrays, blocking) keeps it in D1.\n"
             : "  - Few simulated misses: the data fits the caches, memory is not what slows this program.\n";
  return out;
}

std::string format_cache_sim_json(const CacheSim& c, size_t limit) {
  std::string s;
  {
    JsonWriter w(s);
    auto counts = [&](const CacheCounts& k) {
      w.begin_object().key("Ir").value(k.ir).key("I1mr").value(k.i1mr).key("ILmr").value(k.ilmr);
      w.key("Dr").value(k.dr).key("D1mr").value(k.d1mr).key("DLmr").value(k.dlmr);
      w.key("Dw").value(k.dw).key("D1mw").value(k.d1mw).key("DLmw").value(k.dlmw).end_object();
    };
    const CacheCounts& t = c.total;
    w.begin_object().key("simulated").value(true).key("command").begin_array();
    for (const std::string& a : c.command) w.value(a);
    w.end_array().key("exitStatus").value(c.exit_status).key("elapsedSeconds").value(c.elapsed_s);
    w.key("caches").begin_array();
    for (const std::string& d : c.caches) w.value(d);
    w.end_array().key("total");
    counts(t);
    w.key("i1MissRate").value(pct(t.i1mr, t.ir) / 100);
    w.key("d1MissRate").value(pct(t.d1_misses(), t.dr + t.dw) / 100);
    w.key("llMissRate").value(pct(t.ll_misses(), t.ir + t.dr + t.dw) / 100);
    w.key("lldMissRate").value(pct(t.dlmr + t.dlmw, t.dr + t.dw) / 100);
    for (bool ll : {false, true}) {
      w.key(ll ? "topByLLMisses" : "topByD1Misses").begin_array();
      for (const FunctionCache& f : top(c, ll, limit)) {
        w.begin_object().key("function").value(f.name).key("file").value(f.file).key("counts");
        counts(f.counts);
        w.end_object();
      }
      w.end_array();
    }
    w.end_object();
  }
  s += "\n";
  return s;
}

}  // namespace fxprof::counters
