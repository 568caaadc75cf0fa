// The strata-sim-worker helper's request (simulator/src/sim_child.h): the
// helper trusts nothing it is sent. A request is checked as the CLI checks
// its own: the plan's size before it is allocated, the hardware's ranges,
// and the plan's validity, each an InvalidArgument (the helper's exit 2).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "../../simulator/src/sim_child.h"
#include "strata/plan/plan_wire.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata::sim {
namespace {

// Bytes through a socket pair, as the helper reads its stdin.
std::string Capture(const Plan& plan, const HardwareSpec& hw) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::thread writer([&] {
    EXPECT_TRUE(WriteSimRequest(sv[0], plan, hw, {}));
    ::close(sv[0]);
  });
  std::string bytes;
  char buf[65536];
  for (ssize_t n; (n = ::read(sv[1], buf, sizeof buf)) > 0;) bytes.append(buf, static_cast<size_t>(n));
  writer.join();
  ::close(sv[1]);
  return bytes;
}

Status Feed(const std::string& bytes) {
  int sv[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::thread writer([&] {
    for (size_t at = 0; at < bytes.size();) {
      const ssize_t n = ::send(sv[0], bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
      if (n <= 0) break;  // the reader stopped early
      at += static_cast<size_t>(n);
    }
    ::close(sv[0]);
  });
  Plan plan;
  HardwareSpec hw;
  SimOptions opt;
  Status st = ReadSimRequest(sv[1], &plan, &hw, &opt);
  ::close(sv[1]);
  writer.join();
  return st;
}

void ExpectRefused(const Status& st, const std::string& needle) {
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

TEST(SimRequest, TheHelperRefusesWhatTheCliWouldNot) {
  const Scenario s = testing::Builtin("seed");
  const Plan plan = testing::MustPlanValid(s);
  EXPECT_TRUE(Feed(Capture(plan, s.hardware)).ok());
  // A plan size of 2^62 in the header: refused before it is allocated (the
  // plan's size is the header's last field).
  std::string bytes = Capture(plan, s.hardware);
  const uint64_t huge = uint64_t{1} << 62;
  const size_t head = bytes.size() - EncodePlanWire(plan).size();
  std::memcpy(bytes.data() + head - sizeof huge, &huge, sizeof huge);
  ExpectRefused(Feed(bytes), "claims a plan of 4611686018427387904 bytes, over the limit");
  // Hardware the CLI refuses.
  HardwareSpec no_nodes = s.hardware;
  no_nodes.nodes = 0;
  ExpectRefused(Feed(Capture(plan, no_nodes)), "the simulation request's hardware: hardware.nodes: must be at least 1");
  // A dependency on an op that does not exist.
  Plan far = plan;
  far.ops.back().deps.push_back(1000000000);
  ExpectRefused(Feed(Capture(far, s.hardware)), "the simulation request's plan is invalid: ");
}

}  // namespace
}  // namespace strata::sim
