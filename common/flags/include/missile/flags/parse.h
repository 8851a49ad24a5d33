// The tools' command lines through CLI11: one call that parses and turns CLI11's errors into
// one-line InvalidArgument reasons in the tools' own words, with "did you mean" for a mistyped
// option. Each tool declares its options on a CLI::App; values are checked after parsing.
//
// Every option takes its value as "--name VALUE" or "--name=VALUE"; a value is taken as is, even
// when it starts with '-' ("--priority -5"), and "--name=" gives an empty value. A flag given a
// value ("--json=yes") is refused. An option given twice keeps the last value (Configure); a tool
// that refuses repeats counts them. Thread safety: an App belongs to one thread; the functions keep
// no state.
#ifndef MISSILE_FLAGS_PARSE_H_
#define MISSILE_FLAGS_PARSE_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace missile::flags {

// Sets a fresh App up before options are added: no CLI11 --help (each tool prints its own usage
// text, which help2man reads), flags that take no value, the last of repeated values wins.
void Configure(CLI::App& app);

// Parses `args` (without argv[0]) into `app`. InvalidArgument, one line, for: an unknown option
// ("unknown option '--jsn'; did you mean '--json'?", the candidates being `app`'s options), an
// argument no option or positional takes ("unexpected argument 'x'"), a missing value ("--config
// needs a value"), a value given to a flag ("--json takes no value"), and a value of the wrong
// type (CLI11's reason).
absl::Status Parse(CLI::App& app, const std::vector<std::string>& args);

// Every name of `app`'s options ("--config", "-h"), for suggestions.
std::vector<std::string> OptionNames(const CLI::App& app);

}  // namespace missile::flags

#endif  // MISSILE_FLAGS_PARSE_H_
