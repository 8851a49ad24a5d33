#include "webhook_args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::webhook {
namespace {

using ::testing::HasSubstr;

std::string Error(const std::vector<std::string>& args) {
  absl::StatusOr<WebhookArgs> parsed = ParseWebhookArgs(args);
  EXPECT_FALSE(parsed.ok());
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

const std::vector<std::string> kTls = {"--tls-cert", "c.pem", "--tls-key=k.pem"};

std::vector<std::string> WithTls(std::vector<std::string> args) {
  args.insert(args.end(), kTls.begin(), kTls.end());
  return args;
}

TEST(WebhookArgsTest, Defaults) {
  absl::StatusOr<WebhookArgs> args = ParseWebhookArgs(kTls);
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->listen_host, "0.0.0.0");
  EXPECT_EQ(args->listen_port, 8443);
  EXPECT_EQ(args->tls_cert, "c.pem");
  EXPECT_EQ(args->tls_key, "k.pem");
  EXPECT_EQ(args->mutation.shim_dir, "/opt/missile/shim");
  EXPECT_EQ(args->mutation.socket_dir, "/run/missile");
  EXPECT_EQ(args->mutation.socket_gid, 2046);
  EXPECT_FALSE(args->help || args->version);
}

TEST(WebhookArgsTest, EveryOptionInBothForms) {
  absl::StatusOr<WebhookArgs> args =
      ParseWebhookArgs(WithTls({"--listen=[::1]:9443", "--shim-dir", "/srv/shim/",
                                "--socket-dir=/var/run/m", "--socket-gid", "4294967294"}));
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->listen_host, "::1");
  EXPECT_EQ(args->listen_port, 9443);
  EXPECT_EQ(args->mutation.shim_dir, "/srv/shim");
  EXPECT_EQ(args->mutation.socket_dir, "/var/run/m");
  EXPECT_EQ(args->mutation.socket_gid, 4294967294);
  args = ParseWebhookArgs(WithTls({"--listen", "127.0.0.1:1"}));
  ASSERT_TRUE(args.ok()) << args.status();
  EXPECT_EQ(args->listen_host, "127.0.0.1");
  EXPECT_EQ(args->listen_port, 1);
}

TEST(WebhookArgsTest, HelpAndVersionNeedNoTls) {
  EXPECT_TRUE(ParseWebhookArgs({"--help"})->help);
  EXPECT_TRUE(ParseWebhookArgs({"-h"})->help);
  EXPECT_TRUE(ParseWebhookArgs({"--version"})->version);
  EXPECT_EQ(Error({"--version=1"}), "--version takes no value");
}

TEST(WebhookArgsTest, TlsFilesAreRequired) {
  EXPECT_EQ(Error({}), "--tls-cert FILE is required");
  EXPECT_EQ(Error({"--tls-cert", "c.pem"}), "--tls-key FILE is required");
  EXPECT_EQ(Error({"--tls-cert"}), "--tls-cert needs a value");
  EXPECT_EQ(Error({"--tls-cert="}), "--tls-cert: empty value");
}

TEST(WebhookArgsTest, UnknownOptionsGetASuggestion) {
  EXPECT_EQ(Error({"--socket-guid", "5"}),
            "unknown option '--socket-guid'; did you mean '--socket-gid'?");
  EXPECT_EQ(Error({"--port", "5"}), "unknown option '--port'");
  EXPECT_EQ(Error({"serve"}), "unexpected argument 'serve'");
  EXPECT_EQ(Error(WithTls({"--tls-cert", "d.pem"})), "--tls-cert given twice");
}

TEST(WebhookArgsTest, BadValuesNameTheirOption) {
  EXPECT_EQ(Error(WithTls({"--listen", "8443"})), "--listen: '8443' is not ADDR:PORT");
  EXPECT_EQ(Error(WithTls({"--listen", ":8443"})), "--listen: ':8443' has no address");
  EXPECT_EQ(Error(WithTls({"--listen", "0.0.0.0:70000"})),
            "--listen: '0.0.0.0:70000' has no port from 1 to 65535");
  EXPECT_EQ(Error(WithTls({"--listen", "0.0.0.0:0"})),
            "--listen: '0.0.0.0:0' has no port from 1 to 65535");
  EXPECT_THAT(Error(WithTls({"--listen", "::1:8443"})), HasSubstr("in brackets"));
  EXPECT_EQ(Error(WithTls({"--shim-dir", "shim"})), "--shim-dir: 'shim' is not absolute");
  EXPECT_EQ(Error(WithTls({"--socket-dir", "/a:b"})),
            "--socket-dir: '/a:b' holds ':' or a space, which LD_PRELOAD cannot carry");
  EXPECT_EQ(Error(WithTls({"--socket-gid", "-1"})),
            "--socket-gid: '-1' is not a group id from 0 to 4294967294");
  EXPECT_EQ(Error(WithTls({"--socket-gid", "missile"})),
            "--socket-gid: 'missile' is not a group id from 0 to 4294967294");
}

}  // namespace
}  // namespace missile::webhook
