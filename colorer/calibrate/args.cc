#include "args.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace missile::calibrate {
namespace {

absl::Status FlagError(const std::string& flag, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", what));
}

template <typename T>
absl::StatusOr<T> Number(const std::string& flag, const std::string& text, uint64_t lo,
                         uint64_t hi) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) return FlagError(flag, "'" + text + "' is not a number");
  if (v < lo || v > hi) {
    return FlagError(flag, absl::StrCat(v, " is outside [", lo, ", ", hi, "]"));
  }
  return static_cast<T>(v);
}

}  // namespace

std::string Usage() {
  return absl::StrCat(
      "usage: missile-calibrate [--out DIR] [--chunks N] [--sample N] [--seed S] [--quick]\n"
      "                         [--device ORDINAL] [--json] [--channel-map]\n"
      "Measures how far VRAM channel colouring can isolate tenants on one GPU and writes\n"
      "DIR/<GPU uuid>.toml, the profile missiled loads. With --channel-map, recovers the\n"
      "channel hash inside one chunk instead and writes DIR/<GPU uuid>.channels.toml (and\n"
      ".channels.txt, .channels.pairs.csv, .channels.scan.csv beside it).\n"
      "  --out DIR        profile directory (default ",
      kDefaultProfileDir,
      ")\n"
      "  --chunks N       2 MiB chunks to allocate (default 4096 = 8 GiB; --quick 1024)\n"
      "  --sample N       chunks the interference classifier sorts (default 64; --quick 16)\n"
      "  --seed S         seed of every random chunk selection (default 1)\n"
      "  --quick          small sizes and few repeats: a smoke run\n"
      "  --device ORDINAL CUDA device (default 0)\n"
      "  --json           print a JSON summary on stdout (the table goes to stderr)\n"
      "  --channel-map    recover the VRAM channel hash below the chunk size (about 2 minutes;\n"
      "                   --quick about 20 s)\n"
      "  -h, --help       this text\n"
      "  --version        print the version and exit\n");
}

absl::StatusOr<CalibrateArgs> ParseArgs(const std::vector<std::string>& args) {
  CalibrateArgs out;
  std::optional<uint32_t> chunks, sample;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (absl::StartsWith(flag, "--")) {
      if (const size_t eq = flag.find('='); eq != std::string::npos) {
        inline_value = flag.substr(eq + 1);
        flag.resize(eq);
      }
    }
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) return FlagError(flag, "needs a value");
      return args[++i];
    };
    auto no_value = [&]() -> absl::Status {
      return inline_value ? FlagError(flag, "takes no value") : absl::OkStatus();
    };
    if (flag == "-h" || flag == "--help") {
      out.help = true;
    } else if (flag == "--version") {
      if (absl::Status s = no_value(); !s.ok()) return s;
      out.version = true;
    } else if (flag == "--quick" || flag == "--json" || flag == "--channel-map") {
      if (absl::Status s = no_value(); !s.ok()) return s;
      (flag == "--quick" ? out.quick : flag == "--json" ? out.json : out.channel_map) = true;
    } else if (flag == "--out") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      if (v->empty()) return FlagError(flag, "empty directory");
      out.out_dir = *v;
    } else if (flag == "--chunks" || flag == "--sample" || flag == "--seed" || flag == "--device") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      if (flag == "--chunks") {
        absl::StatusOr<uint32_t> n = Number<uint32_t>(flag, *v, kMinChunks, kMaxChunks);
        if (!n.ok()) return n.status();
        chunks = *n;
      } else if (flag == "--sample") {
        absl::StatusOr<uint32_t> n = Number<uint32_t>(flag, *v, kMinSample, kMaxSample);
        if (!n.ok()) return n.status();
        sample = *n;
      } else if (flag == "--seed") {
        absl::StatusOr<uint64_t> n = Number<uint64_t>(flag, *v, 0, UINT64_MAX);
        if (!n.ok()) return n.status();
        out.seed = *n;
      } else {
        absl::StatusOr<int> n = Number<int>(flag, *v, 0, 1023);
        if (!n.ok()) return n.status();
        out.device = *n;
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", args[i], "' (try --help)"));
    }
  }
  out.chunks = chunks.value_or(out.channel_map ? kMinChunks : out.quick ? 1024 : 4096);
  out.sample = sample.value_or(out.quick || out.channel_map ? 16 : 64);
  if (out.sample > out.chunks) {
    return FlagError("--sample", absl::StrCat(out.sample, " exceeds --chunks ", out.chunks));
  }
  return out;
}

Plan MakePlan(const CalibrateArgs& args) {
  Plan p;
  p.chunks = args.chunks;
  p.sample = args.sample;
  p.seed = args.seed;
  p.half_seeds = {args.seed, args.seed + 1, args.seed + 2};
  p.latency_chunks = std::min<uint32_t>(256, args.chunks);
  if (args.quick) {
    p.target_ms = 2;
    p.bandwidth_repeats = 3;
    p.half_seeds = {args.seed};
    p.split_repeats = 3;
    p.oracle_repeats = 3;
    p.oracle_target_ms = 2;
    p.classifier_max_repeats = 2;
    p.max_oracle_calls = 150;
    p.latency_iters = 16;
    p.latency_scan_bytes = 16384;
    p.latency_chunks = std::min<uint32_t>(32, args.chunks);
  }
  return p;
}

}  // namespace missile::calibrate
