#include "policy_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace missile::daemon {
namespace {

constexpr int64_t kVersion = 1;

// Tenants are kept sorted by name, then uid.
bool Before(const TenantPolicyState& a, std::string_view name, uint32_t uid) {
  const std::string_view a_name(a.name);
  if (a_name != name) return a_name < name;
  return a.uid < uid;
}

std::string Line(const toml::node& node) {
  return absl::StrCat("line ", node.source().begin.line, ": ");
}

// Reads an integer key of `table` into `out` when present; false (with `error` set) when it
// is not an integer in [lo, hi].
template <typename T>
bool ReadInt(const toml::table& table, std::string_view key, int64_t lo, int64_t hi,
             std::optional<T>* out, std::string* error) {
  const toml::node* node = table.get(key);
  if (node == nullptr) return true;
  std::optional<int64_t> v = node->value_exact<int64_t>();
  if (!v || *v < lo || *v > hi) {
    *error = absl::StrCat(Line(*node), std::string(key), ": must be an integer in [", lo, ", ", hi,
                          "]");
    return false;
  }
  *out = static_cast<T>(*v);
  return true;
}

constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max();
// A latency budget's range, as [compute] ls_budget_pct's.
constexpr int64_t kMinBudgetPct = 100;
constexpr int64_t kMaxBudgetPct = 1000;

bool ReadClass(const toml::table& root, std::string_view cls, ClassPolicyState* out,
               std::string* error) {
  const toml::table* table = root["classes"][cls].as_table();
  if (table == nullptr) return true;
  return ReadInt(*table, "priority", -20, 19, &out->priority, error) &&
         ReadInt(*table, "tenant_quota_bytes", 0, kMaxBytes, &out->tenant_quota_bytes, error) &&
         ReadInt(*table, "class_quota_bytes", 0, kMaxBytes, &out->class_quota_bytes, error) &&
         ReadInt(*table, "budget_pct", kMinBudgetPct, kMaxBudgetPct, &out->budget_pct, error);
}

bool ReadTenant(const toml::table& table, TenantPolicyState* out, std::string* error) {
  std::optional<std::string> name = table["name"].value<std::string>();
  std::optional<std::string> cls_name = table["class"].value<std::string>();
  if (!name || name->empty() || !cls_name) {
    *error = Line(table) + "a tenant needs a name and a class";
    return false;
  }
  absl::StatusOr<TenantClass> cls = ParseTenantClass(*cls_name);
  if (!cls.ok()) {
    *error = Line(table) + std::string(cls.status().message());
    return false;
  }
  std::optional<uint32_t> uid, weight;
  std::optional<int> priority;
  if (!ReadInt(table, "uid", 0, std::numeric_limits<uint32_t>::max(), &uid, error) ||
      !ReadInt(table, "priority", -20, 19, &priority, error) ||
      !ReadInt(table, "weight", 1, 1 << 20, &weight, error) ||
      !ReadInt(table, "quota_bytes", 0, kMaxBytes, &out->quota_bytes, error) ||
      !ReadInt(table, "budget_pct", kMinBudgetPct, kMaxBudgetPct, &out->budget_pct, error)) {
    return false;
  }
  if (!uid || !priority || !weight) {
    *error = Line(table) + "a tenant needs uid, priority and weight";
    return false;
  }
  out->name = *name;
  out->cls = *cls;
  out->uid = *uid;
  out->priority = *priority;
  out->weight = *weight;
  return true;
}

void WriteClass(std::ostringstream& out, const char* name, const ClassPolicyState& c) {
  if (c == ClassPolicyState{}) return;
  out << "\n[classes." << name << "]\n";
  if (c.priority) out << "priority = " << *c.priority << "\n";
  if (c.tenant_quota_bytes) out << "tenant_quota_bytes = " << *c.tenant_quota_bytes << "\n";
  if (c.class_quota_bytes) out << "class_quota_bytes = " << *c.class_quota_bytes << "\n";
  if (c.budget_pct) out << "budget_pct = " << *c.budget_pct << "\n";
}

absl::Status ErrnoStatus(const std::string& what) {
  const int err = errno;
  return absl::Status(absl::ErrnoToStatusCode(err), what + ": " + strerror(err));
}

}  // namespace

const TenantPolicyState* PolicyState::Find(std::string_view name, uint32_t uid) const {
  for (const TenantPolicyState& t : tenants) {
    if (t.name == name && t.uid == uid) return &t;
  }
  return nullptr;
}

