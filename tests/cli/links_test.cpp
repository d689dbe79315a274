// Issue 37.2: root's outputs never go where another user's link points. The suite runs as root on a machine
// whose fs.protected_symlinks may be 0 (it is here): the second local user (fxprof-test) plants links and a
// FIFO in a sticky world-writable folder, as in /tmp, and every output of every command refuses them with one
// line, leaving the files they point at as they were. A FIFO nobody reads ends the command with one line.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "base/fd.h"
#include "tests/support/support.h"

using namespace fxprof::test;

namespace {

const std::vector<std::string> kShortWork = {"sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"};

// A sticky world-writable folder (what /tmp is) inside `dir`, which the test user may reach.
std::string sticky_folder(const TempDir& dir) {
  REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
  const std::string tmp = dir.file("tmp");
  REQUIRE(::mkdir(tmp.c_str(), 0777) == 0);
  REQUIRE(::chmod(tmp.c_str(), 01777) == 0);
  return tmp;
}

// `ln -s target link` as the test user.
void plant_link(const passwd* pw, const std::string& target, const std::string& link) {
  auto r = run({"ln", "-s", target, link}, CmdOptions{.uid = pw->pw_uid, .gid = pw->pw_gid});
  INFO(r.err);
  REQUIRE(r.status == 0);
  struct stat st {};
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  REQUIRE(st.st_uid == pw->pw_uid);
}

std::string refusal(const std::string& link, const passwd* pw, bool last = true) {
  return "fxprof: refusing to write through " + link + ": a symbolic link owned by another user (uid " +
         std::to_string(pw->pw_uid) + ")" + (last ? "" : " in a world-writable folder") + "\n";
}

std::string record_profile(const TempDir& dir) {
  const std::string profile = dir.file("p.json");
  std::vector<std::string> argv{fxprof_bin(), "record", "--no-symbolicate", "-q", "-s", "-o", profile, "--"};
  argv.insert(argv.end(), kShortWork.begin(), kShortWork.end());
  auto r = run(argv);
  INFO(r.err);
  REQUIRE(r.status == 0);
  return profile;
}

}  // namespace

TEST_CASE("as root, record -o refuses another user's link in /tmp: the root-only file stays") {
  REQUIRE(geteuid() == 0);
  const passwd* pw = ensure_test_user();
  TempDir dir;
  const std::string tmp = sticky_folder(dir);
  const std::string secret = dir.file("root-only");
  { std::ofstream(secret) << "secret\n"; }
  REQUIRE(::chmod(secret.c_str(), 0600) == 0);
  const std::string link = tmp + "/prof.json.gz";
  plant_link(pw, secret, link);
  const std::string marker = dir.file("ran");
  auto r = run({fxprof_bin(), "record", "-s", "-q", "-o", link, "--", "sh", "-c", "touch " + marker});
  CHECK(r.status != 0);
  CHECK(r.err == refusal(link, pw));
  CHECK(::access(marker.c_str(), F_OK) != 0);  // refused before the program ran
  CHECK(*fxprof::read_file(secret) == "secret\n");
  struct stat st {};
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
}

