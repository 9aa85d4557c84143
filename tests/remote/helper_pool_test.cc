// HelperPool's DNS helpers (helpers.dns): the addresses a lookup returns
// become helpers, those that leave the records are dropped, and a failed
// lookup keeps what the last good one found. The resolver is a fake; the
// addresses are closed loopback ports, so every probe fails at once.
#include "server/remote/helper_pool.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/wait_for.h"

namespace stoker::remote {
namespace {

using ::testing::ElementsAre;
using testing::WaitFor;

class FakeDns {
 public:
  void Set(absl::StatusOr<std::vector<std::string>> answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_ = std::move(answer);
  }
  absl::StatusOr<std::vector<std::string>> Resolve(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    names_.push_back(name);
    ++lookups_;
    return answer_;
  }
  int lookups() {
    std::lock_guard<std::mutex> lock(mu_);
    return lookups_;
  }
  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lock(mu_);
    return names_;
  }

 private:
  std::mutex mu_;
  absl::StatusOr<std::vector<std::string>> answer_;
  std::vector<std::string> names_;
  int lookups_ = 0;
};

std::vector<std::string> Addresses(const HelperPool& pool) {
  std::vector<std::string> out;
  for (const service::HelperStats& h : pool.Stats()) out.push_back(h.address);
  std::sort(out.begin(), out.end());
  return out;
}

// Waits until a lookup after the current one has been applied.
bool NextLookup(FakeDns& dns) {
  const int seen = dns.lookups();
  return WaitFor([&] { return dns.lookups() >= seen + 2; },
                 std::chrono::seconds(10));
}

TEST(HelperPoolDnsTest, HelpersFollowTheRecords) {
  FakeDns dns;
  dns.Set(std::vector<std::string>{"127.0.0.1:1", "127.0.0.1:2"});
  config::HelperOptions options;
  options.addresses = {"127.0.0.1:9"};  // Static: kept whatever DNS says.
  options.dns = "helpers.example:7411";
  options.dns_refresh_seconds = 0.05;
  HelperPool pool(
      options, [] { return true; },
      [&dns](const std::string& name) { return dns.Resolve(name); });
  EXPECT_THAT(Addresses(pool), ElementsAre("127.0.0.1:9"));
  pool.Start();
  ASSERT_TRUE(WaitFor([&] { return Addresses(pool).size() == 3; },
                      std::chrono::seconds(10)));
  EXPECT_THAT(Addresses(pool),
              ElementsAre("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:9"));
  EXPECT_EQ(dns.names().front(), "helpers.example:7411");

  // One leaves, one joins.
  dns.Set(std::vector<std::string>{"127.0.0.1:2", "127.0.0.1:3"});
  ASSERT_TRUE(NextLookup(dns));
  EXPECT_THAT(Addresses(pool),
              ElementsAre("127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:9"));

  // A failed lookup changes nothing.
  dns.Set(absl::NotFoundError("helpers.example: no such name"));
  ASSERT_TRUE(NextLookup(dns));
  EXPECT_THAT(Addresses(pool),
              ElementsAre("127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:9"));
  // Nothing is up (the ports are closed), so nothing is placed.
  for (const service::HelperStats& h : pool.Stats()) {
    EXPECT_FALSE(h.up) << h.address;
  }
  pool.Stop();
}

TEST(HelperPoolDnsTest, ResolveHelpersReadsHostsAndLiterals) {
  absl::StatusOr<std::vector<std::string>> v4 =
      ResolveHelpers("127.0.0.1:7411");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_THAT(*v4, ElementsAre("127.0.0.1:7411"));
  absl::StatusOr<std::vector<std::string>> v6 = ResolveHelpers("[::1]:7411");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_THAT(*v6, ElementsAre("[::1]:7411"));
  // localhost comes from /etc/hosts: 127.0.0.1, and ::1 where it is listed.
  absl::StatusOr<std::vector<std::string>> local =
      ResolveHelpers("localhost:7411");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(*local, ::testing::Contains("127.0.0.1:7411"));
  // No name server is asked: the host is a literal, the port is not one.
  absl::StatusOr<std::vector<std::string>> none =
      ResolveHelpers("127.0.0.1:nope");
  EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
  EXPECT_THAT(std::string(none.status().message()),
              ::testing::HasSubstr("helpers.dns: 127.0.0.1"));
}

}  // namespace
}  // namespace stoker::remote
