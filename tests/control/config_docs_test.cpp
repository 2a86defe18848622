// docs/config.md and the configuration table must not drift apart.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "common/config.hpp"

namespace sparcoll::test {

const char* source_dir();  // generated from source_dir.cpp.in

namespace {

// Every field of Options as text, to compare two Options as a whole.
std::string dump(const Options& o) {
  std::ostringstream out;
  out << o.rank << '|' << o.world_size << '|' << o.store << '|' << o.job_token << '|' << o.store_server << '|'
      << static_cast<int>(o.role) << '|' << o.aggregator_index << '|' << o.transport << '|' << o.algo << '|'
      << o.aggregators << '|' << o.block_elems << '|' << o.lanes << '|' << o.fusion << '|' << o.threads << '|';
  for (int core : o.pin_cores) out << core << ',';
  out << '|' << o.max_inflight << '|' << o.max_message << '|' << o.poll_mode << '|' << o.deadline_ms << '|'
      << o.connect_timeout_ms << '|' << o.tcp_addr << '|' << o.shm_ring_bytes << '|' << o.log_level;
  return out.str();
}

TEST(ConfigDocs, DocsContainTheGeneratedTable) {
  const std::string path = std::string(source_dir()) + "/docs/config.md";
  std::ifstream file(path);
  ASSERT_TRUE(file.good()) << "cannot read " << path;
  std::stringstream text;
  text << file.rdbuf();
  const std::string table = config_markdown_table();
  EXPECT_NE(text.str().find(table), std::string::npos)
      << path << " is out of date; replace its table with:\n"
      << table;
}

TEST(ConfigDocs, DocumentedDefaultsAreTheOptionsInitialisers) {
  const Options defaults;
  for (const ConfigVariable& v : config_variables()) {
    // Descriptions such as "(from launcher)" are not values.
    if (v.parse == nullptr || v.default_text[0] == '(') continue;
    Options parsed;
    Status st = v.parse(v.default_text, &parsed);
    EXPECT_TRUE(st.ok()) << v.name << ": " << st.message();
    EXPECT_EQ(dump(parsed), dump(defaults)) << v.name << " documents default '" << v.default_text << "'";
  }
}

TEST(ConfigDocs, EveryRowIsComplete) {
  for (const ConfigVariable& v : config_variables()) {
    EXPECT_EQ(std::string(v.name).rfind("SPARCOLL_", 0), 0u) << v.name;
    EXPECT_NE(std::string(v.help), "") << v.name;
    EXPECT_EQ(std::string(v.help).find('|'), std::string::npos) << v.name << ": a pipe breaks the markdown table";
  }
}

}  // namespace
}  // namespace sparcoll::test
