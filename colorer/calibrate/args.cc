#include "args.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "missile/common/status_macros.h"
#include "missile/flags/parse.h"

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
  // Numbers are read as text and checked here, so each error names its flag and its range.
  std::string chunks_text, sample_text, seed_text, device_text;
  CLI::App app;
  flags::Configure(app);
  app.add_flag("-h,--help", out.help);
  app.add_flag("--version", out.version);
  app.add_flag("--quick", out.quick);
  app.add_flag("--json", out.json);
  app.add_flag("--channel-map", out.channel_map);
  CLI::Option* out_dir = app.add_option("--out", out.out_dir);
  CLI::Option* chunks_flag = app.add_option("--chunks", chunks_text);
  CLI::Option* sample_flag = app.add_option("--sample", sample_text);
  CLI::Option* seed_flag = app.add_option("--seed", seed_text);
  CLI::Option* device_flag = app.add_option("--device", device_text);
  if (absl::Status s = flags::Parse(app, args); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(s.message(), " (try --help)"));
  }
  if (out_dir->count() > 0 && out.out_dir.empty()) return FlagError("--out", "empty directory");
  if (chunks_flag->count() > 0) {
    MISSILE_ASSIGN_OR_RETURN(chunks,
                             Number<uint32_t>("--chunks", chunks_text, kMinChunks, kMaxChunks));
  }
  if (sample_flag->count() > 0) {
    MISSILE_ASSIGN_OR_RETURN(sample,
                             Number<uint32_t>("--sample", sample_text, kMinSample, kMaxSample));
  }
  if (seed_flag->count() > 0) {
    MISSILE_ASSIGN_OR_RETURN(out.seed, Number<uint64_t>("--seed", seed_text, 0, UINT64_MAX));
  }
  if (device_flag->count() > 0) {
    MISSILE_ASSIGN_OR_RETURN(out.device, Number<int>("--device", device_text, 0, 1023));
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
