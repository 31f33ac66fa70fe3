#define BOOST_TEST_MODULE subprocess
#include <boost/test/unit_test.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/subprocess.h"

namespace poolcoord::base {
namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/poolcoord-subprocess-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

int WaitExit(pid_t pid) {
  int status = 0;
  BOOST_REQUIRE(waitpid(pid, &status, 0) == pid);
  BOOST_REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

BOOST_AUTO_TEST_CASE(runs_the_program_with_its_output_in_the_log) {
  TempDir dir;
  const std::string log = dir.path + "/out.log";
  auto pid = SpawnWithLog({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, log, SIGKILL);
  BOOST_REQUIRE(pid.ok());
  BOOST_TEST(WaitExit(*pid) == 3);
  BOOST_TEST(Read(log) == "out\nerr\n");
}

BOOST_AUTO_TEST_CASE(a_program_that_cannot_run_exits_127) {
  TempDir dir;
  auto pid = SpawnWithLog({dir.path + "/no-such-program"}, dir.path + "/log", SIGKILL);
  BOOST_REQUIRE(pid.ok());
  BOOST_TEST(WaitExit(*pid) == 127);
}

BOOST_AUTO_TEST_CASE(free_port_can_be_bound) {
  auto port = FreeLoopbackPort();
  BOOST_REQUIRE(port.ok());
  BOOST_TEST(*port > 0);
  BOOST_TEST(*port < 65536);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  BOOST_TEST(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  close(fd);
}

}  // namespace
}  // namespace poolcoord::base
