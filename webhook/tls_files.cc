#include "tls_files.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/status/statusor.h"
#include "missile/common/status_macros.h"

namespace missile::webhook {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

absl::StatusOr<std::string> ReadWhole(const std::string& what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string why = what + " " + path + ": " + std::strerror(err);
    return err == ENOENT   ? absl::NotFoundError(why)
           : err == EACCES ? absl::PermissionDeniedError(why)
                           : absl::InvalidArgumentError(why);
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// An encrypted key is refused rather than asked for a passphrase on the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

std::unique_ptr<BIO, BioFree> MemoryBio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

}  // namespace

absl::Status CheckTlsFiles(const std::string& cert_path, const std::string& key_path) {
  MISSILE_ASSIGN_OR_RETURN(std::string cert_text, ReadWhole("--tls-cert", cert_path));
  MISSILE_ASSIGN_OR_RETURN(std::string key_text, ReadWhole("--tls-key", key_path));

  std::unique_ptr<X509, X509Free> cert(
      PEM_read_bio_X509(MemoryBio(cert_text).get(), nullptr, NoPassphrase, nullptr));
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(MemoryBio(key_text).get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (cert == nullptr) {
    return absl::InvalidArgumentError("--tls-cert " + cert_path + ": no PEM certificate in it");
  }
  if (key == nullptr) {
    return absl::InvalidArgumentError("--tls-key " + key_path +
                                      ": no PEM private key in it (or it is encrypted)");
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("--tls-key " + key_path + " is not the key of --tls-cert " +
                                      cert_path);
  }
  return absl::OkStatus();
}

}  // namespace missile::webhook