TEST_CASE(
    "as root, export -o refuses another user's link: no file named by the attacker, no device written") {
  REQUIRE(geteuid() == 0);
  const passwd* pw = ensure_test_user();
  TempDir dir;
  const std::string profile = record_profile(dir);
  const std::string tmp = sticky_folder(dir);
  // A dangling link: following it would create the file the attacker named, as root.
  const std::string named = dir.file("attacker-named");
  const std::string link = tmp + "/out.folded";
  plant_link(pw, named, link);
  for (const char* format : {"folded", "svg", "pprof"}) {
    INFO(format);
    auto r = run({fxprof_bin(), "export", format, "--no-symbolicate", profile, "-o", link});
    CHECK(r.status != 0);
    CHECK(r.err == refusal(link, pw));
    CHECK(::access(named.c_str(), F_OK) != 0);
  }
  // A link to a device node root owns (a private copy of /dev/full, so a write would fail loudly).
  const std::string full = dir.file("full");
  REQUIRE(::mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0);
  const std::string to_device = tmp + "/stacks.folded";
  plant_link(pw, full, to_device);
  auto d = run({fxprof_bin(), "export", "folded", "--no-symbolicate", profile, "-o", to_device});
  CHECK(d.status != 0);
  CHECK(d.err == refusal(to_device, pw));
  // symbolicate, diff and stat write through the same place (the first two may warn about debug files
  // before they write).
  for (const auto& argv : {std::vector<std::string>{fxprof_bin(), "symbolicate", profile, "-o", link},
                           {fxprof_bin(), "diff", "--no-inline", profile, profile, "-o", link},
                           {fxprof_bin(), "stat", "-o", link, "--", "true"}}) {
    auto r = run(argv);
    INFO(argv[1] << ": " << r.err);
    CHECK(r.status != 0);
    CHECK(r.err.ends_with(refusal(link, pw)));
  }
  CHECK(::access(named.c_str(), F_OK) != 0);
}

TEST_CASE("as root, a link on the way through a sticky folder is refused; root's and our own are followed") {
  REQUIRE(geteuid() == 0);
  const passwd* pw = ensure_test_user();
  TempDir dir;
  const std::string profile = record_profile(dir);
  const std::string tmp = sticky_folder(dir);
  const std::string root_dir = dir.file("root-dir");
  REQUIRE(::mkdir(root_dir.c_str(), 0700) == 0);
  const std::string link = tmp + "/d";
  plant_link(pw, root_dir, link);
  auto r = run({fxprof_bin(), "export", "folded", "--no-symbolicate", profile, "-o", link + "/x.folded"});
  CHECK(r.status != 0);
  CHECK(r.err == refusal(link, pw, false));
  CHECK(::access((root_dir + "/x.folded").c_str(), F_OK) != 0);
  // Root's own link in the same folder is followed, to the file it names.
  const std::string own = tmp + "/own";
  REQUIRE(::symlink((root_dir + "/y.folded").c_str(), own.c_str()) == 0);
  auto ok = run({fxprof_bin(), "export", "folded", "--no-symbolicate", profile, "-o", own});
  INFO(ok.err);
  CHECK(ok.status == 0);
  CHECK(::access((root_dir + "/y.folded").c_str(), F_OK) == 0);
}

TEST_CASE(
    "as root, another user's FIFO in a sticky folder is refused; a FIFO nobody reads ends with one line") {
  REQUIRE(geteuid() == 0);
  const passwd* pw = ensure_test_user();
  TempDir dir;
  const std::string profile = record_profile(dir);
  const std::string tmp = sticky_folder(dir);
  const std::string theirs = tmp + "/fifo";
  auto m = run({"mkfifo", theirs}, CmdOptions{.uid = pw->pw_uid, .gid = pw->pw_gid});
  REQUIRE(m.status == 0);
  auto r = run({fxprof_bin(), "export", "folded", "--no-symbolicate", profile, "-o", theirs},
               CmdOptions{.timeout = std::chrono::seconds(60)});
  CHECK(r.status == 1);
  CHECK(r.err == "fxprof: refusing to write " + theirs + ": another user's (uid " +
                     std::to_string(pw->pw_uid) + ") FIFO or socket in a world-writable folder\n");
  // Our own FIFO without a reader: record used to block in open() after the run, signals blocked, until
  // SIGKILL. Now it waits a bounded time and says why (the timeout here would be a hang).
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::vector<std::string> argv{fxprof_bin(), "record", "--no-symbolicate", "-q", "-s", "-o", fifo, "--"};
  argv.insert(argv.end(), kShortWork.begin(), kShortWork.end());
  auto rec = run(argv, CmdOptions{.timeout = std::chrono::seconds(60)});
  CHECK_FALSE(rec.timed_out);
  CHECK(rec.status == 1);
  CHECK(rec.err.find("fxprof: cannot write " + fifo + ": nobody opened the FIFO for reading within 10 s\n") !=
        std::string::npos);
}
