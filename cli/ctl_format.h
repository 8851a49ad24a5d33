// missilectl's output: aligned tables for people, JSON for scripts, built from the Admin
// service's responses. Pure functions: thread-safe.
#ifndef MISSILE_CLI_CTL_FORMAT_H_
#define MISSILE_CLI_CTL_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "missile/v1/missile.pb.h"

namespace missile::cli {

// Rows of cells (the first row is the header), left-aligned in columns two spaces apart, one
// line each, no trailing spaces. Rows may be shorter than others.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// "42s", "12m05s", "3h04m", "2d03h".
std::string FormatDuration(uint64_t seconds);

// `missilectl status`: version and uptime, one block per GPU (pool, colours, note), then the
// class policies.
std::string FormatStatus(const v1::StatusResponse& status);

// `missilectl tenants`: PID NAME CLASS PRIO WEIGHT USED/QUOTA AGE, sorted by pid; USED/QUOTA
// lists every GPU as "0: 1.2 GiB / 8.0 GiB".
std::string FormatTenants(const v1::ListTenantsResponse& tenants);

// `missilectl set`: "changed N tenant(s)".
std::string FormatSetPolicy(const v1::SetPolicyResponse& response);

// The message as one line of JSON with the proto field names, every field present (zeros too),
// and a trailing newline.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

}  // namespace missile::cli

#endif  // MISSILE_CLI_CTL_FORMAT_H_
