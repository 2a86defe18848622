// The configuration table: one row per SPARCOLL_* variable (its Options field, default, help
// text, launcher fallbacks and parser). Options::from_env(), Options::validate(), the unknown-
// variable warning and docs/config.md are all driven by this one table; a new knob is one new
// row in config.cpp, or in its driver's option table (drivers/<name>/<name>_options.cpp), and a
// line in docs/config.md, which a unit test keeps in step.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sparcoll/options.hpp"
#include "sparcoll/status.hpp"

namespace sparcoll {

struct ConfigVariable {
  const char* name;          // "SPARCOLL_LANES"
  const char* field;         // Options field ("lanes"); for variables read elsewhere, who reads it
  const char* default_text;  // as shown in docs; "(...)" marks a description, not a value
  const char* help;
  // Launcher variables consulted, in order, only when `name` is unset.
  std::vector<const char*> fallbacks;
  // Parses the text into the field. The message is the reason only ("not a positive
  // integer"); the caller prefixes "NAME='text': ". Null for variables read elsewhere.
  Status (*parse)(const std::string& text, Options* out);
};

class ConfigProblems;  // config_rows.hpp

// A driver's own variables. Every driver folder defines one (drivers/<name>/<name>_options.cpp),
// compiled whether or not the driver itself builds, so the table, docs/config.md and the
// unknown-variable warning are the same in every build; drivers/meson.build lists them in
// driver_option_list.cpp. Their names are SPARCOLL_TRANSPORT's values besides auto.
struct DriverOptionTable {
  const char* driver;                                // "shm"
  std::vector<ConfigVariable> (*variables)();        // its rows, in the order docs/config.md shows them
  // Ranges and combinations; null when every value its rows parse is valid.
  void (*validate)(const Options& options, ConfigProblems& problems);
};
// Every driver folder's table, in the order of drivers/meson.build, then a null.
extern const DriverOptionTable* const kDriverOptionTables[];

// The core's rows, then every driver's, then the variables read outside the library.
const std::vector<ConfigVariable>& config_variables();

// "| variable | option field | default | meaning |" and one row per variable, as in docs/config.md.
std::string config_markdown_table();

// The known variable closest to `unknown` by edit distance, or "" when none is close enough to
// be a plausible typo.
std::string closest_config_variable(std::string_view unknown);

// Sets one option by name (config_set.cpp; Options::set and sparcoll_options_set): `key` is an
// Options field ("block_elems") or its variable ("SPARCOLL_BLOCK_ELEMS"), `value` the text the
// variable would hold. Parses like from_env(); ranges and combinations are checked later by
// Options::validate(). The message names the key, its variable and the reason.
Status set_config_value(Options* options, std::string_view key, const std::string& value);

}  // namespace sparcoll