void PolicyState::Put(const TenantPolicyState& tenant) {
  auto it = std::find_if(tenants.begin(), tenants.end(), [&](const TenantPolicyState& t) {
    return !Before(t, tenant.name, tenant.uid);
  });
  if (it != tenants.end() && it->name == tenant.name && it->uid == tenant.uid) {
    *it = tenant;
  } else {
    tenants.insert(it, tenant);
  }
}

bool PolicyState::empty() const {
  return ls == ClassPolicyState{} && be == ClassPolicyState{} && tenants.empty();
}

std::string FormatPolicyState(const PolicyState& state) {
  std::ostringstream out;
  out << "# Policy set with missilectl set, kept by missiled across restarts. Written by missiled;\n"
      << "# edits while it runs are lost at the next change. Tenants are matched by name and uid.\n"
      << "version = " << kVersion << "\n";
  WriteClass(out, "ls", state.ls);
  WriteClass(out, "be", state.be);
  for (const TenantPolicyState& t : state.tenants) {
    // Names are checked at registration (letters, digits, '-', '_', '.'): nothing to escape.
    out << "\n[[tenants]]\nname = \"" << t.name << "\"\nuid = " << t.uid << "\nclass = \""
        << TenantClassName(t.cls) << "\"\npriority = " << t.priority << "\nweight = " << t.weight
        << "\n";
    if (t.quota_bytes) out << "quota_bytes = " << *t.quota_bytes << "\n";
    if (t.budget_pct) out << "budget_pct = " << *t.budget_pct << "\n";
  }
  return out.str();
}

absl::StatusOr<PolicyState> ParsePolicyState(std::string_view text) {
  toml::table root;
  try {
    root = toml::parse(text);
  } catch (const toml::parse_error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.source().begin.line, ": ", std::string(e.description())));
  }
  if (root["version"].value<int64_t>() != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat("not a version ", kVersion, " state file"));
  }
  for (const auto& [key, node] : root) {
    const std::string_view k = key.str();
    if (k != "version" && k != "classes" && k != "tenants") {
      return absl::InvalidArgumentError(Line(node) + "unknown key '" + std::string(k) + "'");
    }
  }
  PolicyState state;
  std::string error;
  if (!ReadClass(root, "ls", &state.ls, &error) || !ReadClass(root, "be", &state.be, &error)) {
    return absl::InvalidArgumentError(error);
  }
  if (const toml::node* tenants = root.get("tenants"); tenants != nullptr) {
    const toml::array* array = tenants->as_array();
    if (array == nullptr) return absl::InvalidArgumentError(Line(*tenants) + "tenants: not a list");
    for (const toml::node& node : *array) {
      const toml::table* table = node.as_table();
      TenantPolicyState t;
      if (table == nullptr) return absl::InvalidArgumentError(Line(node) + "tenant: not a table");
      if (!ReadTenant(*table, &t, &error)) return absl::InvalidArgumentError(error);
      if (state.Find(t.name, t.uid) != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(Line(node), "tenant '", t.name, "' of uid ",
                                                       t.uid, " is listed twice"));
      }
      state.Put(t);
    }
  }
  return state;
}

absl::StatusOr<PolicyState> LoadPolicyState(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus(path);
  std::string text;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  const int err = errno;
  close(fd);
  if (n < 0) {
    errno = err;
    return ErrnoStatus(path);
  }
  absl::StatusOr<PolicyState> state = ParsePolicyState(text);
  if (!state.ok()) return absl::InvalidArgumentError(path + ": " + std::string(state.status().message()));
  return state;
}

absl::Status SavePolicyState(const std::string& path, const PolicyState& state) {
  const std::string text = FormatPolicyState(state);
  const std::string temp = path + ".tmp";
  int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return ErrnoStatus(temp);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = ErrnoStatus(temp);
      close(fd);
      unlink(temp.c_str());
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    absl::Status s = ErrnoStatus("fsync " + temp);
    close(fd);
    unlink(temp.c_str());
    return s;
  }
  close(fd);
  if (rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status s = ErrnoStatus("rename " + temp);
    unlink(temp.c_str());
    return s;
  }
  // The rename itself is durable once the directory is.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  int dir_fd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return absl::OkStatus();
}

}  // namespace missile::daemon
