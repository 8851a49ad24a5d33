#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>

#include "errors.h"
#include "tpcs.h"

namespace fakecuda {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t pos = s.find(sep);
    parts.push_back(Trim(s.substr(0, pos)));
    if (pos == std::string_view::npos) break;
    s.remove_prefix(pos + 1);
  }
  return parts;
}

bool ParseUint(std::string_view text, int base, uint64_t* value) {
  text = Trim(text);
  if (base == 16 && (text.starts_with("0x") || text.starts_with("0X"))) text.remove_prefix(2);
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value, base);
  return ec == std::errc() && end == text.data() + text.size();
}

bool ParseDouble(std::string_view text, double* value) {
  const std::string s(Trim(text));
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *value = std::strtod(s.c_str(), &end);
  return errno == 0 && end == s.c_str() + s.size() && std::isfinite(*value) && *value >= 0;
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

void AddError(Config* c, const std::string& what) {
  if (!c->error.empty()) c->error += "; ";
  c->error += what;
}

}  // namespace

bool ParseByteSize(std::string_view text, uint64_t* bytes) {
  text = Trim(text);
  uint64_t multiplier = 1;
  // Accept an optional "B", "iB" after the unit letter.
  if (text.ends_with("iB")) {
    text.remove_suffix(2);
  } else if (text.ends_with("B") || text.ends_with("b")) {
    text.remove_suffix(1);
  }
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K':
        multiplier = 1ull << 10;
        break;
      case 'm':
      case 'M':
        multiplier = 1ull << 20;
        break;
      case 'g':
      case 'G':
        multiplier = 1ull << 30;
        break;
      case 't':
      case 'T':
        multiplier = 1ull << 40;
        break;
      default:
        break;
    }
    if (multiplier != 1) text.remove_suffix(1);
  }
  double number = 0;
  if (!ParseDouble(text, &number)) return false;
  const double value = number * static_cast<double>(multiplier);
  if (value > 1.8e19) return false;
  *bytes = static_cast<uint64_t>(value);
  return true;
}

bool ParseErrorCode(std::string_view text, CUresult* code) {
  text = Trim(text);
  uint64_t number = 0;
  if (ParseUint(text, 10, &number)) {
    if (number > 100000) return false;
    *code = static_cast<CUresult>(number);
    return true;
  }
  return ErrorByName(text, code);
}

