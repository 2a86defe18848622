// The headers nearly every test file includes, precompiled once per test binary (tests/meson.build,
// cpp_pch): parsing GoogleTest and the standard library took about 2 s of every test file's
// compile, a quarter of the build's time spent on tests, three times over in CI (plain, ASan,
// TSan builds). System headers only: a change to sparcoll's own headers rebuilds just the files
// that include them. Each test file still includes what it uses.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
