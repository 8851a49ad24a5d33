// missiled's metrics endpoint scraped by a real Prometheus: missiled and a tenant run on the
// driver test double, a Prometheus (the Debian package's binary) scrapes missiled every second
// from a temporary configuration and storage directory on free loopback ports, and the test
// reads the values back through Prometheus's HTTP query API (/api/v1/query).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "daemon_process_fixture.h"

namespace missile::process_test {
namespace {

// A loopback port nobody listens on now (the kernel's choice for port 0).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// GET (or `method`) http://127.0.0.1:<port><target>: the whole response, or "" when nothing
// answers.
std::string HttpGet(int port, const std::string& target, const std::string& method = "GET") {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return "";
  }
  const std::string req =
      method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) break;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  char hex[4];
  for (unsigned char c : s) {
    if (isalnum(c) || c == '_' || c == '-' || c == '.') {
      out += static_cast<char>(c);
    } else {
      snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

class PrometheusTest : public DaemonTest {
 protected:
  void TearDown() override {
    if (prometheus_.running()) {
      prometheus_.Kill(SIGTERM);
      prometheus_.Wait(20);
    }
    DaemonTest::TearDown();
  }

  void StartPrometheus(int target_port) {
    ASSERT_TRUE(std::string(PROMETHEUS).size() > 0)
        << "the prometheus binary was not found when configuring (scripts/install-deps.sh "
           "installs the Debian package prometheus)";
    const std::string config = dir_.path() + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "scrape_configs:\n  - job_name: missiled\n    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << target_port << "']\n";
    prom_port_ = FreePort();
    ASSERT_GT(prom_port_, 0);
    ASSERT_TRUE(prometheus_.Start(
        {PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + dir_.path() + "/tsdb",
         "--web.listen-address=127.0.0.1:" + std::to_string(prom_port_)},
        {{"HOME", dir_.path()}}, dir_.path() + "/prometheus.log"));
    for (int i = 0; i < 600; ++i) {  // at most 60 s on a loaded machine
      if (HttpGet(prom_port_, "/-/ready").find(" 200 ") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "Prometheus not ready:\n" << testing::ReadFile(dir_.path() + "/prometheus.log");
  }

  // The value of the first series `query` returns now, or "" when it returns none.
  std::string Query(const std::string& query) {
    const std::string r = HttpGet(prom_port_, "/api/v1/query?query=" + UrlEncode(query));
    size_t pos = r.find("\"value\":[");
    if (pos == std::string::npos) return "";
    pos = r.find(",\"", pos);
    if (pos == std::string::npos) return "";
    return r.substr(pos + 2, r.find('"', pos + 2) - pos - 2);
  }

  // Polls `query` until it returns `want` (scrapes come every second); returns the last value.
  std::string QueryUntil(const std::string& query, const std::string& want) {
    std::string got;
    for (int i = 0; i < 300; ++i) {  // at most 30 s
      got = Query(query);
      if (got == want) return got;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return got;
  }

  Child prometheus_;
  int prom_port_ = 0;
};

// long: one daemon, one tenant and one Prometheus for the whole life of a tenant's series
TEST_F(PrometheusTest, PrometheusScrapesTenantMemoryAndSessions) {
  const int metrics_port = FreePort();
  ASSERT_GT(metrics_port, 0);
  StartDaemon("[metrics]\nenabled = true\naddress = \"127.0.0.1\"\nport = " +
              std::to_string(metrics_port) + "\n");
  // The endpoint answers before Prometheus is even there.
  EXPECT_NE(HttpGet(metrics_port, "/metrics").find("missile_build_info{version="),
            std::string::npos);
  // HEAD answers the headers alone.
  const std::string head = HttpGet(metrics_port, "/metrics", "HEAD");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_NE(head.find("\r\nContent-Length: "), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << head;
  Child web;
  auto web_env = TenantEnv("ls", "web");
  web_env["MISSILE_K8S_POD"] = "web-5f7c9-abcde";
  web_env["MISSILE_K8S_NAMESPACE"] = "prod";
  web_env["MISSILE_K8S_CONTAINER"] = "server";
  ASSERT_TRUE(web.Start({TENANT_PROBE, "alloc:16", "hold"}, web_env));
  ASSERT_EQ(web.WaitForLine("ready"), "ready");
  StartPrometheus(metrics_port);
  if (HasFatalFailure()) return;

  EXPECT_EQ(QueryUntil("up{job=\"missiled\"}", "1"), "1");
  EXPECT_EQ(
      QueryUntil("missile_tenant_used_bytes{name=\"web\",class=\"ls\",replica=\"0\",gpu=\"0\"}",
                 "16777216"),
      "16777216");
  // The pid is on the info series only.
  EXPECT_EQ(QueryUntil("missile_tenant_info{name=\"web\",replica=\"0\",pid=\"" +
                           std::to_string(web.pid()) + "\"}",
                       "1"),
            "1");
  EXPECT_EQ(Query("count(missile_tenant_used_bytes{pid!=\"\"})"), "");
  // The Kubernetes identity the shim sent, on the info series only, joined to the memory.
  EXPECT_EQ(QueryUntil("missile_tenant_info{name=\"web\",pod=\"web-5f7c9-abcde\","
                       "namespace=\"prod\",container=\"server\"}",
                       "1"),
            "1");
  EXPECT_EQ(QueryUntil("sum by (namespace, pod) (missile_tenant_used_bytes * on (name, class, "
                       "replica, gpu) group_left (pod, namespace) missile_tenant_info"
                       "{namespace=\"prod\"})",
                       "16777216"),
            "16777216");
  EXPECT_EQ(Query("count(missile_tenant_used_bytes{pod!=\"\"})"), "");
  EXPECT_EQ(QueryUntil("missile_gpu_pool_leased_bytes{gpu=\"0\"}", "16777216"), "16777216");
  // Every per-GPU and per-tenant series carries the GPU's UUID as nvidia-smi and dcgm-exporter
  // write it, so that it joins with their series.
  const std::string uuid = "gpu_uuid=\"GPU-66616b65-6375-6461-2d67-707500000000\"";  // device 0
  EXPECT_EQ(QueryUntil("missile_gpu_pool_leased_bytes{" + uuid + "}", "16777216"), "16777216");
  EXPECT_EQ(QueryUntil("missile_tenant_used_bytes{name=\"web\"," + uuid + "}", "16777216"),
            "16777216");
  EXPECT_EQ(QueryUntil("count(missile_tenant_used_bytes * on(gpu_uuid) group_left() "
                       "missile_gpu_pool_capacity_bytes)",
                       "1"),
            "1");
  EXPECT_EQ(QueryUntil("missile_tenant_allocations_total{name=\"web\"}", "1"), "1");
  // The tenant's pacing fractions, under their Prometheus names (an idle LS: busy 0).
  EXPECT_EQ(QueryUntil("missile_tenant_ls_busy_ratio{name=\"web\"}", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_tenant_pacing_held_ratio{name=\"web\"}", "0"), "0");
  EXPECT_EQ(Query("count({__name__=~\"missile_.*_share\"})"), "");
  // The GPU's pacing domain: the one LS, idle.
  EXPECT_EQ(QueryUntil("missile_gpu_pacing_tenants{gpu=\"0\",class=\"ls\"}", "1"), "1");
  EXPECT_EQ(QueryUntil("missile_gpu_pacing_tenants{gpu=\"0\",class=\"be\"}", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_gpu_pacing_ls_busy{" + uuid + "}", "0"), "0");
  // Time in flight: none, since an LS alone on its GPU marks nothing (no BE to tell).
  EXPECT_EQ(QueryUntil("missile_gpu_ls_busy_seconds_total{" + uuid + "}", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_gpu_be_busy_seconds_total{" + uuid + "}", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_gpu_ls_busy_ratio{" + uuid + "}", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_gpu_be_busy_ratio{" + uuid + "}", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_tenant_busy_seconds_total{name=\"web\"}", "0"), "0");
  // The start time is the Unix time now less the uptime (both from one scrape).
  EXPECT_EQ(QueryUntil("count(abs(time() - missile_start_time_seconds - missile_uptime_seconds)"
                       " < 5)",
                       "1"),
            "1");
  EXPECT_EQ(QueryUntil("count(missile_start_time_seconds > 1.7e9)", "1"), "1");
  EXPECT_EQ(QueryUntil("missile_sessions_opened_total", "1"), "1");
  EXPECT_EQ(QueryUntil("missile_sessions_ended_total", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_sessions_active", "1"), "1");

  web.CloseStdin();
  EXPECT_EQ(web.Wait(), 0);
  EXPECT_EQ(QueryUntil("missile_sessions_ended_total", "1"), "1");
  EXPECT_EQ(QueryUntil("missile_sessions_active", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_gpu_pool_leased_bytes{gpu=\"0\"}", "0"), "0");
  EXPECT_EQ(QueryUntil("missile_gpu_pacing_tenants{gpu=\"0\",class=\"ls\"}", "0"), "0");
  // The tenant's series went stale with its session.
  EXPECT_EQ(QueryUntil("missile_tenant_used_bytes{name=\"web\"}", ""), "");

  // Its restart (a new process and session) continues the same series; only the info series
  // is a new one.
  Child again;
  ASSERT_TRUE(again.Start({TENANT_PROBE, "alloc:16", "hold"}, TenantEnv("ls", "web")));
  ASSERT_EQ(again.WaitForLine("ready"), "ready");
  EXPECT_EQ(
      QueryUntil("missile_tenant_info{name=\"web\",pid=\"" + std::to_string(again.pid()) + "\"}",
                 "1"),
      "1");
  EXPECT_EQ(QueryUntil("missile_tenant_used_bytes{name=\"web\",replica=\"0\"}", "16777216"),
            "16777216");
  EXPECT_EQ(Query("count(count_over_time(missile_tenant_used_bytes{name=\"web\"}[10m]))"), "1");
  EXPECT_EQ(Query("count(count_over_time(missile_tenant_info{name=\"web\"}[10m]))"), "2");
  again.CloseStdin();
  EXPECT_EQ(again.Wait(), 0);
}

// Time in flight, end to end: an LS request that stays 2 s on the GPU next to a BE tenant (so
// the LS marks its work) counts for the LS tenant and for the GPU's LS class, not for its BE.
TEST_F(PrometheusTest, TimeInFlightOfAnLsNextToABe) {
  const int metrics_port = FreePort();
  ASSERT_GT(metrics_port, 0);
  StartDaemon("[metrics]\nenabled = true\naddress = \"127.0.0.1\"\nport = " +
              std::to_string(metrics_port) + "\n");
  Child be;
  ASSERT_TRUE(be.Start({PACE_PROBE, "idle"}, TenantEnv("be", "batch")));
  ASSERT_FALSE(be.WaitForLine("ready", 20).empty()) << be.out();
  StartPrometheus(metrics_port);
  if (HasFatalFailure()) return;
  EXPECT_EQ(QueryUntil("missile_gpu_ls_busy_seconds_total{gpu=\"0\"}", "0"), "0");
  Child ls;
  ASSERT_TRUE(ls.Start({PACE_PROBE, "ls", "2000"}, TenantEnv("ls", "web")));
  ASSERT_FALSE(ls.WaitForLine("done", 30).empty()) << ls.out();
  EXPECT_EQ(ls.Wait(10), 0);
  // About 2 s, seen while the LS lived (its series then went stale with its session).
  EXPECT_EQ(QueryUntil("count(max_over_time(missile_tenant_busy_seconds_total{name=\"web\"}[1m])"
                       " > 1)",
                       "1"),
            "1");
  EXPECT_EQ(QueryUntil("count(missile_gpu_ls_busy_seconds_total{gpu=\"0\"} > 1.5 and "
                       "missile_gpu_ls_busy_seconds_total{gpu=\"0\"} < 4)",
                       "1"),
            "1");
  EXPECT_EQ(Query("count(max_over_time(missile_gpu_ls_busy_ratio{gpu=\"0\"}[1m]) > 0.3)"), "1");
  EXPECT_EQ(Query("missile_gpu_be_busy_seconds_total{gpu=\"0\"}"), "0");
  EXPECT_EQ(Query("missile_tenant_busy_seconds_total{name=\"batch\"}"), "0");
  be.CloseStdin();
  EXPECT_EQ(be.Wait(10), 0);
}

TEST_F(PrometheusTest, BusyMetricsPortStopsTheDaemonWithAClearError) {
  int blocker = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(blocker, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(blocker, 1), 0);
  ASSERT_EQ(getsockname(blocker, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string config = dir_.path() + "/busy.toml";
  std::ofstream(config) << "[daemon]\nsocket = \"" << socket_ << "\"\n[gpu]\nprofile_dir = \"\"\n"
                        << "[metrics]\nenabled = true\nport = " << ntohs(a.sin_port) << "\n";
  auto env = FakeEnv();
  env["LD_LIBRARY_PATH"] = FAKECUDA_DIR;
  ProcessResult r = testing::Run({MISSILED, "--config", config}, env, 30);
  close(blocker);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("metrics: cannot listen on 127.0.0.1 port"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace missile::process_test
