// The server's TLS certificate and key, checked before the server starts so that a wrong file
// is named in the error (the HTTP library only says that it could not set up TLS).
// Thread safety: pure functions.
#ifndef MISSILE_WEBHOOK_TLS_FILES_H_
#define MISSILE_WEBHOOK_TLS_FILES_H_

#include <string>

#include "absl/status/status.h"

namespace missile::webhook {

// OK when `cert_path` holds a PEM certificate and `key_path` a PEM private key that belongs to
// it. Otherwise an error naming the file: NOT_FOUND or PERMISSION_DENIED when it cannot be
// read, INVALID_ARGUMENT when it is not PEM of the right kind or the key is another
// certificate's.
absl::Status CheckTlsFiles(const std::string& cert_path, const std::string& key_path);

}  // namespace missile::webhook

#endif  // MISSILE_WEBHOOK_TLS_FILES_H_
