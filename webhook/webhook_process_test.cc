// The built missile-webhook over HTTPS, as the API server calls it: a certificate made by the
// openssl command, the server on a free localhost port, AdmissionReviews sent by an HTTPS
// client that checks the certificate; then SIGTERM. And the errors that keep it from starting.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "subprocess.h"
#include "test_pods.h"

namespace missile::webhook {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A port no one listens on now (bound to port 0, then closed).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// A self-signed certificate for localhost and its key, in `dir` as `name`.pem and
// `name`-key.pem.
void MakeCertificate(const std::string& dir, const std::string& name) {
  missile::testing::ProcessResult r = missile::testing::Run(
      {OPENSSL_BIN, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
       "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout",
       dir + "/" + name + "-key.pem", "-out", dir + "/" + name + ".pem"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

class WebhookProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new missile::testing::TempDir();
    MakeCertificate(dir_->path(), "server");
    MakeCertificate(dir_->path(), "other");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void TearDown() override {
    if (server_.running()) {
      server_.Kill(SIGKILL);
      server_.Wait(10);
    }
  }

  static std::string Path(const std::string& name) { return dir_->path() + "/" + name; }

  // Starts the webhook and waits until /healthz answers.
  void StartServer() {
    port_ = FreePort();
    ASSERT_GT(port_, 0);
    ASSERT_TRUE(
        server_.Start({WEBHOOK_BIN, "--listen", "127.0.0.1:" + std::to_string(port_), "--tls-cert",
                       Path("server.pem"), "--tls-key=" + Path("server-key.pem")},
                      {}, Path("server.log")));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (httplib::Result r = Client()->Get("/healthz"); r && r->status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "no answer on /healthz: " << missile::testing::ReadFile(Path("server.log"));
  }

  // A client that trusts the server's certificate only.
  std::unique_ptr<httplib::SSLClient> Client() const {
    auto client = std::make_unique<httplib::SSLClient>("localhost", port_);
    client->set_ca_cert_path(Path("server.pem"));
    client->enable_server_certificate_verification(true);
    client->set_connection_timeout(std::chrono::seconds(5));
    client->set_read_timeout(std::chrono::seconds(10));
    return client;
  }

  // The AdmissionReview the server answers to `review`.
  Json Mutate(const Json& review) {
    httplib::Result r = Client()->Post("/mutate", review.dump(), "application/json");
    EXPECT_TRUE(r) << httplib::to_string(r.error());
    if (!r) return Json();
    EXPECT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    return Json::parse(r->body);
  }

  static missile::testing::TempDir* dir_;
  missile::testing::Child server_;
  int port_ = -1;
};

missile::testing::TempDir* WebhookProcessTest::dir_ = nullptr;

TEST_F(WebhookProcessTest, AnswersReviewsOverHttpsAndStopsOnSigterm) {
  StartServer();
  httplib::Result health = Client()->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->body, "ok\n");

  Json review = test_pods::ReviewOf(test_pods::ReplicaPod("be"));
  Json mutated = Mutate(review);
  EXPECT_EQ(mutated["kind"], "AdmissionReview");
  EXPECT_EQ(mutated["response"]["uid"], review["request"]["uid"]);
  EXPECT_EQ(mutated["response"]["allowed"], true);
  EXPECT_EQ(mutated["response"]["patchType"], "JSONPatch");
  std::string patch;
  ASSERT_TRUE(absl::Base64Unescape(mutated["response"]["patch"].get<std::string>(), &patch));
  Json pod = test_pods::ReplicaPod("be").patch(Json::parse(patch));
  EXPECT_EQ(pod["spec"]["containers"][0]["env"][1],
            Json({{"name", "MISSILE_TENANT_CLASS"}, {"value", "be"}}));

  Json denied = Mutate(test_pods::ReviewOf(test_pods::ReplicaPod("fast")));
  EXPECT_EQ(denied["response"]["allowed"], false);
  EXPECT_EQ(denied["response"]["status"]["message"], "missile.io/class: 'fast' is not ls or be");

  Json plain_pod = test_pods::ReplicaPod();
  plain_pod["metadata"].erase("annotations");
  EXPECT_EQ(Mutate(test_pods::ReviewOf(plain_pod))["response"],
            Json({{"uid", review["request"]["uid"]}, {"allowed", true}}));

  server_.Kill(SIGTERM);
  EXPECT_EQ(server_.Wait(10), 0);
  std::string log = missile::testing::ReadFile(Path("server.log"));
  EXPECT_THAT(log, HasSubstr("missile-webhook info: serving HTTPS on 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("pod shop/web-7d4b9c-: mutated"));
  EXPECT_THAT(log, HasSubstr("pod shop/web-7d4b9c-: denied: missile.io/class: 'fast'"));
}

TEST_F(WebhookProcessTest, BadRequestsGet400AndTheServerCarriesOn) {
  StartServer();
  httplib::Result garbage = Client()->Post("/mutate", "{\"kind\": ", "application/json");
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->status, 400);
  EXPECT_THAT(garbage->body, StartsWith("the body is not valid JSON: "));

  Json no_uid = test_pods::ReviewOf(test_pods::ReplicaPod());
  no_uid["request"].erase("uid");
  httplib::Result r = Client()->Post("/mutate", no_uid.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, "the review's request has no uid\n");

  httplib::Result huge = Client()->Post("/mutate", std::string(4 << 20, ' '), "application/json");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 400);
  EXPECT_THAT(huge->body, HasSubstr("over the limit of 3145728 bytes"));

  httplib::Result deep = Client()->Post("/mutate", std::string(1 << 20, '['), "application/json");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->status, 400);

  httplib::Result elsewhere = Client()->Get("/mutate");
  ASSERT_TRUE(elsewhere);
  EXPECT_EQ(elsewhere->status, 404);

  EXPECT_EQ(Mutate(test_pods::ReviewOf(test_pods::ReplicaPod()))["response"]["allowed"], true);
  server_.Kill(SIGTERM);
  EXPECT_EQ(server_.Wait(10), 0);
}

TEST_F(WebhookProcessTest, ClientThatDoesNotTrustTheCertificateIsRefused) {
  StartServer();
  httplib::SSLClient client("localhost", port_);
  client.set_ca_cert_path(Path("other.pem"));
  client.enable_server_certificate_verification(true);
  httplib::Result r = client.Get("/healthz");
  EXPECT_FALSE(r);
  EXPECT_EQ(r.error(), httplib::Error::SSLServerVerification);
}

TEST_F(WebhookProcessTest, WrongTlsFilesAreNamed) {
  missile::testing::ProcessResult r = missile::testing::Run(
      {WEBHOOK_BIN, "--tls-cert", Path("absent.pem"), "--tls-key", Path("server-key.pem")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "missile-webhook: --tls-cert " + Path("absent.pem") + ": No such file or directory\n");
  r = missile::testing::Run(
      {WEBHOOK_BIN, "--tls-cert", Path("server.pem"), "--tls-key", Path("server.pem")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--tls-key " + Path("server.pem") + ": no PEM private key"));
  r = missile::testing::Run(
      {WEBHOOK_BIN, "--tls-cert", Path("server.pem"), "--tls-key", Path("other-key.pem")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "missile-webhook: --tls-key " + Path("other-key.pem") +
                       " is not the key of --tls-cert " + Path("server.pem") + "\n");
}

TEST_F(WebhookProcessTest, PortInUseAndBadUsage) {
  StartServer();
  missile::testing::ProcessResult r = missile::testing::Run(
      {WEBHOOK_BIN, "--listen", "127.0.0.1:" + std::to_string(port_), "--tls-cert",
       Path("server.pem"), "--tls-key", Path("server-key.pem")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot listen on 127.0.0.1:" + std::to_string(port_)));
  r = missile::testing::Run({WEBHOOK_BIN, "--tls-key", "k.pem"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "missile-webhook: --tls-cert FILE is required\n");
}

TEST_F(WebhookProcessTest, HelpAndVersion) {
  missile::testing::ProcessResult r = missile::testing::Run({WEBHOOK_BIN, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("usage: missile-webhook --tls-cert FILE --tls-key FILE"));
  r = missile::testing::Run({WEBHOOK_BIN, "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("missile-webhook 0."));
}

}  // namespace
}  // namespace missile::webhook
