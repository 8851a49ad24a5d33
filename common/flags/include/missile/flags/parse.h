// The tools' command lines through CLI11: one call that parses and turns CLI11's errors into
// one-line InvalidArgument reasons in the tools' own words, with "did you mean" for a mistyped
// option. Each tool declares its options on a CLI::App; values are checked after parsing.
//
// Every option takes its value as "--name VALUE" or "--name=VALUE"; a value is taken as is, even
// when it starts with '-' ("--priority -5"), and "--name=" gives an empty value. A flag given a
// value ("--json=yes") is refused. An option given twice keeps the last value (Configure); a tool
// that refuses repeats asks GivenOnce. A tool with commands ("missilectl status") adds them with
// AddCommand; a tool that runs a program takes its arguments with ParseThenRest. Thread safety: an App belongs to one thread; the functions keep
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

// As Parse, for a tool that runs a program given after its own options: parsing stops at "--" or
// at the first argument that is neither an option nor an option's value, and that argument and
// everything after it go to `rest` unchanged ("--" itself dropped). CLI11 never sees `rest`, so
// no option takes an argument of the program.
absl::Status ParseThenRest(CLI::App& app, const std::vector<std::string>& args,
                           std::vector<std::string>& rest);

// A command of `app` ("status"), configured as Configure does; at most one command is given.
// Options the command shares with `app` must be added to both (a global option may come before
// or after the command). Parse reports, with the command's name in front ("status: unknown
// option ..."), what the command took no meaning from; a word that is no command is "unknown
// command 'stauts'; did you mean 'status'?", or lists the `listed` commands when none is near.
CLI::App* AddCommand(CLI::App& app, const std::string& name, bool listed = true);

// InvalidArgument "--name given twice" (the first option's name) when the options together were
// given more than once: one option, or the same one added to `app` and to its commands.
absl::Status GivenOnce(const std::vector<const CLI::Option*>& spellings);

// Every name of `app`'s options ("--config", "-h"), for suggestions.
std::vector<std::string> OptionNames(const CLI::App& app);

}  // namespace missile::flags

#endif  // MISSILE_FLAGS_PARSE_H_
