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
// Daemon-supplied text for a terminal: control characters become '?'.
std::string Printable(const std::string& text);

std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// "42s", "12m05s", "3h04m", "2d03h".
std::string FormatDuration(uint64_t seconds);

// `missilectl status`: version and uptime, one block per GPU (pool, colours, note), then the
// class policies and, when the daemon paces, the pacing policy on one line.
std::string FormatStatus(const v1::StatusResponse& status);
// Whether tenants run on MPS, with a warning when they do (part of FormatStatus).
std::string FormatMps(const v1::MpsStatus& mps);

// The pacing policy on one line: "pacing: on, window 8 items / 100 us, LS idle 200 us, stale
// 200 ms, max hold 20 ms, unknown 50 us, share slack 2000 us" (max hold 0: "no max hold").
std::string FormatPacingPolicy(const v1::PacingPolicy& policy);

// `missilectl tenants`: PID NAME CLASS PRIO WEIGHT USED/QUOTA PCIE HELD IN-FLIGHT LS-BUSY AGE,
// sorted by pid; USED/QUOTA lists every GPU as "0: 1.2 GiB / 8.0 GiB". The GPU work columns,
// per GPU where the tenant's work is paced: HELD (BE) the total time held and its share of
// about the last second, "0: 1.2 s (35%)"; IN FLIGHT (BE) items now, "0: 3"; LS BUSY (LS) the
// share of about the last second it had work in flight, "0: 40%". "-" for the other class and
// for a tenant with no paced work.
std::string FormatTenants(const v1::ListTenantsResponse& tenants);

// "1.2 s" from 1 s up, "35 ms" below (rounded), "0 ms" for none.
std::string FormatHeld(double ms);

// `missilectl set`: "changed N tenant(s)".
std::string FormatSetPolicy(const v1::SetPolicyResponse& response);

// `missilectl set` with the tenant lists read just before and after the change: the count, then
// one line per tenant the request targets (by pid, name or class, matched in `after`), sorted by
// pid, with each value that changed, before -> after: "4242 web: class be -> ls, priority 10 ->
// -10, weight 110 -> 9548, quota 0: 8.0 GiB -> 16.0 GiB", or "4242 web: unchanged". A tenant
// missing from `before` is listed with its values now.
std::string FormatSetPolicy(const v1::SetPolicyResponse& response,
                            const v1::SetPolicyRequest& request,
                            const v1::ListTenantsResponse& before,
                            const v1::ListTenantsResponse& after);

// `missilectl set` with pacing options: one line per field that changed, "window_us: 100 ->
// 300", or "pacing unchanged" when none did; then the policy now in force (FormatPacingPolicy).
std::string FormatSetPacing(const v1::SetPacingResponse& response);

// The message as one line of JSON, and a trailing newline: protobuf's JSON mapping (proto3) with
// the proto field names and every scalar field present (zeros too); 64-bit integers are strings
// of digits and enums their names ("BEST_EFFORT"), as the mapping has them, so protobuf's JSON
// parser in any language reads the line back. A message field appears only when it is set.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

}  // namespace missile::cli

#endif  // MISSILE_CLI_CTL_FORMAT_H_
