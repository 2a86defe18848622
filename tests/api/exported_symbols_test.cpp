// libsparcoll.so exports the public API and nothing else (src/api/libsparcoll.map, docs/abi.md):
// every dynamic symbol is checked against the allowed patterns, so an internal symbol that leaks
// (a new namespace, a pattern made too wide) fails here, as does a public one that went missing.
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../integration/launch_util.hpp"

namespace {

using sparcoll::testing::build_path;
using sparcoll::testing::run_program;
using sparcoll::testing::source_path;

const char* const kVersionNode = "SPARCOLL_0";

// The C++ API, as demangled names start: the same list as libsparcoll.map's extern "C++" block.
const std::vector<std::string> kCppPrefixes = {
    "sparcoll::Communicator::", "sparcoll::Request::",      "sparcoll::Options::",
    "sparcoll::Status::",       "sparcoll::Error::",        "typeinfo for sparcoll::Error",
    "typeinfo name for sparcoll::Error", "vtable for sparcoll::Error", "sparcoll::run_aggregator(",
    "sparcoll::error_code_name(", "sparcoll::dtype_name(", "sparcoll::reduce_op_name(",
    "sparcoll::parse_dtype(",    "sparcoll::parse_reduce_op(", "sparcoll::algorithm_name(",
    "sparcoll::parse_algorithm(", "sparcoll::version(", "sparcoll::version_number(",
};

struct Symbol {
  std::string name;       // as linked (mangled for C++)
  std::string version;    // "SPARCOLL_0" from name@@SPARCOLL_0; empty when unversioned
  std::string demangled;  // == name for C symbols
};

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> text(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                    &std::free);
  return status == 0 && text ? std::string(text.get()) : name;
}

std::string library() { return build_path("libsparcoll.so.0"); }

std::string read_source(const std::string& relative) {
  std::ifstream file(source_path(relative));
  EXPECT_TRUE(file) << "cannot read " << relative;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// `nm -D --defined-only --with-symbol-versions`: "<address> <type> <name>@@<version>" per line.
std::vector<Symbol> exported_symbols() {
  const auto r = run_program({"/usr/bin/env", "nm", "-D", "--defined-only", "--with-symbol-versions", library()});
  EXPECT_EQ(r.exit_code, 0) << "nm failed: " << r.err;
  std::vector<Symbol> symbols;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string address, type, name;
    if (!(fields >> address >> type >> name)) continue;
    Symbol s;
    const auto at = name.find('@');
    s.name = name.substr(0, at);
    if (at != std::string::npos) s.version = name.substr(name.find_first_not_of('@', at));
    s.demangled = demangle(s.name);
    symbols.push_back(s);
  }
  return symbols;
}

bool allowed(const Symbol& s) {
  if (s.name == kVersionNode) return true;
  if (std::regex_match(s.name, std::regex("sparcoll_[a-z0-9_]+"))) return true;
  for (const std::string& prefix : kCppPrefixes) {
    if (s.demangled.compare(0, prefix.size(), prefix) == 0) return true;
  }
  return false;
}

TEST(ExportedSymbols, OnlyThePublicApi) {
  const auto symbols = exported_symbols();
  ASSERT_GT(symbols.size(), 20u) << "nm listed too few symbols of " << library();
  std::string leaks;
  for (const Symbol& s : symbols) {
    if (!allowed(s)) leaks += "  " + s.demangled + "\n";
  }
  EXPECT_TRUE(leaks.empty()) << library() << " exports symbols that are not public API (extend "
                             << "src/api/libsparcoll.map only for public API, see docs/abi.md):\n"
                             << leaks;
}

TEST(ExportedSymbols, AllInVersionNodeSparcoll0) {
  std::string unversioned;
  for (const Symbol& s : exported_symbols()) {
    // The node's own name is an absolute symbol without a version.
    if (s.name != kVersionNode && s.version != kVersionNode) {
      unversioned += "  " + s.demangled + " (version '" + s.version + "')\n";
    }
  }
  EXPECT_TRUE(unversioned.empty()) << "symbols outside version node " << kVersionNode << ":\n" << unversioned;
}