namespace {

// The devices, the links, the engine and the state's name.
void ReadMachine(Config& c) {
  if (const char* v = Env("FAKECUDA_DEVICES")) {
    uint64_t n = 0;
    if (!ParseUint(v, 10, &n) || n > kMaxDevices) {
      AddError(&c, std::string("FAKECUDA_DEVICES=") + v + " is not a number from 0 to 8");
    } else {
      c.num_devices = static_cast<int>(n);
    }
  }
  if (const char* v = Env("FAKECUDA_TOTAL_MEM")) {
    uint64_t bytes = 0;
    if (!ParseByteSize(v, &bytes) || bytes < kGranularity || bytes > (2ull << 40)) {
      AddError(&c, std::string("FAKECUDA_TOTAL_MEM=") + v + " is not a size from 2M to 2T");
    } else {
      c.total_mem = bytes / kGranularity * kGranularity;
    }
  }
  if (const char* v = Env("FAKECUDA_PCIE_BYTES_PER_US")) {
    double rate = 0;
    if (!ParseDouble(v, &rate)) {
      AddError(&c, std::string("FAKECUDA_PCIE_BYTES_PER_US=") + v + " is not a rate >= 0");
    } else {
      c.pcie_bytes_per_us = rate;
    }
  }
  if (const char* v = Env("FAKECUDA_ENGINE")) {
    const std::string_view value = Trim(v);
    if (value != "0" && value != "1") {
      AddError(&c, std::string("FAKECUDA_ENGINE=") + v + " is not 0 or 1");
    } else {
      c.engine_sharing = value == "1";
    }
  }
  if (const char* v = Env("FAKECUDA_TIMESLICE_US")) {
    uint64_t us = 0;
    if (!ParseUint(v, 10, &us) || us > 1'000'000) {
      AddError(&c, std::string("FAKECUDA_TIMESLICE_US=") + v + " is not 0..1000000");
    } else {
      c.timeslice_ns = us * 1000;
    }
  }
  if (const char* v = Env("FAKECUDA_SHM")) {
    const std::string_view name(v);
    if (name.size() < 2 || name.size() > 200 || name[0] != '/' ||
        name.find('/', 1) != std::string_view::npos) {
      AddError(&c, std::string("FAKECUDA_SHM=") + v + " is not of the form /name");
    } else {
      c.shm_name = v;
    }
  }
}

// How physical frames are handed out and mapped to channels.
void ReadPhysical(Config& c) {
  if (const char* v = Env("FAKECUDA_PHYS_SHUFFLE")) {
    uint64_t seed = 0;
    if (!ParseUint(v, 10, &seed)) {
      AddError(&c, std::string("FAKECUDA_PHYS_SHUFFLE=") + v + " is not a decimal seed");
    } else {
      c.phys_shuffle = true;
      c.shuffle_seed = seed;
    }
  }
  if (const char* v = Env("FAKECUDA_CHANNEL_MASKS")) {
    for (std::string_view part : Split(v, ',')) {
      uint64_t mask = 0;
      if (!ParseUint(part, 16, &mask) || mask == 0 || c.channel_masks.size() == 16) {
        AddError(&c, std::string("FAKECUDA_CHANNEL_MASKS=") + v +
                         " is not a list of at most 16 non-zero hex masks");
        c.channel_masks.clear();
        break;
      }
      c.channel_masks.push_back(mask);
    }
  }
}

// Injected failures.
void ReadFailures(Config& c) {
  if (const char* v = Env("FAKECUDA_FAIL")) {
    for (std::string_view rule : Split(v, ',')) {
      if (rule.empty()) continue;
      const std::vector<std::string_view> f = Split(rule, ':');
      FailRule r;
      uint64_t nth = 0;
      bool ok = (f.size() == 2 || f.size() == 3) && !f[0].empty() && ParseUint(f[1], 10, &nth) &&
                nth >= 1;
      if (ok && f.size() == 3) ok = ParseErrorCode(f[2], &r.code);
      if (!ok) {
        AddError(&c, "FAKECUDA_FAIL rule '" + std::string(rule) +
                         "' is not <exported name>:<N>[:<code>]");
        continue;
      }
      r.name = std::string(f[0]);
      r.nth = nth;
      c.fail_rules.push_back(std::move(r));
    }
  }
}

// The TPC layout and the launch callback (tpcs.h, launch_callback.h).
void ReadTpcs(Config& c) {
  if (const char* v = Env("FAKECUDA_DEAD_TPCS")) {
    std::vector<int> dead;
    bool ok = true;
    if (Trim(v) != "none") {
      for (std::string_view part : Split(v, ',')) {
        uint64_t t = 0;
        ok = ok && ParseUint(part, 10, &t) && t < uint64_t{kNumTpcs} &&
             std::find(dead.begin(), dead.end(), static_cast<int>(t)) == dead.end();
        if (ok) dead.push_back(static_cast<int>(t));
      }
    }
    if (!ok || static_cast<int>(dead.size()) == kNumTpcs) {
      AddError(&c, std::string("FAKECUDA_DEAD_TPCS=") + v +
                       " is not 'none' or a list of distinct TPCs from 0 to 71, not all of them");
    } else {
      c.dead_tpcs = std::move(dead);
    }
  }
  for (auto [name, flag] : {std::pair{"FAKECUDA_MPS", &c.mps},
                            std::pair{"FAKECUDA_LAUNCH_CALLBACK", &c.launch_callback}}) {
    if (const char* v = Env(name)) {
      const std::string_view value = Trim(v);
      if (value != "0" && value != "1") {
        AddError(&c, std::string(name) + "=" + v + " is not 0 or 1");
      } else {
        *flag = value == "1";
      }
    }
  }
  if (const char* v = Env("FAKECUDA_LAUNCH_DESC_VERSION")) {
    const std::string_view text = Trim(v);
    const bool hex = text.starts_with("0x") || text.starts_with("0X");
    uint64_t version = 0;
    if (!ParseUint(text, hex ? 16 : 10, &version) || version > 0xff) {
      AddError(&c, std::string("FAKECUDA_LAUNCH_DESC_VERSION=") + v +
                       " is not a byte (decimal or 0x-hex)");
    } else {
      c.launch_desc_version = static_cast<uint8_t>(version);
    }
  }
}

}  // namespace

Config Config::FromEnvironment() {
  Config c;
  c.shm_name = "/fakecuda-" + std::to_string(getuid());
  ReadMachine(c);
  ReadPhysical(c);
  ReadFailures(c);
  ReadTpcs(c);
  if (const char* v = Env("FAKECUDA_ALLOW_WITH_GPU")) c.allow_with_gpu = std::string_view(v) == "1";
  return c;
}

}  // namespace fakecuda
