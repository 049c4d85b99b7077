// The Prometheus endpoint on the asynchronous HttpServer (issue #25 N5):
// what a scrape returns, that hundreds of idle, slow and reconnecting
// clients do not fail a scrape, promtool's lint, IPv6 and port errors.
#include "service/http/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/http/http_server.h"
#include "tests/testing/prometheus_text.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::FamilyNames;
using ::dllm::testing::StatusIs;

// A connected socket to the endpoint (IPv4 or IPv6 loopback), or -1.
int Connect(int port, bool ipv6 = false) {
  const int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc;
  if (ipv6) {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    addr.sin6_addr = in6addr_loopback;
    rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  if (rc != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// One request over a fresh connection; the whole response ("" on failure).
std::string HttpGet(int port, const std::string& path, bool ipv6 = false,
                    const std::string& method = "GET") {
  const int fd = Connect(port, ipv6);
  if (fd < 0) {
    ADD_FAILURE() << "cannot connect to port " << port;
    return "";
  }
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const std::string request =
      method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
  close(fd);
  return response;
}

std::string Body(const std::string& response) {
  const size_t split = response.find("\r\n\r\n");
  return split == std::string::npos ? "" : response.substr(split + 4);
}

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    std::string candidate = std::string(dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MetricsOptions o;
    o.model_name = "tiny";
    auto m = ServiceMetrics::Create(o);
    ASSERT_TRUE(m.ok()) << m.status();
    metrics_ = std::move(*m);
    auto e = MetricsEndpoint::Start("127.0.0.1:0", metrics_.get());
    ASSERT_TRUE(e.ok()) << e.status();
    endpoint_ = std::move(*e);
  }
  std::unique_ptr<ServiceMetrics> metrics_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
};

TEST_F(MetricsEndpointTest, ScrapeServesTheSerializedFamilies) {
  metrics_->OnStep(8, 0.01, 0.001, 1, 2);
  const std::string response = HttpGet(endpoint_->port(), "/metrics");
  EXPECT_THAT(response, ::testing::StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(response, ::testing::HasSubstr("Content-Type: text/plain; version=0.0.4"));
  const std::string body = Body(response);
  EXPECT_EQ(FamilyNames(body), FamilyNames(metrics_->Serialize()));
  EXPECT_THAT(body, ::testing::HasSubstr("\ndllm_steps_total{model=\"tiny\"} 1\n"));
  // HEAD: the head alone; other paths and methods are refused.
  const std::string head = HttpGet(endpoint_->port(), "/metrics", false, "HEAD");
  EXPECT_THAT(head, ::testing::StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(Body(head), "");
  EXPECT_THAT(HttpGet(endpoint_->port(), "/"), ::testing::StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(HttpGet(endpoint_->port(), "/metrics", false, "POST"),
              ::testing::StartsWith("HTTP/1.1 405"));
}

// civetweb's 16 threads were held by 32-64 reconnecting clients, failing most
// scrapes. Now 200 idle connections, 50 that never finish their head and 8
// threads reconnecting as fast as they can (past the endpoint's 256
// connections from one address, so the oldest idle ones give way) leave
// every scrape answered within 3 s: a scrape held up behind them would wait
// at least the 5 s header timeout (the bound is loose so a busy machine
// cannot fail it).
TEST_F(MetricsEndpointTest, IdleSlowAndReconnectingClientsDoNotBlockAScrape) {
  const int port = endpoint_->port();
  std::vector<int> held;
  for (int i = 0; i < 200; ++i) held.push_back(Connect(port));
  for (int i = 0; i < 50; ++i) {
    const int fd = Connect(port);
    const std::string prefix = "GET /metrics HTTP/1.1\r\nHost: x";
    EXPECT_GT(write(fd, prefix.data(), prefix.size()), 0);
    held.push_back(fd);
  }
  for (int fd : held) ASSERT_GE(fd, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // idle long enough to give way
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int t = 0; t < 8; ++t) {
    churn.emplace_back([&] {
      while (!stop.load()) {
        const int fd = Connect(port);
        if (fd >= 0) close(fd);
      }
    });
  }
  for (int i = 0; i < 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THAT(HttpGet(port, "/metrics"), ::testing::StartsWith("HTTP/1.1 200"));
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3.0);
  }
  stop = true;
  for (std::thread& t : churn) t.join();
  // A connection that sent no complete request in time is closed (5 s).
  timeval timeout{10, 0};
  setsockopt(held.back(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char reply[256];
  EXPECT_GT(read(held.back(), reply, sizeof(reply)), 0) << "no 408 for the unfinished request";
  for (int fd : held) close(fd);
}

TEST_F(MetricsEndpointTest, PromtoolAcceptsTheScrape) {
  const std::string promtool = FindOnPath("promtool");
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not on PATH (Debian package `prometheus`; scripts/setup-deps "
                    "installs it)";
  }
  // Observations everywhere, so non-zero buckets and sums are linted too.
  metrics_->OnStarted(0.01, 5, 32);
  metrics_->OnForward(ForwardStats{0.001, 0.001, 0.001, 0.001, 0.001, 0.001, 0.006}, 0.006);
  metrics_->OnStep(8, 0.01, 0.001, 1, 2);
  metrics_->OnFinished(RpcKind::kGenerate, FinishKind::kLength, absl::StatusCode::kOk, 0.1, 1, 2);
  const std::string body = Body(HttpGet(endpoint_->port(), "/metrics"));
  ASSERT_FALSE(body.empty());
  const std::string path = dllm::testing::TempDir() + "/scrape.txt";
  dllm::testing::WriteFileOrDie(path, body);
  const std::string command = promtool + " check metrics < " + path + " 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[512];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) output += buf;
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_EQ(output, "");
}

// Issue #25: `--metrics-listen [::1]:P` failed to start.
TEST_F(MetricsEndpointTest, ListensOnIpv6AndReportsAPortInUse) {
  auto v6 = MetricsEndpoint::Start("[::1]:0", metrics_.get());
  if (!v6.ok() && Connect(endpoint_->port(), true) < 0 &&
      absl::StrContains(v6.status().message(), "address")) {
    GTEST_SKIP() << "no IPv6 loopback here: " << v6.status();
  }
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_THAT(HttpGet((*v6)->port(), "/metrics", true), ::testing::StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(
      MetricsEndpoint::Start("127.0.0.1:" + std::to_string(endpoint_->port()), metrics_.get())
          .status(),
      StatusIs(absl::StatusCode::kUnavailable, "--metrics-listen: cannot listen on"));
}

// Issue #34 R4: the per-peer limit counts networks, so that eight
// addresses of one /24, or the addresses of one IPv6 /64, are one peer.
TEST(PeerPrefixTest, CountsAnIpv4Slash24AndAnIpv6Slash64) {
  EXPECT_EQ(PeerPrefix("127.0.0.1"), "127.0.0.0/24");
  EXPECT_EQ(PeerPrefix("127.0.0.9"), "127.0.0.0/24");
  EXPECT_EQ(PeerPrefix("10.1.2.3"), "10.1.2.0/24");
  EXPECT_NE(PeerPrefix("10.1.3.3"), PeerPrefix("10.1.2.3"));
  EXPECT_EQ(PeerPrefix("::ffff:10.1.2.3"), "10.1.2.0/24");
  EXPECT_EQ(PeerPrefix("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(PeerPrefix("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64");
  EXPECT_NE(PeerPrefix("2001:db8:1:3::1"), PeerPrefix("2001:db8:1:2::1"));
  EXPECT_EQ(PeerPrefix("::1"), "::/64");
  EXPECT_EQ(PeerPrefix("unknown"), "unknown");
}

// A stream that pauses between its two events until told to go on, for
// HttpServer::Stop() to begin in.
class PausingStream final : public HttpHandler {
 public:
  void Handle(const HttpRequest&, HttpResponder& out) override {
    out.StartEvents();
    out.SendEvents("data: one\n\n");
    started.set_value();
    resume_future.wait();
    out.SendEvents("data: two\n\n");
    out.EndEvents();
  }
  void OnTransportResponse(int) override {}
  std::promise<void> started, resume;
  std::shared_future<void> resume_future = resume.get_future().share();
};

// Found under stress (HttpDrainTest, issue #34): Stop() closes the acceptor
// and the idle connections; a handler between two writes then had no work
// pending on the I/O threads, which returned, and its next write waited
// forever: the client never got the end of its stream, and Stop() gave up
// on the connection.
TEST(HttpServerTest, AStreamFinishesWhileTheServerStops) {
  PausingStream handler;
  HttpOptions o;
  o.listen = "127.0.0.1:0";
  auto server = HttpServer::Start(o, &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = Connect((*server)->port());
  ASSERT_GE(fd, 0);
  timeval timeout{20, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const std::string request = "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  handler.started.get_future().wait();
  bool stopped_cleanly = false;
  std::thread stop([&] { stopped_cleanly = (*server)->Stop(10); });
  // Long enough for Stop() to close the acceptor and for idle I/O threads
  // to return, were nothing holding them.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  handler.resume.set_value();
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
  close(fd);
  stop.join();
  EXPECT_THAT(response, ::testing::HasSubstr("data: two"));
  EXPECT_THAT(response, ::testing::EndsWith("0\r\n\r\n")) << "the stream's last chunk";
  EXPECT_TRUE(stopped_cleanly);
}

}  // namespace
}  // namespace dllm