TEST(ExportedSymbols, EveryCFunctionOfTheHeader) {
  // Declarations only: comments mention names followed by "(" too.
  const std::string source =
      std::regex_replace(read_source("include/sparcoll/sparcoll.h"), std::regex("/\\*[\\s\\S]*?\\*/"), " ");
  std::set<std::string> declared;
  const std::regex call("\\b(sparcoll_[a-z0-9_]+)\\s*\\(");
  for (auto it = std::sregex_iterator(source.begin(), source.end(), call); it != std::sregex_iterator(); ++it) {
    declared.insert((*it)[1]);
  }
  ASSERT_GT(declared.size(), 10u) << "found too few declarations in sparcoll.h";
  std::set<std::string> exported;
  for (const Symbol& s : exported_symbols()) exported.insert(s.name);
  for (const std::string& name : declared) EXPECT_TRUE(exported.count(name)) << name << " is declared but not exported";
}

// The free functions the C++ headers declare: in their style, a declaration at column 0 ending in
// ";" (members are indented; constexpr and inline ones are defined in the header, need no symbol).
std::set<std::string> declared_free_functions() {
  std::set<std::string> names;
  const std::regex declaration("^(?!constexpr|inline|template|using|typedef|enum|class|struct|namespace|extern|#)"
                               "[A-Za-z_][^;{}()]*?\\b([a-z_][a-z0-9_]*)\\([^;{}]*\\)[^;{}]*;");
  for (const char* header : {"communicator.hpp", "options.hpp", "status.hpp", "types.hpp", "version.hpp"}) {
    std::istringstream lines(read_source(std::string("include/sparcoll/") + header));
    std::string line;
    while (std::getline(lines, line)) {
      std::smatch m;
      if (std::regex_search(line, m, declaration)) names.insert(m[1]);
    }
  }
  return names;
}

TEST(ExportedSymbols, EveryFreeFunctionOfTheCppHeaders) {
  const auto declared = declared_free_functions();
  ASSERT_GE(declared.size(), 8u) << "found too few free functions in include/sparcoll/*.hpp";
  std::vector<std::string> exported;
  for (const Symbol& s : exported_symbols()) exported.push_back(s.demangled);
  for (const std::string& name : declared) {
    const std::string prefix = "sparcoll::" + name + "(";
    const bool found = std::any_of(exported.begin(), exported.end(),
                                   [&](const std::string& e) { return e.compare(0, prefix.size(), prefix) == 0; });
    EXPECT_TRUE(found) << prefix << "...) is declared in include/sparcoll/ but not exported: add "
                       << "sparcoll::" << name << "* to src/api/libsparcoll.map";
  }
}

TEST(ExportedSymbols, TheCppApi) {
  std::set<std::string> exported;
  for (const Symbol& s : exported_symbols()) exported.insert(s.demangled);
  // One of each kind: a member, a constructor, a static, a free function, the exception's typeinfo.
  for (const char* wanted :
       {"sparcoll::Communicator::allreduce(void const*, void*, unsigned long, sparcoll::DataType, sparcoll::ReduceOp)",
        "sparcoll::Communicator::Communicator(sparcoll::Options const&)", "sparcoll::Request::wait()",
        "sparcoll::Options::from_env()", "sparcoll::Options::validate() const",
        "sparcoll::Status::to_string[abi:cxx11]() const", "sparcoll::run_aggregator(sparcoll::Options const&)",
        "sparcoll::version()", "typeinfo for sparcoll::Error"}) {
    EXPECT_TRUE(exported.count(wanted)) << wanted << " is not exported";
  }
}

TEST(ExportedSymbols, VersionedSoname) {
  const auto r = run_program({"/usr/bin/env", "readelf", "-d", library()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Library soname: [libsparcoll.so.0]"), std::string::npos) << r.out;
}

}  // namespace
